"""Threads that meet in the worker pool: a close (Ctrl-C, the end of a build) against a start,
a check, a reap or a zygote restart. No TensorFlow: the zygote here imports nothing, and its
workers never say hello, so every start is still under way when the close comes."""

from __future__ import annotations

import io
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import IO

import pytest

from formula_check.errors import WorkerError
from formula_check.messages import Calls, CheckRequest
from formula_check.runtime.forked import ForkedProcess, is_running
from formula_check.runtime.outcome import CANCELLED
from formula_check.runtime.pool import WorkerPool
from formula_check.runtime.process import Worker
from formula_check.runtime.zygote_client import (
    ZYGOTE_RESTARTS,
    Zygote,
    ZygoteState,
    fork_supported,
)
from support import wait_until

pytestmark = pytest.mark.skipif(not fork_supported(), reason="workers are forked on Linux only")

FAKE_ZYGOTE = """\
import os, sys, time
from formula_check.runtime import zygote
from formula_check.runtime.control import ZygoteHello

def imported():
    time.sleep(float(os.environ.get("FAKE_IMPORT_SECONDS", "0")))
    return ZygoteHello(ok=True)

def silent_worker(root, conversation, scratch=None):
    while os.read(conversation, 4096):  # never says hello; ends when the parent hangs up
        pass
    return 0

sys.exit(zygote.main(sys.argv[3:], imports=imported, serves=silent_worker))
"""


@pytest.fixture
def fake_python(tmp_path: Path) -> str:
    """An "interpreter" that runs the real zygote with the TensorFlow import replaced."""
    script = tmp_path / "fake_zygote.py"
    script.write_text(FAKE_ZYGOTE, encoding="utf-8")
    launcher = tmp_path / "python"
    launcher.write_text(f'#!/bin/sh\nexec "{sys.executable}" "{script}" "$@"\n')
    launcher.chmod(0o755)
    return str(launcher)


class SleepingZygote:
    """Forks by starting ``sleep``: a worker process that holds its socket and never answers."""

    def __init__(self) -> None:
        self.failed = ""
        self.closed = False
        self.children: list[subprocess.Popen[bytes]] = []

    def fork(self, stderr: IO[bytes], scratch: Path | None = None) -> ForkedProcess:
        ours, theirs = socket.socketpair()
        try:
            child = subprocess.Popen(
                ["sleep", "60"], pass_fds=[theirs.fileno()], stderr=stderr, start_new_session=True
            )
        except BaseException:
            ours.close()
            raise
        finally:
            theirs.close()
        self.children.append(child)
        return ForkedProcess(child.pid, ours, self)  # type: ignore[arg-type]

    def wait(self, pid: int) -> int | bool | None:
        child = next(c for c in self.children if c.pid == pid)
        code = child.poll()
        return True if code is None else code


@pytest.fixture
def sleeping_zygote() -> Iterator[SleepingZygote]:
    zygote = SleepingZygote()
    yield zygote
    for child in zygote.children:
        if child.poll() is None:
            child.kill()
        child.wait()


