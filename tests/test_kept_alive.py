"""``keep_alive``: the zygote outlives its build, and the next run of the same project, with
the same interpreter, checker and environment, forks its workers from it."""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import signal
import socket
import stat
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from formula_check.errors import MissingTensorFlowError, WorkerError
from formula_check.faces import cli
from formula_check.model import Status
from formula_check.runtime import kept_server, zygote
from formula_check.runtime import kept_socket as kept_place
from formula_check.runtime.control import ZygoteHello, peer_is_us
from formula_check.runtime.forked import is_running
from formula_check.runtime.kept_client import KeptZygote
from formula_check.runtime.kept_socket import kept_address, runtime_folder, stop_kept
from formula_check.runtime.zygote_client import fork_supported
from formula_check.session.engine import Engine
from implementations import SDPA
from support import PROJECT, parent_pid, spec_for, wait_until, without_tensorflow

pytestmark = [
    pytest.mark.tf,
    pytest.mark.skipif(not fork_supported(), reason="workers are forked on Linux only"),
]


@pytest.fixture
def runtime(monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A private runtime folder for this test; every zygote kept there is stopped after it."""
    folder = Path(tempfile.mkdtemp(prefix="fc-run-", dir="/tmp"))  # short: a socket path
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(folder))
    yield folder
    for address in folder.glob("*/*.sock"):
        stop_kept(address)
    shutil.rmtree(folder, ignore_errors=True)


def kept_pid(address: Path) -> int:
    return int(address.with_suffix(".pid").read_text(encoding="ascii"))


def check(engine: Engine, count: int = 2) -> list[int]:
    """Run ``count`` checks (all must verify); the pids of the workers that ran them."""
    specs = [spec_for("attention", SDPA, block_id=f"kept-{n}") for n in range(count)]
    results = engine.check_many(specs)
    assert all(r.status is Status.VERIFIED for r in results), [r.message for r in results]
    return engine.pool.alive_pids()


def test_the_next_engine_forks_from_the_zygote_the_first_one_left_until_stopped(
    runtime: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Between the runs the zygote sleeps until a client comes or ends (it used to look every
    0.2 s): one wake-up every 5 s, plus whatever a page read back from disk costs, where the
    old loop woke 10 times in 2 s."""
    address = kept_address(PROJECT.resolve(), sys.executable, 60)
    with Engine(PROJECT, workers=2, use_cache=False, keep_alive=60) as first:
        assert isinstance(first.pool.zygote, KeptZygote)
        workers = check(first)
        kept = kept_pid(address)
        handler = {parent_pid(pid) for pid in workers}
        assert len(handler) == 1 and parent_pid(handler.pop()) == kept
        assert wakeups(kept, 2.0) <= 4, "with a client"
    assert wait_until(lambda: not any(is_running(pid) for pid in workers)), "workers end"
    assert is_running(kept), "the zygote stays after the engine closed"
    assert wait_until(lambda: not children(kept)), "the client's process ended and was reaped"
    assert wakeups(kept, 2.0) <= 4, "with none"
    assert stat.S_IMODE(address.stat().st_mode) & 0o077 == 0
    with Engine(PROJECT, workers=1, use_cache=False, keep_alive=60) as second:
        (worker,) = check(second, 1)
        assert parent_pid(parent_pid(worker)) == kept, "forked from the same zygote"
        assert second.startup_seconds < 5, "no TensorFlow import (a fork takes milliseconds)"
    assert cli.main(["stop"]) == 0
    assert "stopped 1 kept zygote" in capsys.readouterr().out
    assert wait_until(lambda: not is_running(kept))
    assert not address.exists()
    assert cli.main(["stop"]) == 0
    assert "stopped 0 kept zygotes" in capsys.readouterr().out


def test_another_environment_gets_another_zygote(
    runtime: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    python = sys.executable
    before = kept_address(PROJECT.resolve(), python, 60)
    monkeypatch.setenv("XLA_FLAGS", "--xla_formula_check_test")  # a worker gets it: it counts
    after = kept_address(PROJECT.resolve(), python, 60)
    assert before != after
    monkeypatch.setenv("FORMULA_CHECK_TEST_NAMED", "1")
    assert kept_address(PROJECT.resolve(), python, 60, ("FORMULA_CHECK_TEST_NAMED",)) != after
    monkeypatch.setenv("PYTEST_CURRENT_TEST", "some other test")
    monkeypatch.setenv("TMUX_PANE", "%3")
    monkeypatch.setenv("SOME_TOKEN", "s3cret")
    assert kept_address(PROJECT.resolve(), python, 60) == after, "no worker gets them: no count"
    assert kept_address(PROJECT.resolve() / "docs", python, 60) != after, "another project"
    assert kept_address(PROJECT.resolve(), python, 600) != after, "another keep_alive"
    with Engine(PROJECT, use_cache=False, keep_alive=60) as engine:
        check(engine, 1)
    assert after.exists() and not before.exists()
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0})
    assert kept_address(PROJECT.resolve(), python, 60) != after, "another CPU affinity"


