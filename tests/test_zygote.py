"""Workers forked from a zygote that imported TensorFlow once, and the spawn fallback."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from formula_check.errors import MissingTensorFlowError, WorkerError
from formula_check.model import Status
from formula_check.runtime.forked import ForkedProcess, is_running
from formula_check.runtime.limits import STARTUP_TIMEOUT
from formula_check.runtime.process import Worker
from formula_check.runtime.zygote_client import ZygoteState, fork_supported
from formula_check.session.engine import Engine
from implementations import SDPA
from support import (
    PROJECT,
    checker_pids,
    parent_pid,
    shared_engine,
    spec_for,
    wait_until,
    without_tensorflow,
)

pytestmark = [
    pytest.mark.tf,
    pytest.mark.skipif(not fork_supported(), reason="workers are forked on Linux only"),
]

HANG = "def f(q, k, v):\n    while True:\n        pass\n"


def wait_until_gone(pids: list[int]) -> None:
    deadline = time.monotonic() + 10
    while any(is_running(pid) for pid in pids) and time.monotonic() < deadline:
        time.sleep(0.02)


def verified(engine: Engine, count: int = 1) -> bool:
    # distinct code: the same check asked for twice at once runs once, on one worker
    specs = [spec_for("attention", f"{SDPA}\n# {i}\n", block_id=f"sdpa-{i}") for i in range(count)]
    return all(result.status is Status.VERIFIED for result in engine.check_many(specs))


@pytest.fixture
def engine() -> Engine:
    """The test process's engine of two workers, kept warm between the tests that leave it
    working (they kill a worker or its zygote and see it replaced): one TensorFlow import."""
    return shared_engine(workers=2)


@pytest.fixture
def fresh() -> Iterator[Engine]:
    """An engine of two workers not started yet, for what only a first start shows."""
    with Engine(PROJECT, workers=2, use_cache=False) as engine:
        yield engine


def test_every_worker_is_a_child_of_one_zygote(engine: Engine) -> None:
    engine.warm_up()
    zygote = engine.pool.zygote
    assert zygote is not None and zygote.process is not None
    pids = engine.pool.alive_pids()
    assert len(pids) == 2
    assert {parent_pid(pid) for pid in pids} == {zygote.process.pid}
    assert verified(engine, 4)
    environments = [worker.environment for worker in engine.pool.workers]
    assert all(env.tf_version and env.device for env in environments)


def test_a_worker_that_died_is_replaced_by_a_fork_not_a_new_import(engine: Engine) -> None:
    engine.warm_up()
    zygote = engine.pool.zygote
    assert zygote is not None and zygote.process is not None
    zygote_pid = zygote.process.pid
    before = set(engine.pool.alive_pids())
    os.kill(min(before), signal.SIGKILL)
    wait_until_gone([min(before)])
    engine.warm_up()  # both again: the live one alone could take every check now
    assert verified(engine, 2)
    after = set(engine.pool.alive_pids())
    assert after != before and len(after) == 2
    assert zygote.process.pid == zygote_pid  # TensorFlow was not imported again
    assert {parent_pid(pid) for pid in after} == {zygote_pid}


def test_a_timeout_costs_no_worker(engine: Engine) -> None:
    """Only the check's own process is stopped on its timeout: the warm workers stay, and
    the next check starts nothing (a serve edit after a hang)."""
    engine.warm_up()
    before = set(engine.pool.alive_pids())
    assert engine.check(spec_for("attention", HANG, timeout=1.5)).status is Status.TIMEOUT
    assert set(engine.pool.alive_pids()) == before
    started = engine.startup_seconds
    assert engine.check(spec_for("attention", SDPA)).status is Status.VERIFIED
    assert engine.startup_seconds == started, "a worker was started for it"
    assert set(engine.pool.alive_pids()) == before


def test_crash_statuses_come_from_the_zygote(engine: Engine) -> None:
    code = "import os, signal\ndef f(q, k, v):\n    os.kill(os.getpid(), signal.SIGABRT)\n"
    result = engine.check(spec_for("attention", code))
    assert result.status is Status.ERROR
    assert "killed by SIGABRT" in result.message
    assert verified(engine)


def test_workers_die_with_their_zygote_and_a_new_zygote_forks_the_next(engine: Engine) -> None:
    """Killed, the zygote takes its workers along (none is orphaned), and the next checks,
    which need new workers, get them from a zygote started again."""
    engine.warm_up()
    zygote = engine.pool.zygote
    assert zygote is not None and zygote.process is not None
    first = zygote.process.pid
    workers = engine.pool.alive_pids()
    os.kill(first, signal.SIGKILL)
    wait_until_gone(workers)
    assert not any(is_running(pid) for pid in workers), "an orphaned worker kept running"
    assert verified(engine, 2)
    assert zygote.process is not None and zygote.process.pid != first
    assert {parent_pid(pid) for pid in engine.pool.alive_pids()} == {zygote.process.pid}


def test_spawned_workers_when_forking_is_off() -> None:
    with Engine(PROJECT, workers=1, use_cache=False, fork=False) as engine:
        assert engine.pool.zygote is None
        assert verified(engine)
        (pid,) = engine.pool.alive_pids()
        assert parent_pid(pid) == os.getpid()


def test_closing_stops_workers_and_zygote_and_a_closed_engine_starts_nothing_again() -> None:
    engine = Engine(PROJECT, workers=2, use_cache=False)
    engine.warm_up()
    assert engine.pool.zygote is not None and engine.pool.zygote.process is not None
    pids = [*engine.pool.alive_pids(), engine.pool.zygote.process.pid]
    folders = [worker.scratch for worker in engine.pool.workers]
    assert all(folder is not None and folder.is_dir() for folder in folders)
    engine.close()
    wait_until_gone(pids)
    assert not any(is_running(pid) for pid in pids)
    assert not any(folder is not None and folder.exists() for folder in folders), (
        "closing the engine left a worker's folder behind"
    )
    result = engine.check(spec_for("attention", SDPA, block_id="after-close"))
    assert result.status is Status.ERROR and "stopped" in result.message
    assert engine.pool.alive_pids() == []
    assert engine.pool.zygote is not None and engine.pool.zygote.process is None


def test_missing_tensorflow_is_reported_by_the_zygote(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PYTHONPATH", str(without_tensorflow(tmp_path)))
    with Engine(PROJECT, use_cache=False) as engine, pytest.raises(MissingTensorFlowError):
        engine.check(spec_for("attention", SDPA))


def test_a_zygote_given_up_means_spawned_workers() -> None:
    with Engine(PROJECT, workers=1, use_cache=False) as engine:
        zygote = engine.pool.zygote
        assert zygote is not None
        zygote.give_up("given up on purpose")
        assert zygote.state is ZygoteState.BROKEN and zygote.failed == "given up on purpose"
        assert verified(engine)
        (pid,) = engine.pool.alive_pids()
        assert parent_pid(pid) == os.getpid()


def test_worker_start_is_counted_apart_from_the_blocks(fresh: Engine) -> None:
    engine = fresh
    assert engine.startup_seconds == 0
    assert verified(engine)
    # without the cache every worker starts at once; the second may finish after the check
    assert wait_until(lambda: engine.pool.idle == len(engine.pool.alive_pids()) == 2)
    started = engine.startup_seconds
    assert started > 0, "the first check started a worker"
    assert verified(engine)
    assert engine.startup_seconds == started, "a warm worker starts nothing"


def test_workers_started_in_the_background_serve_a_check_arriving_meanwhile(
    fresh: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A check sent while the background start is importing TensorFlow waits for that start
    instead of starting the same worker a second time."""
    engine = fresh
    starts: list[int] = []
    original = Worker.start

    def counted(worker: Worker) -> None:
        starts.append(id(worker))
        original(worker)

    monkeypatch.setattr(Worker, "start", counted)
    thread = engine.start_in_background()
    assert verified(engine, 3)
    thread.join(timeout=120)
    assert not thread.is_alive()
    assert len(engine.pool.alive_pids()) == 2
    assert sorted(starts) == sorted(id(worker) for worker in engine.pool.workers), (
        "each worker started once"
    )
    assert engine.startup_seconds > 0, "a start ahead of the checks is counted as one"


