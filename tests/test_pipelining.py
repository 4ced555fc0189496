"""Getting checks to the workers: a worker runs the next request while this process judges
the last one, a block's time never includes its wait for a free worker, and a run that will
execute every check starts the workers before planning the first."""

from __future__ import annotations

import dataclasses
import math
import queue
import threading
import time
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from formula_check.messages import CheckReply
from formula_check.model import CheckSpec, Status
from formula_check.planning.plan import Plan
from formula_check.results import CheckResult, Environment
from formula_check.runtime.idle import IdleWorkers
from formula_check.runtime.pool import Reply, WorkerPool
from formula_check.session.engine import Engine, _bare
from formula_check.store.digest import checker_digest
from formula_check.store.read_stamps import Inputs
from implementations import SDPA
from support import PROJECT, spec_for, wait_until


@dataclasses.dataclass(frozen=True)
class _Request:
    """Stands for a check request: the block it is for (and what the engine adds to one)."""

    block: str
    unreadable: tuple[str, ...] = ()


class OneWorker:
    """Stands for a worker: one request at a time, each logged."""

    started = True

    def __init__(self, hold: float = 0.0) -> None:
        self.environment = Environment()
        self.hold = hold
        self.log: list[str] = []
        self.received = threading.Condition()

    def request(
        self,
        request: Any,
        arrays: object,
        timeout: float,
        cancelled: Callable[[], bool] = lambda: False,
    ) -> Reply:
        with self.received:
            self.log.append(f"run {request.block}")
            self.received.notify_all()
        time.sleep(self.hold)
        return Reply("ok", CheckReply(kind="function"))


def pool_of(worker: OneWorker) -> WorkerPool:
    return WorkerPool(PROJECT, 1, fork=False, workers=[worker])  # type: ignore[list-item]


def engine_with(worker: OneWorker, monkeypatch: pytest.MonkeyPatch) -> Engine:
    engine = Engine(PROJECT, workers=1, use_cache=False)
    engine._pool = pool_of(worker)  # made here, in place of the one made on first use
    monkeypatch.setattr(
        "formula_check.planning.plan.plan_check",
        lambda spec, root: SimpleNamespace(request=_Request(spec.block_id), arrays={}),
    )
    return engine


def specs(count: int) -> list[CheckSpec]:
    """Blocks of different code (the same check asked for twice at once runs once)."""
    return [spec_for("attention", f"{SDPA}\n# {n}\n", block_id=f"b{n}") for n in range(count)]