def test_a_close_during_a_start_always_fails_the_start_with_a_worker_error(
    tmp_path: Path, sleeping_zygote: SleepingZygote, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Whatever the moment: the start's error message reads the worker's log, which the
    close closes; before, that raised ValueError ("seek of closed file") in 1 start of 10.
    Nothing is left open or behind: no log, no temporary folder."""
    temporary = tmp_path / "tmp"
    temporary.mkdir()
    monkeypatch.setenv("TMPDIR", str(temporary))
    monkeypatch.setattr(tempfile, "tempdir", None)
    outcomes: list[str] = []
    for attempt in range(40):
        worker = Worker(tmp_path, zygote=sleeping_zygote)  # type: ignore[arg-type]

        def start(worker: Worker = worker) -> None:
            try:
                worker.start()
                outcomes.append("started")
            except WorkerError:
                outcomes.append("WorkerError")
            except Exception as exc:  # what a caller catching WorkerError would not expect
                outcomes.append(f"{type(exc).__name__}: {exc}")

        thread = threading.Thread(target=start)
        thread.start()
        time.sleep(0.001 * (attempt % 20))  # the close lands at a different point each time
        worker.close()
        thread.join(10)
        assert not thread.is_alive()
        assert not worker.stderr_log.is_open, "no log left open"
        assert worker.scratch is None and list(temporary.iterdir()) == [], attempt
    assert outcomes == ["WorkerError"] * 40


def test_a_zygote_that_died_unnoticed_is_cleaned_up_before_another_starts(
    tmp_path: Path, fake_python: str
) -> None:
    zygote = Zygote(tmp_path, python=fake_python)
    with tempfile.TemporaryFile() as log:
        first = zygote.fork(log)
        old_control, old_log = zygote.control, zygote._stderr
        assert zygote.process is not None and old_control is not None and old_log is not None
        old_pid = zygote.process.pid
        first.kill()
        first.wait()  # its worker is gone (a timeout, say): nothing polls any more
        os.kill(old_pid, signal.SIGKILL)  # then the zygote dies
        assert wait_until(lambda: not is_running(old_pid), 10)
        second = zygote.fork(log)
        try:
            assert zygote.process is not None and zygote.process.pid != old_pid
            assert zygote.losses == 1
            assert old_control.fileno() == -1, "the dead zygote's socket was closed"
            assert old_log.closed, "and its log"
        finally:
            second.kill()
            second.wait()
            zygote.shut()
            for stream in (first.stdin, first.stdout, second.stdin, second.stdout):
                assert stream is not None
                stream.close()


def test_a_zygote_that_worked_is_restarted_however_often_it_is_lost(
    tmp_path: Path, fake_python: str
) -> None:
    """Hours into ``mkdocs serve``, a zygote killed now and then (out of memory, a snippet
    that kills its parent) is started again each time; only zygotes lost in a row without
    forking a single worker make the pool give up on forking."""
    zygote = Zygote(tmp_path, python=fake_python)
    forked: list[ForkedProcess] = []
    try:
        with tempfile.TemporaryFile() as log:
            for _ in range(ZYGOTE_RESTARTS + 2):
                forked.append(zygote.fork(log))
                assert zygote.process is not None
                doomed = zygote.process.pid
                os.kill(doomed, signal.SIGKILL)
                assert wait_until(lambda pid=doomed: not is_running(pid), 10)
            forked.append(zygote.fork(log))
            assert zygote.failed == "" and zygote.losses == 1
        for _ in range(ZYGOTE_RESTARTS):
            zygote.lost("it stopped making sense")  # each right after its start
        assert zygote.failed == ""
        zygote.lost("it stopped making sense")
        assert zygote.failed.endswith(f"({ZYGOTE_RESTARTS + 1} times)")
    finally:
        zygote.shut()
        for worker in forked:
            worker.kill()
            worker.wait()
            for stream in (worker.stdin, worker.stdout):
                assert stream is not None
                stream.close()


def test_closing_the_pool_ends_a_zygote_restart_instead_of_waiting_for_its_import(
    tmp_path: Path, fake_python: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A worker whose process ended is reaped through the zygote, whose lock a restart holds
    for its whole TensorFlow import (here 60 s): the close stops that restart first."""
    workers = WorkerPool(tmp_path, size=2, python=fake_python, env=("FAKE_IMPORT_SECONDS",))
    first, second = workers.workers
    zygote = workers.zygote
    assert zygote is not None
    for worker in (first, second):
        worker.process = zygote.fork(worker.new_stderr_log())
    processes = [first.process, second.process]
    assert zygote.process is not None and all(processes)
    for pid in [zygote.process.pid, *(p.pid for p in processes if p)]:
        os.kill(pid, signal.SIGKILL)  # as when the machine runs out of memory
    assert first.process is not None
    assert wait_until(lambda: first.process is None or first.process.poll() is not None, 10)
    monkeypatch.setenv("FAKE_IMPORT_SECONDS", "60")
    failed: list[BaseException] = []

    def restart() -> None:
        try:
            zygote.fork(first.new_stderr_log())
        except WorkerError as exc:
            failed.append(exc)

    restarting = threading.Thread(target=restart)
    restarting.start()
    assert wait_until(lambda: zygote.state is ZygoteState.STARTING, 30), (
        "the restart waits for the import"
    )
    began = time.monotonic()
    workers.close()
    took = time.monotonic() - began
    restarting.join(30)
    assert not restarting.is_alive() and failed, "the restart was ended, and said so"
    assert took < 30, f"the close waited {took:.0f} s for an import it should have stopped"


def test_closing_the_pool_waits_for_its_background_start(tmp_path: Path, fake_python: str) -> None:
    """The start begun ahead (``mkdocs serve``, a cold build) ends with the pool, not later
    while the next test or build runs."""
    workers = WorkerPool(tmp_path, size=2, python=fake_python)
    starting = workers.start_in_background()
    assert wait_until(lambda: all(w.process is not None for w in workers.workers), 30), (
        "both workers are forked and wait for a hello that never comes"
    )
    workers.close()
    assert not starting.is_alive()
    assert all(w.process is None and not w.stderr_log.is_open for w in workers.workers)
    assert workers.idle == 2, "every borrowed worker was handed back"


REQUEST = CheckRequest(root=".", calls=Calls())


class FakeRunning:
    """A worker process that is running and whose end of the pipe takes anything."""

    pid = 0
    returncode = None

    def __init__(self) -> None:
        self.stdin = io.BytesIO()
        self.stdout = None

    def poll(self) -> None:
        return None


def test_a_request_that_cannot_be_sent_is_an_error_not_a_stop(tmp_path: Path) -> None:
    """Only a closed pool makes a failed send "stopped"; a request that cannot be encoded
    (here a ragged array) is a bug to see, not a shutdown to report on a card."""
    worker = Worker(tmp_path)
    worker.process = FakeRunning()  # type: ignore[assignment]
    with pytest.raises(ValueError):
        worker.request(REQUEST, {"x": [[1, 2], [3]]}, timeout=1)  # type: ignore[dict-item]
    worker.process = None


def test_a_background_start_that_cannot_start_leaves_the_close_working(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    workers = WorkerPool(tmp_path, size=1, fork=False)
    real_start = threading.Thread.start

    def no_threads_left(thread: threading.Thread) -> None:
        if thread.name == "formula-check-start":
            raise RuntimeError("can't start new thread")
        real_start(thread)

    monkeypatch.setattr(threading.Thread, "start", no_threads_left)
    with pytest.raises(RuntimeError):
        workers.start_in_background()
    monkeypatch.undo()
    workers.close()  # joins only the threads that started


def test_a_client_that_dies_leaves_its_zygote_to_stop_its_workers_and_remove_their_folders(
    tmp_path: Path, fake_python: str
) -> None:
    """A build killed outright (SIGTERM to its process group) cannot stop its workers: its
    zygote, in a session of its own, sees the hang-up and does it, folders included."""
    zygote = Zygote(tmp_path, python=fake_python)
    scratch = tmp_path / "worker-folder"
    scratch.mkdir()  # as the pool makes it before asking for the fork
    with tempfile.TemporaryFile() as log:
        worker = zygote.fork(log, scratch)
    try:
        assert zygote.control is not None and is_running(worker.pid)
        zygote.control.close()  # the client is gone, and stopped nothing
        zygote.control = None
        assert wait_until(lambda: not scratch.exists(), 10), "the folder was removed"
        assert wait_until(lambda: not is_running(worker.pid), 10)
    finally:
        zygote.stop()
        for stream in (worker.stdin, worker.stdout):
            assert stream is not None
            stream.close()


def test_a_cancelled_request_stops_its_worker_without_waiting_for_the_timeout(
    tmp_path: Path, sleeping_zygote: SleepingZygote
) -> None:
    """``mkdocs serve`` cancels a check whose result an edit made stale: the worker running
    it (here one that never answers) is stopped, as on a timeout, not waited for."""
    worker = Worker(tmp_path, zygote=sleeping_zygote)  # type: ignore[arg-type]
    worker.process = sleeping_zygote.fork(worker.new_stderr_log())
    wanted = threading.Event()
    threading.Timer(0.3, wanted.set).start()
    try:
        reply = worker.request(REQUEST, {}, timeout=600, cancelled=wanted.is_set)
        assert reply.outcome == "cancelled" and reply.detail == CANCELLED
        assert not worker.alive
        assert sleeping_zygote.children[0].wait(timeout=5) is not None, "its process is gone"
    finally:
        worker.close()