def test_an_idle_zygote_exits_and_cleans_up(runtime: Path) -> None:
    address = kept_address(PROJECT.resolve(), sys.executable, 1)
    with Engine(PROJECT, use_cache=False, keep_alive=1) as engine:
        check(engine, 1)
        kept = kept_pid(address)
        time.sleep(1.5)  # past its idle time, awake at least once
        assert is_running(kept), "a connected client keeps it, however long"
    assert wait_until(lambda: not is_running(kept)), "no client for a second: it exits"
    leftovers = [address.with_suffix(suffix) for suffix in (".sock", ".pid", ".log")]
    assert not any(path.exists() for path in leftovers)


def test_the_idle_time_counts_from_the_last_clients_end(tmp_path: Path) -> None:
    """A client connected longer than the idle time must not use it up. The zygote sleeps
    while a client is connected (waking every ``idle`` seconds here) and used to count from
    its last waking: this client leaves 0.8 s after one, and the zygote went 0.2 s later.
    Run without TensorFlow: the client loop itself, with a hello that says all is well."""
    address = Path(tempfile.mkdtemp(prefix="fc-idle-", dir="/tmp")) / "kept.sock"
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(str(address))
    server.listen(8)
    bound = (address, address.stat().st_ino)
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            hello = ZygoteHello(ok=True)
            kept_server.serve_clients(server, tmp_path, bound, 1.0, hello, zygote.serve_forked)
            code = 0
        finally:
            os._exit(code)
    server.close()
    try:
        client = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        client.settimeout(30)
        client.connect(str(address))
        assert client.makefile("rb").readline().startswith(b'{"ok": true')
        time.sleep(1.8)
        left = time.monotonic()  # before the close: a pause between the two cannot shorten it
        client.close()
        assert wait_until(lambda: not address.exists())
        assert time.monotonic() - left > 0.6, "kept about 1 s after the client left"
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        shutil.rmtree(address.parent, ignore_errors=True)


def wakeups(pid: int, seconds: float) -> int:
    """How often the main thread of ``pid`` went to sleep and woke in ``seconds``."""
    status = Path(f"/proc/{pid}/task/{pid}/status")

    def switches() -> int:
        line = next(x for x in status.read_text().splitlines() if x.startswith("voluntary_"))
        return int(line.split()[1])

    before = switches()
    time.sleep(seconds)
    return switches() - before


