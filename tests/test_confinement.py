"""What a check's process can reach: its own temporary folder to write in, and no process
above it (no signal, no ``/proc/<pid>/mem``, no ``environ``), even as root, where the kernel
offers Landlock; the build that runs checks is not dumpable."""

from __future__ import annotations

import ctypes
import errno
import io
import os
import re
import tempfile
from pathlib import Path
from typing import Any

import pytest

from formula_check import wire
from formula_check.messages import Calls, CheckReply, CheckRequest, SnippetFailed, decode_answer
from formula_check.model import Status
from formula_check.runtime import isolation
from formula_check.runtime.confinement import (
    READ_DIR,
    READ_FILE,
    REFER,
    SCOPE_SIGNAL,
    TRUNCATE,
    WRITE_FILE,
    abi_version,
    ruleset_for,
)
from implementations import SDPA_KEEP
from support import CONFINED, parent_pid, shared_engine, spec_for, wait_until

FOLDERS = {
    "/": [("proc", True), ("usr", True), ("dev", True), ("tmp", True), ("swap.img", False)],
    "/proc": [("1", True), ("42", True), ("4242", True), ("cpuinfo", False), ("sys", True)],
    "/dev": [("null", False), ("mem", False), ("nvidia0", False), ("shm", True)],
}


def listing(folder: str) -> list[tuple[str, bool]]:
    return FOLDERS[folder]


def test_the_ruleset_lets_a_check_write_its_folder_and_read_all_but_other_processes() -> None:
    """Pure: what each path is granted. Writes only in the check's folder and to the sink
    devices; reads everywhere but ``/proc/<another pid>``, ``/`` itself never listed."""
    rules = ruleset_for("/tmp/w/check-1", abi=6, pid=42, listing=listing)
    granted = dict(rules.rules)
    assert granted["/tmp/w/check-1"] == rules.handled  # everything, in its own folder
    assert granted["/usr"] == granted["/tmp"] == READ_FILE | READ_DIR
    assert granted["/swap.img"] == READ_FILE
    assert "/proc" not in granted and "/proc/1" not in granted and "/proc/4242" not in granted
    assert granted["/proc/42"] == granted["/proc/sys"] == READ_FILE | READ_DIR
    assert granted["/proc/cpuinfo"] == READ_FILE
    assert granted["/dev/null"] == granted["/dev/nvidia0"] == WRITE_FILE | TRUNCATE
    assert "/dev/mem" not in granted and "/dev/shm" not in granted  # /dev itself: read only
    assert granted["/dev"] == READ_FILE | READ_DIR
    writers = {path for path, rights in rules.rules if rights & WRITE_FILE}
    assert writers == {"/tmp/w/check-1", "/dev/null", "/dev/nvidia0"}
    assert rules.scoped & SCOPE_SIGNAL


def test_the_ruleset_asks_only_for_what_the_kernels_abi_knows() -> None:
    """A right or a scope the kernel's ABI lacks would make it refuse the whole ruleset."""
    first = ruleset_for("/tmp/c", abi=1, pid=42, listing=listing)
    assert not first.handled & (REFER | TRUNCATE) and not first.scoped
    assert dict(first.rules)["/dev/null"] == WRITE_FILE
    assert ruleset_for("/tmp/c", abi=3, pid=42, listing=listing).handled & TRUNCATE
    assert not ruleset_for("/tmp/c", abi=5, pid=42, listing=listing).scoped
    for rules in (first, ruleset_for("/tmp/c", abi=7, pid=42, listing=listing)):
        assert all(rights & ~rules.handled == 0 for _, rights in rules.rules)


DAEMON = """
import os, sys, time
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        print(os.getpid(), flush=True)
        os.close(1)
        time.sleep(60)
    os._exit(0)
"""
"""A daemon: forked twice, in a session of its own; it says its pid and lets go of the pipe."""