@pytest.mark.parametrize("fork", [True, False], ids=["forked", "spawned"])
def test_closing_during_a_background_start_leaves_no_process(tmp_path: Path, fork: bool) -> None:
    """Ctrl-C (or a new engine) while the workers are still importing TensorFlow."""
    engine = Engine(tmp_path, workers=2, use_cache=False, fork=fork)
    thread = engine.start_in_background()
    assert wait_until(lambda: bool(checker_pids(tmp_path)), 30), "the start began"
    engine.close()
    thread.join(timeout=STARTUP_TIMEOUT)
    assert not thread.is_alive()
    assert wait_until(lambda: not checker_pids(tmp_path), 30), checker_pids(tmp_path)
    time.sleep(1.0)  # a worker spawned after the close would show up now
    assert not checker_pids(tmp_path)
    assert engine.pool.alive_pids() == []


def test_a_background_start_without_tensorflow_leaves_the_error_to_the_check(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PYTHONPATH", str(without_tensorflow(tmp_path)))
    with Engine(PROJECT, use_cache=False) as engine:
        thread = engine.start_in_background()
        thread.join(timeout=120)
        assert not thread.is_alive() and engine.pool.alive_pids() == []
        with pytest.raises(MissingTensorFlowError):
            engine.check(spec_for("attention", SDPA))


def test_a_worker_stopped_before_its_hello_leaves_no_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The pool makes each worker's temporary folder before it starts the worker, so a worker
    stopped before its hello (a close during a start, a start that timed out) leaves none."""
    temporary = tmp_path / "tmp"
    temporary.mkdir()
    monkeypatch.setenv("TMPDIR", str(temporary))
    monkeypatch.setattr(tempfile, "tempdir", None)
    with Engine(PROJECT, workers=1, use_cache=False) as engine:
        engine.warm_up()
        (worker,) = engine.pool.workers
        assert worker.scratch is not None and worker.scratch.parent == temporary
        worker.kill()
        assert list(temporary.iterdir()) == []
        failed: list[BaseException] = []

        def start() -> None:
            try:
                worker.start()
            except WorkerError as exc:
                failed.append(exc)

        starting = threading.Thread(target=start)
        starting.start()
        # forked at once, it warms up for 0.1 s or more before its hello: stopped in between
        assert wait_until(lambda: worker.process is not None and worker.scratch is not None, 30)
        folder = worker.scratch
        assert folder is not None and folder.is_dir() and folder.parent == temporary
        engine.close()
        starting.join(STARTUP_TIMEOUT)
        assert failed, "the start was cut short"
        assert list(temporary.iterdir()) == []


class CountingZygote:
    """Answers like a zygote: the exit status once, then nothing (it reaped the pid)."""

    def __init__(self) -> None:
        self.asked = 0

    def wait(self, pid: int) -> int | None:
        self.asked += 1
        time.sleep(0.02)  # a round trip to the zygote: long enough for threads to meet
        return 3 if self.asked == 1 else None


def test_a_forked_process_polled_by_many_threads_at_once_is_reaped_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    child = subprocess.Popen(["true"])  # ours, left unreaped: a zombie its pidfd reports
    try:
        assert wait_until(lambda: not is_running(child.pid), 10)
        zygote = CountingZygote()
        ours, theirs = socket.socketpair()
        theirs.close()
        forked = ForkedProcess(child.pid, ours, zygote)
        if forked.pidfd is None:  # before Linux 5.3, or a seccomp profile that refuses it
            for stream in (forked.stdin, forked.stdout):
                assert stream is not None
                stream.close()
            pytest.skip("no pidfd here")
        barrier = threading.Barrier(8)
        seen: list[object] = []

        def poll() -> None:
            barrier.wait()
            try:
                seen.append(forked.poll())
            except OSError as exc:  # the pidfd closed twice
                seen.append(exc)

        threads = [threading.Thread(target=poll) for _ in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(10)
        assert seen == [3] * 8
        assert zygote.asked == 1
        assert forked.pidfd is None

        signalled: list[object] = []
        monkeypatch.setattr(os, "kill", lambda *args: signalled.append(args))
        monkeypatch.setattr(signal, "pidfd_send_signal", lambda *args: signalled.append(args))
        forked.kill()  # reaped: the pid may be someone else's by now
        assert signalled == []
        for stream in (forked.stdin, forked.stdout):
            assert stream is not None
            stream.close()
    finally:
        child.wait()