def children(pid: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if parent_pid(int(entry.name)) == pid:
                    found.append(int(entry.name))
            except (OSError, IndexError, ValueError):
                continue  # gone meanwhile
    return found


def test_a_zygote_killed_between_runs_or_during_one_is_replaced(runtime: Path) -> None:
    address = kept_address(PROJECT.resolve(), sys.executable, 60)
    with Engine(PROJECT, use_cache=False, keep_alive=60) as engine:
        (worker,) = check(engine, 1)
        os.kill(kept_pid(address), signal.SIGKILL)
        os.kill(parent_pid(worker), signal.SIGKILL)  # this run's handler, and with it the worker
        assert wait_until(lambda: not is_running(worker))
        (again,) = check(engine, 1)
        assert parent_pid(parent_pid(again)) == kept_pid(address), "forked by a new kept zygote"
    first = kept_pid(address)
    os.kill(first, signal.SIGKILL)  # the socket file stays behind, and nobody answers on it
    assert address.exists()
    with Engine(PROJECT, use_cache=False, keep_alive=60) as engine:
        (worker,) = check(engine, 1)
        assert kept_pid(address) != first and is_running(kept_pid(address))
        assert parent_pid(parent_pid(worker)) == kept_pid(address)


def test_missing_tensorflow_is_reported_through_a_kept_zygote(
    runtime: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PYTHONPATH", str(without_tensorflow(tmp_path / "fake")))
    with (
        Engine(PROJECT, use_cache=False, keep_alive=60) as engine,
        pytest.raises(MissingTensorFlowError),
    ):
        engine.check(spec_for("attention", SDPA))
    address = kept_address(PROJECT.resolve(), sys.executable, 60)
    assert address.exists(), "the kept zygote said so, not a spawned worker"


def test_a_folder_others_can_enter_is_refused(
    runtime: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = runtime_folder()
    folder.chmod(0o755)
    with pytest.raises(WorkerError, match="not a private folder"):
        runtime_folder()
    with Engine(PROJECT, use_cache=False, keep_alive=60) as engine:
        (worker,) = check(engine, 1)  # from a zygote of the run's own, as without keep_alive
        zygote = engine.pool.zygote
        assert zygote is not None and zygote.process is not None
        assert parent_pid(worker) == zygote.process.pid
    assert not list(folder.glob("*.sock"))
    folder.chmod(0o700)


def test_connections_are_checked_for_our_user() -> None:
    ours, theirs = socket.socketpair()
    with ours, theirs:
        assert peer_is_us(ours)
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as tcp:
        assert not peer_is_us(tcp), "no credentials: refused"


@pytest.mark.skipif(os.getuid() != 0, reason="needs root to act as another user")
def test_another_user_gets_no_zygote_even_through_an_open_folder(runtime: Path) -> None:
    """The folder keeps other users out; with it opened up anyway, the zygote still hangs up
    on a connection from another user, and answers ours."""
    address = kept_address(PROJECT.resolve(), sys.executable, 60)
    with Engine(PROJECT, use_cache=False, keep_alive=60) as engine:
        check(engine, 1)
    runtime.chmod(0o755)
    address.parent.chmod(0o755)
    address.chmod(0o666)
    child = os.fork()
    if child == 0:  # pragma: no cover (a forked child)
        code = 1
        try:
            os.setgid(65534)
            os.setuid(65534)
            with socket.socket(socket.AF_UNIX) as other:
                other.connect(str(address))
                other.settimeout(30)
                code = 0 if other.recv(100) == b"" else 2
        finally:
            os._exit(code)
    _, status = os.waitpid(child, 0)
    assert os.waitstatus_to_exitcode(status) == 0, "another user was answered"
    with socket.socket(socket.AF_UNIX) as us:
        us.connect(str(address))
        us.settimeout(30)
        assert b'"ok": true' in us.recv(100)
    address.parent.chmod(0o700)


def test_a_project_folder_made_again_is_where_workers_run(runtime: Path, tmp_path: Path) -> None:
    """A checkout removed and cloned again at the same path: workers run in the new folder."""
    project = tmp_path / "project"
    project.mkdir()
    (project / "scale.txt").write_text("1.0\n", encoding="utf-8")
    reading = """
        import tensorflow as tf

        def attention(q, k, v):
            scale = float(open("scale.txt").read())
            scores = tf.matmul(q, k, transpose_b=True) / tf.sqrt(tf.cast(tf.shape(k)[-1], q.dtype))
            weights = tf.nn.softmax(scale * scores, axis=-1)
            return tf.matmul(weights, v), weights
    """
    spec = spec_for("attention", reading, block_id="reads-a-file")
    with Engine(project, use_cache=False, keep_alive=60) as engine:
        assert engine.check(spec).status is Status.VERIFIED
    shutil.rmtree(project)
    project.mkdir()
    (project / "scale.txt").write_text("1.0\n", encoding="utf-8")
    with Engine(project, use_cache=False, keep_alive=60) as engine:
        result = engine.check(spec)
        assert result.status is Status.VERIFIED, result.message


def test_stopping_waits_for_a_start_in_progress(tmp_path: Path) -> None:
    """A run starting a zygote holds the start lock until its files are in place; a stop in
    between would delete the new zygote's socket and leave it running unseen."""
    address = tmp_path / "kept.sock"
    with open(tmp_path / "start.lock", "wb") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # a starter at work
        done = threading.Event()
        stopper = threading.Thread(target=lambda: (stop_kept(address), done.set()))
        stopper.start()
        assert not done.wait(0.5), "stop went ahead while a start held the lock"
    assert done.wait(30), "stop proceeds once the start is done"
    stopper.join()


def test_an_install_into_site_packages_changes_the_key(
    runtime: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    packages = tmp_path / "site-packages"
    packages.mkdir()
    monkeypatch.setattr(kept_place, "_package_folders", lambda: [str(packages)])
    before = kept_address(PROJECT.resolve(), sys.executable, 60)
    (packages / "newpkg").mkdir()  # what pip install does to the folder
    os.utime(packages, ns=(time.time_ns(), time.time_ns() + 1_000_000))
    assert kept_address(PROJECT.resolve(), sys.executable, 60) != before


def test_an_unusable_runtime_folder_falls_back_to_the_runs_own_workers(runtime: Path) -> None:
    (runtime_folder() / "start.lock").mkdir()  # cannot be opened as the lock file
    with Engine(PROJECT, use_cache=False, keep_alive=60) as engine:
        (worker,) = check(engine, 1)
        zygote = engine.pool.zygote
        assert zygote is not None and zygote.process is not None
        assert parent_pid(worker) == zygote.process.pid, "a zygote of the run's own"