PROBES = """
import os, signal, subprocess, sys, tempfile

def probe(name, act):
    try:
        act()
    except OSError:
        print(name, "refused")
    else:
        print(name, "allowed")

def probe_all(above):
    probe("write-own-folder", lambda: open(os.path.join(tempfile.gettempdir(), "a"), "w").write("x"))
    probe("write-devnull", lambda: open(os.devnull, "w").write("x"))
    probe("write-project", lambda: open("written-by-a-check.txt", "w").write("x"))
    probe("mem-of-worker", lambda: open(f"/proc/{above[0]}/mem", "r+b").close())
    for pid in above:
        probe("environ-above", lambda: open(f"/proc/{pid}/environ", "rb").read())
        probe("signal-above", lambda: os.kill(pid, 0))
    probe("kill-worker", lambda: os.kill(above[0], signal.SIGKILL))
    started = subprocess.run([sys.executable, "-c", DAEMON], stdout=subprocess.PIPE, text=True)
    print("daemon", started.stdout.split()[-1])
"""


@pytest.mark.tf
@pytest.mark.skipif(abi_version() < 6, reason="this kernel's Landlock scopes no signals")
def test_a_check_reaches_no_process_above_it_and_writes_only_its_own_folder() -> None:
    """As root too: no rewriting the warm worker through ``/proc/<ppid>/mem``, no reading an
    ancestor's environment, no killing an ancestor (so that a daemon it then leaves is still
    ended), no write into the project. A correct block doing all this still verifies."""
    engine = shared_engine()
    written = engine.root / "written-by-a-check.txt"
    written.unlink(missing_ok=True)  # left by a run without confinement
    assert engine.check(spec_for("attention", SDPA_KEEP + "\nf = attention\n")).status is (
        Status.VERIFIED
    )
    (worker,) = engine.pool.alive_pids()
    above = f"[os.getppid(), {parent_pid(worker)}, {os.getpid()}]"  # worker, zygote, build
    code = f"DAEMON = {DAEMON!r}\n{PROBES}{SDPA_KEEP}\ndef checked(q, k, v, mask=None):\n"
    code += f"    probe_all({above})\n    return attention(q, k, v)\n"
    probing = engine.check(spec_for("attention", code))
    assert probing.status is Status.VERIFIED, probing.headline()
    said = [line.split() for line in probing.stdout.splitlines()]
    outcomes = {(name, outcome) for name, outcome in said if name != "daemon"}
    assert ("write-own-folder", "allowed") in outcomes and ("write-devnull", "allowed") in outcomes
    assert {name for name, outcome in outcomes if outcome == "allowed"} == {
        "write-own-folder",
        "write-devnull",
    }, probing.stdout
    assert len(said) == 12  # each of the three above the check was asked
    (daemon,) = [int(pid) for name, pid in said if name == "daemon"]
    assert wait_until(lambda: not _alive(daemon), 10), "the daemon outlived its check"
    assert not written.exists()


@pytest.mark.tf
def test_the_build_that_runs_checks_is_not_dumpable() -> None:
    """A check running as the build's user cannot read the build's environment or memory."""
    engine = shared_engine()
    assert engine.check(spec_for("attention", SDPA_KEEP + "\nf = attention\n")).status is (
        Status.VERIFIED
    )
    pr_get_dumpable = 3
    assert ctypes.CDLL(None).prctl(pr_get_dumpable, 0, 0, 0, 0) == 0


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rpartition(")")[2].split()[0] != "Z"
    except OSError:
        return False


TOO_LARGE = (
    r"docs/page\.md:6 \[attention\]: error: crashed: its answer \(the values it returned, the "
    r"weights read back, what it printed\) is (\d+) MiB, more than the 256 MiB a check may send "
    r"back; its process was stopped"
)