def test_the_worker_runs_the_next_check_while_the_last_is_judged(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Judging ``b0`` waits until ``b1`` has reached the worker: with one check in flight
    per worker, that never happens and the judging gives up."""
    worker = OneWorker()
    engine = engine_with(worker, monkeypatch)
    overlapped: list[bool] = []

    def judge(spec: CheckSpec, plan: Plan, reply: Reply, env: object) -> Any:
        if spec.block_id == "b0":
            with worker.received:
                overlapped.append(worker.received.wait_for(lambda: "run b1" in worker.log, 20))
        worker.log.append(f"judged {spec.block_id}")
        return _bare(spec, Status.VERIFIED, ""), Inputs()

    monkeypatch.setattr(engine, "_judge", judge)
    results = engine.check_many(specs(3))
    assert [r.block_id for r in results] == ["b0", "b1", "b2"], "in input order"
    assert overlapped == [True]
    assert worker.log.index("run b1") < worker.log.index("judged b0")


def test_waiting_for_a_busy_worker_is_not_the_blocks_own_time(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Each request holds the only worker for 2 s; the block queued behind another waits
    about 2 s for it, and its own time stays about 2 s, not 4."""
    worker = OneWorker(hold=2.0)
    engine = engine_with(worker, monkeypatch)
    monkeypatch.setattr(
        engine, "_judge", lambda spec, *_: (_bare(spec, Status.VERIFIED, ""), Inputs())
    )
    results = engine.check_many(specs(2))
    assert all(2.0 <= r.elapsed < 3.2 for r in results), [r.elapsed for r in results]


def test_the_pool_says_how_long_a_request_waited(tmp_path: Path) -> None:
    worker = OneWorker(hold=1.0)
    pool = pool_of(worker)
    replies: list[Reply] = []
    threads = [
        threading.Thread(
            target=lambda n=n: replies.append(
                pool.request(SimpleNamespace(block=n), {}, 5)[0]  # type: ignore[arg-type]
            )
        )
        for n in range(2)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    queued = sorted(reply.queued for reply in replies)
    assert queued[0] < 0.5 <= queued[1], queued  # the second waited out most of the 1 s


def test_a_result_is_the_same_whatever_was_in_flight(monkeypatch: pytest.MonkeyPatch) -> None:
    """Results keep their own spec: none is judged with another's plan."""
    worker = OneWorker()
    engine = engine_with(worker, monkeypatch)
    seen: list[tuple[str, str]] = []

    def judge(spec: CheckSpec, plan: Plan, reply: Reply, env: object) -> Any:
        seen.append((spec.block_id, plan.request.block))  # type: ignore[attr-defined]
        result = dataclasses.replace(_bare(spec, Status.VERIFIED, ""), message=spec.block_id)
        return result, Inputs()

    monkeypatch.setattr(engine, "_judge", judge)
    results: list[CheckResult] = engine.check_many(specs(12))
    assert all(block == planned for block, planned in seen)
    assert [r.message for r in results] == [f"b{n}" for n in range(12)]


@pytest.mark.parametrize(
    ("use_cache", "skip", "started"),
    [(False, "", True), (True, "", False), (False, "not today", False)],
)
def test_without_the_cache_workers_start_before_the_first_check_is_planned(
    monkeypatch: pytest.MonkeyPatch, use_cache: bool, skip: str, started: bool
) -> None:
    """Every check will run, so the TensorFlow import need not wait for the first one; with
    the cache on, a build served from it starts none. The checker's hash is made on the
    calling thread either way."""
    engine = Engine(PROJECT, workers=2, use_cache=use_cache)
    starts: list[str] = []
    monkeypatch.setattr(engine, "start_in_background", lambda: starts.append("start"))
    checker_digest.cache_clear()
    engine.prepare([dataclasses.replace(spec, skip=skip) for spec in specs(2)])
    assert checker_digest.cache_info().currsize == 1
    assert starts == (["start"] if started else [])


def test_a_stopped_run_does_not_start_the_checks_still_waiting_for_a_worker(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Closing the results early (Ctrl-C in the command line, a failed build) waits for the
    check running in the worker, but one waiting for the worker gives up instead of running
    a whole check first."""
    worker = OneWorker(hold=1.5)
    engine = engine_with(worker, monkeypatch)
    monkeypatch.setattr(
        engine, "_judge", lambda spec, *_: (_bare(spec, Status.VERIFIED, ""), Inputs())
    )
    results = engine.iter_check(specs(5))
    assert next(results).block_id == "b0"
    results.close()  # one check runs in the worker by now, another waits for it
    # b0 ran first, or right after b1 if b1's thread asked for the worker first. After it, at
    # most the check handed the worker as b0 ended ran (it may also have seen the stop first);
    # none of those still waiting did.
    assert "run b0" in worker.log, worker.log
    before = worker.log.index("run b0")
    assert before <= 1 and len(worker.log) - before - 1 <= 1, worker.log


def test_a_block_waiting_for_the_worker_is_not_overtaken_by_later_ones(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Judging takes no time here, so the thread that gives the worker back asks again at
    once; the earlier block waiting for it must still get it next, or the caller waits for
    ``b0`` while every later block runs (as a plain queue let happen)."""
    worker = OneWorker(hold=0.2)  # far longer than a thread takes to ask again
    engine = engine_with(worker, monkeypatch)
    monkeypatch.setattr(
        engine, "_judge", lambda spec, *_: (_bare(spec, Status.VERIFIED, ""), Inputs())
    )
    engine.check_many(specs(10))
    ran = [int(entry.removeprefix("run b")) for entry in worker.log]
    assert sorted(ran) == list(range(10))
    # Two threads ask at once; from then on every block runs at most one place late.
    assert all(abs(position - block) <= 1 for position, block in enumerate(ran)), ran


def asking(idle: IdleWorkers, order: float, got: list[tuple[float, object]]) -> threading.Thread:
    """Ask ``idle`` for a worker on a thread of its own, once that request waits."""
    before = idle.waiting()
    thread = threading.Thread(target=lambda: got.append((order, idle.get(order))))
    thread.start()
    assert wait_until(lambda: idle.waiting() == before + 1, 5)
    return thread


def test_a_worker_given_back_goes_to_the_waiting_request_with_the_lowest_order() -> None:
    idle = IdleWorkers()
    worker = object()
    got: list[tuple[float, object]] = []
    threads = [asking(idle, order, got) for order in (7, 2, math.inf, 2)]
    for handed in range(1, len(threads) + 1):
        idle.put(worker)  # type: ignore[arg-type]
        assert wait_until(lambda n=handed: len(got) == n, 5)
    for thread in threads:
        thread.join(5)
    assert [order for order, _ in got] == [2, 2, 7, math.inf]
    assert idle.qsize() == 0, "every worker given back went to a waiting request"


def test_a_thread_giving_a_worker_back_cannot_take_it_again_before_one_waiting() -> None:
    idle = IdleWorkers()
    worker = object()
    got: list[tuple[float, object]] = []
    waiting = asking(idle, 5, got)
    idle.put(worker)  # type: ignore[arg-type]
    again: list[object] = []
    second = threading.Thread(target=lambda: again.append(idle.get(0)))
    second.start()  # asks at once with a lower order, but the worker is already handed over
    waiting.join(5)
    assert got == [(5, worker)] and not again
    idle.put(worker)  # type: ignore[arg-type]
    second.join(5)
    assert again == [worker]


def test_with_none_waiting_a_running_worker_goes_first_then_the_last_given_back() -> None:
    idle = IdleWorkers()
    running = [SimpleNamespace(started=True) for _ in range(2)]
    stopped = [SimpleNamespace(started=False) for _ in range(2)]
    for worker in (running[0], stopped[0], running[1], stopped[1]):
        idle.put(worker)  # type: ignore[arg-type]
    handed = [idle.get(), idle.get_nowait(), idle.get(), idle.get_nowait()]
    assert handed == [running[1], running[0], stopped[1], stopped[0]]
    with pytest.raises(queue.Empty):
        idle.get_nowait()


@pytest.mark.parametrize("handed_first", [False, True])
def test_a_request_interrupted_while_waiting_loses_no_worker(handed_first: bool) -> None:
    """Ctrl-C in a thread waiting for a worker (a check run from a notebook, say): the worker
    must not go to the request that is gone, or every later request would wait forever."""
    worker = SimpleNamespace(started=True)

    class Interrupted(threading.Event):
        def wait(self, timeout: float | None = None) -> bool:
            if handed_first:  # the worker reached it just as it was interrupted
                idle.put(worker)
            raise KeyboardInterrupt

    idle: IdleWorkers[Any] = IdleWorkers(event=Interrupted)
    with pytest.raises(KeyboardInterrupt):
        idle.get(0)
    if not handed_first:
        idle.put(worker)
    assert idle.get_nowait() is worker and not idle.waiting()
