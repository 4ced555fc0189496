"""Every process a snippet starts is gone when its check ends, however it detached and however
the check ended: passed, failed, timed out, crashed, or stopped with its worker."""

from __future__ import annotations

import threading
import time
import uuid
from pathlib import Path

import pytest

from formula_check.model import Status
from implementations import SDPA, SDPA_KEEP
from support import shared_engine, spec_for, wait_until

pytestmark = pytest.mark.tf

# Three ways to leave a process behind: a plain child, one in a session of its own, and a
# daemon (double fork and setsid: its parent is gone at once, it belongs to no one).
STARTS = """
import subprocess, sys

def start_sleepers(tag):
    subprocess.Popen(["sleep", tag])
    subprocess.Popen(["sleep", tag], start_new_session=True)
    subprocess.run(["sh", "-c", f"setsid sleep {tag} </dev/null >/dev/null 2>&1 &"])
"""

ENDINGS = {
    "passed": (Status.VERIFIED, "return attention(q, k, v)"),
    "failed": (Status.ERROR, "raise ValueError('on purpose')"),
    "timed out": (Status.TIMEOUT, "time.sleep(60)"),
    "crashed": (Status.ERROR, "os.kill(os.getpid(), signal.SIGKILL)"),
}


def unique_seconds() -> str:
    """A duration of about 1000 s that no other process asks ``sleep`` for: its name here."""
    return f"1000.{uuid.uuid4().int % 10**12:012d}"


def sleepers(tag: str) -> list[int]:
    """The processes (not yet reaped or not) whose command line carries ``tag``."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            command = (entry / "cmdline").read_bytes().split(b"\0")
            state = (entry / "stat").read_text().rpartition(")")[2].split()[0]
        except OSError:
            continue
        if tag.encode() in command and state != "Z":
            found.append(int(entry.name))
    return found


def snippet(tag: str, ending: str) -> str:
    return (
        "import os, signal, time\n"
        + STARTS
        + SDPA_KEEP
        + f"\ndef checked(q, k, v, mask=None):\n    start_sleepers({tag!r})\n"
        "    time.sleep(0.3)  # the daemon has detached by now\n"
        f"    {ending}\n"
    )


@pytest.mark.parametrize("ending", sorted(ENDINGS))
def test_what_a_check_started_ends_with_it(ending: str) -> None:
    status, line = ENDINGS[ending]
    tag = unique_seconds()
    engine = shared_engine()  # the next test's checks run on the worker this one used
    spec = spec_for("attention", snippet(tag, line), entry="checked", timeout=3)
    result = engine.check(spec)
    assert result.status is status, result.headline()
    # ended once the answer is on its way, and surely before the next check begins
    assert wait_until(lambda: sleepers(tag) == [], 10), f"left running after it {ending}"
    assert engine.check(spec_for("attention", SDPA)).status is Status.VERIFIED
    assert sleepers(tag) == []


def test_a_cancelled_check_ends_with_what_it_started_and_the_worker_stays() -> None:
    """A check stopped from outside (its result no longer wanted, as on a serve edit) is
    ended by its worker, which stays warm; what the check started, even in sessions of their
    own, goes with it."""
    tag = unique_seconds()
    stopped = threading.Event()
    engine = shared_engine()
    engine.warm_up()
    workers = engine.pool.alive_pids()
    spec = spec_for("attention", snippet(tag, "time.sleep(60)"), entry="checked", timeout=60)
    timer = threading.Timer(2.0, stopped.set)
    timer.start()
    began = time.monotonic()
    try:
        result = engine.check(spec, stopped)
    finally:
        timer.cancel()
    assert result.status is Status.SKIPPED and time.monotonic() - began < 15
    assert wait_until(lambda: sleepers(tag) == [], 10), "left running after the stop"
    assert engine.pool.alive_pids() == workers, "the worker was stopped with its check"
    assert engine.check(spec_for("attention", SDPA)).status is Status.VERIFIED