@pytest.mark.tf
def test_an_answer_past_its_bound_is_a_located_error_and_the_build_never_holds_it() -> None:
    """A returned value of 260 MiB (the bound is 256) is refused from its first bytes: the
    block is an error that says so at its line, and the next block verifies."""
    engine = shared_engine()
    huge = "import tensorflow as tf\ndef f(q, k, v):\n    return tf.zeros((65, 1 << 20))\n"
    result = engine.check(spec_for("attention", huge))
    assert result.status is Status.ERROR
    said = re.fullmatch(TOO_LARGE, result.headline())
    assert said and int(said[1]) >= 260, result.headline()
    assert engine.check(spec_for("attention", SDPA_KEEP + "\nf = attention\n")).status is (
        Status.VERIFIED
    )


HOLDERS = {
    "forked": """
import os, time

def checked(q, k, v, mask=None):
    children = []
    for _ in range(4):
        child = os.fork()
        if child == 0:
            held = b"\\x01" * ({mib} << 20)  # written, so resident
            time.sleep(1.5)  # ten samples of the memory watch, and more
            os._exit(0)
        children.append(child)
    for child in children:
        os.waitpid(child, 0)
    return attention(q, k, v)
""",
    "programs": """
import subprocess, sys

def checked(q, k, v, mask=None):
    hold = "import time; held = b'\\x01' * ({mib} << 20); time.sleep(1.5)"
    children = [subprocess.Popen([sys.executable, "-c", hold]) for _ in range(4)]
    for child in children:
        child.wait()
    return attention(q, k, v)
""",
}
"""Four children that hold memory: forked from the check's process (sharing its pages, and
TensorFlow's), or each a program of its own (sharing nothing)."""


@pytest.mark.tf
@pytest.mark.parametrize("children", sorted(HOLDERS))
def test_the_memory_limit_counts_every_process_of_a_check_not_the_largest(children: str) -> None:
    """Four children of 200 MiB each pass a limit of 800 MiB one by one, not together (the
    worker holds about 250 MiB); four of 20 MiB stay well under, the TensorFlow that forked
    processes share with the worker counted once."""
    engine = shared_engine(memory_limit_mb=800)
    code = SDPA_KEEP + HOLDERS[children]
    heavy = engine.check(spec_for("attention", code.format(mib=200), timeout=60))
    assert heavy.status is Status.ERROR
    assert re.search(
        r"docs/page\.md:6 \[attention\]: error: crashed: the worker and the processes of its "
        r"check exceeded the memory limit of 800 MiB together \(memory_limit_mb\), holding "
        r"\d+ MiB; a fresh worker takes the next check",
        heavy.headline(),
    ), heavy.headline()
    light = engine.check(spec_for("attention", code.format(mib=20), timeout=60))
    assert light.status is Status.VERIFIED, light.headline()


def _writes_outside(request: CheckRequest, arrays: dict[str, Any]) -> tuple[CheckReply, dict]:
    """A check's handler that says whether it could write beside its own folder."""
    beside = os.path.join(os.path.dirname(tempfile.gettempdir()), "beside")
    try:
        with open(beside, "w") as file:
            file.write("x")
    except PermissionError:
        return CheckReply(kind="refused"), {}
    return CheckReply(kind="written"), {}


def _answer(checks: isolation.CheckProcesses) -> tuple[dict[str, Any], Path]:
    request = CheckRequest(root=".", calls=Calls())
    header, _ = wire.read_message(io.BytesIO(checks.run(request, {}, time_limit=30)))
    return header, Path(checks.scratch) / "beside"


@pytest.mark.skipif(not CONFINED, reason="this kernel offers no Landlock")
def test_a_check_process_is_confined_before_its_handler_runs(tmp_path: Path) -> None:
    """No TensorFlow: the check's process forked from this one writes in its own folder only."""
    checks = isolation.CheckProcesses(
        _writes_outside, lambda: None, conversation=[], scratch=str(tmp_path)
    )
    try:
        header, beside = _answer(checks)
    finally:
        checks.close()
    assert decode_answer(header) == CheckReply(kind="refused") and not beside.exists()


def test_a_check_the_kernel_refuses_to_confine_runs_no_code(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Where the kernel offers Landlock but refuses a ruleset, the check's code is not run
    unconfined: its block is an error of the checker's, which says why."""

    def refuse(folder: str, unreadable: tuple[str, ...]) -> str:
        raise OSError(errno.EINVAL, os.strerror(errno.EINVAL))

    monkeypatch.setattr(isolation, "confine", refuse)
    checks = isolation.CheckProcesses(
        _writes_outside, lambda: None, conversation=[], scratch=str(tmp_path)
    )
    try:
        header, beside = _answer(checks)
    finally:
        checks.close()
    failed = decode_answer(header)
    assert isinstance(failed, SnippetFailed) and failed.type == "InternalError"
    assert (
        "the kernel refused to confine the check's process (Invalid argument): its code was not run"
        in failed.message
    )
    assert not beside.exists()


def test_the_ruleset_withholds_the_files_of_unreadable_folders() -> None:
    """Pure: the folders above an unreadable one may be listed, their other entries read as
    ever, and nothing under it (the cache) is granted at all."""
    tree = {
        **FOLDERS,
        "/tmp": [("p", True)],
        "/tmp/p": [(".cache", True), ("data.npy", False), ("docs", True)],
        "/tmp/p/.cache": [("formula-check", True), ("pip", True)],
    }
    rules = ruleset_for(
        "/tmp/w/c",
        abi=6,
        pid=42,
        listing=tree.__getitem__,
        unreadable=("/tmp/p/.cache/formula-check",),
    )
    granted = dict(rules.rules)
    assert granted["/tmp"] == granted["/tmp/p"] == granted["/tmp/p/.cache"] == READ_DIR
    assert granted["/tmp/p/docs"] == granted["/tmp/p/.cache/pip"] == READ_FILE | READ_DIR
    assert granted["/tmp/p/data.npy"] == READ_FILE
    assert not any(path.startswith("/tmp/p/.cache/formula-check") for path in granted)
    assert "/proc" not in granted and granted["/proc/42"] == READ_FILE | READ_DIR


def _reads(request: CheckRequest, arrays: dict[str, Any]) -> tuple[CheckReply, dict]:
    """A check's handler that says which of the files ``source`` lists it could read."""
    said = []
    for path in request.source.split("\n"):
        try:
            Path(path).read_bytes()
        except PermissionError:
            said.append("refused")
        else:
            said.append("read")
    return CheckReply(kind=" ".join(said)), {}


@pytest.mark.skipif(not CONFINED, reason="this kernel offers no Landlock")
def test_a_check_reads_the_project_but_not_the_cache(tmp_path: Path) -> None:
    """No TensorFlow: a check's process reads the project's files, also one made after it
    was forked, but not a cache entry, where the request names the cache unreadable."""
    project = tmp_path / "project"
    cache = project / ".cache" / "formula-check"
    cache.mkdir(parents=True)
    (cache / "entry.fcr").write_bytes(b"a verdict")
    (project / ".cache" / "other").write_text("x")
    (project / "data.txt").write_text("x")
    checks = isolation.CheckProcesses(
        _reads, lambda: None, conversation=[], scratch=str(tmp_path / "scratch")
    )

    def read(*names: str, unreadable: tuple[str, ...] = (str(cache),)) -> str:
        source = "\n".join(str(project / name) for name in names)
        request = CheckRequest(root=".", calls=Calls(), source=source, unreadable=unreadable)
        header, _ = wire.read_message(io.BytesIO(checks.run(request, {}, time_limit=30)))
        reply = decode_answer(header)
        assert isinstance(reply, CheckReply)
        return reply.kind

    try:
        assert read(".cache/formula-check/entry.fcr", "data.txt", ".cache/other") == (
            "refused read read"
        )
        (project / "made-later.txt").write_text("x")  # after the next check's process forked
        assert read("made-later.txt", ".cache/formula-check/entry.fcr") == "read refused"
        assert read(".cache/formula-check/entry.fcr", unreadable=()) == "read"
    finally:
        checks.close()
