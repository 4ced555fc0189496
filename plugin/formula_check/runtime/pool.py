"""The worker pool: N workers, started lazily, each lent to one request at a time.

On Linux a worker is forked from a zygote that has already imported TensorFlow
(:mod:`.zygote_client`, or :mod:`.kept_client` for one kept alive between runs); elsewhere,
or if the zygote cannot start, each worker is spawned and imports TensorFlow itself. Either
way the worker speaks the same protocol (:mod:`..messages`).

States: *open* (requests borrow idle workers, starting them if need be) and *closed* (for
good: every worker and the zygote stopped; a request is answered ``crash`` without running).
Any thread may call any method; :meth:`WorkerPool.close` may come at any moment (Ctrl-C).
"""

from __future__ import annotations

import dataclasses
import math
import queue
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from formula_check.errors import WorkerError
from formula_check.messages import CheckRequest
from formula_check.model import Array
from formula_check.results import Environment
from formula_check.runtime.idle import IdleWorkers
from formula_check.runtime.kept_client import KeptZygote
from formula_check.runtime.kept_socket import kept_address, stop_every_kept, stop_kept
from formula_check.runtime.limits import STARTUP_TIMEOUT
from formula_check.runtime.outcome import CANCELLED, Reply
from formula_check.runtime.process import Worker
from formula_check.runtime.zygote_client import Zygote, fork_supported

__all__ = [  # the pool's own, and what the CLI and the benches reach for through it
    "CANCELLED",
    "Reply",
    "WorkerPool",
    "kept_address",
    "stop_every_kept",
    "stop_kept",
]


class WorkerPool:
    """N workers shared by threads; see the module's docstring. ``workers`` stand in for the
    ones the pool would make (tests lend it stand-ins)."""

    def __init__(
        self,
        root: Path,
        size: int = 1,
        python: str | None = None,
        memory_limit_mb: int = 0,
        *,
        fork: bool = True,
        keep_alive: float = 0.0,
        env: tuple[str, ...] = (),
        workers: Sequence[Worker] | None = None,
    ) -> None:
        if size < 1:
            raise WorkerError(f"workers must be at least 1, got {size}")
        self.root = root
        self.size = size
        self.zygote: Zygote | None = None
        if fork and fork_supported():
            kept = keep_alive > 0
            self.zygote = (
                KeptZygote(root, python, keep_alive, env) if kept else Zygote(root, python, env)
            )
        if workers is None:
            workers = [Worker(root, python, memory_limit_mb, self.zygote, env) for _ in range(size)]
        self.workers: tuple[Worker, ...] = tuple(workers)
        self._idle: IdleWorkers[Worker] = IdleWorkers()
        for worker in self.workers:
            self._idle.put(worker)
        self._lock = threading.Lock()
        self._starters: list[threading.Thread] = []
        self.started_ahead = 0.0
        """Seconds spent starting workers ahead of any request (:meth:`start_idle`)."""

    @property
    def idle(self) -> int:
        """How many workers are idle now."""
        return self._idle.qsize()

    def request(
        self,
        request: CheckRequest,
        arrays: Mapping[str, Array],
        timeout: float,
        cancelled: Callable[[], bool] = lambda: False,
        order: float = math.inf,
    ) -> tuple[Reply, Environment]:
        """Run one request on an idle worker, waiting for one if all are busy; also return
        what that worker runs on. A request ``cancelled`` while it waited runs nothing.
        Waiting requests get workers by ``order`` (lowest first), then first come."""
        began = time.perf_counter()
        worker = self._idle.get(order)
        queued = time.perf_counter() - began
        if cancelled():
            self._idle.put(worker)
            return Reply("cancelled", detail=CANCELLED, queued=queued), Environment()
        try:
            reply = worker.request(request, arrays, timeout, cancelled)
            return dataclasses.replace(reply, queued=queued), worker.environment
        finally:
            self._idle.put(worker)

    def warm_up(self) -> None:
        """Start every worker now (in parallel) instead of on first use; a failure raises."""
        failures = self._start_borrowed(count_ahead=False)
        if failures:
            raise failures[0]

    def start_idle(self) -> None:
        """Start the idle workers that are not running, in parallel. A failure is left for
        the next request to meet and report."""
        self._start_borrowed(count_ahead=True)

    def _start_borrowed(self, *, count_ahead: bool) -> list[Exception]:
        """Start the idle workers that are not running, each borrowed as a request borrows it:
        a request arriving meanwhile waits for that worker's start instead of racing it (or
        killing the check it runs), and gets it as soon as it is up."""
        failures: list[Exception] = []

        def start(worker: Worker) -> None:
            try:
                if not worker.closed and not worker.alive:
                    began = time.perf_counter()
                    worker.start()
                    if count_ahead:
                        with self._lock:
                            self.started_ahead += time.perf_counter() - began
            except Exception as exc:  # handed to the caller
                failures.append(exc)
            finally:
                self._idle.put(worker)

        borrowed: list[Worker] = []
        while True:
            try:
                borrowed.append(self._idle.get_nowait())
            except queue.Empty:
                break
        threads: list[threading.Thread] = []
        try:
            for worker in borrowed:
                thread = threading.Thread(target=start, args=(worker,), daemon=True)
                thread.start()  # may fail (no thread left to start): hand the rest back
                threads.append(thread)
        finally:
            for worker in borrowed[len(threads) :]:
                self._idle.put(worker)
        for thread in threads:
            thread.join()
        return failures

    def start_in_background(self) -> threading.Thread:
        """:meth:`start_idle` on a thread of its own; :meth:`close` waits for it to end."""
        thread = threading.Thread(target=self.start_idle, name="formula-check-start", daemon=True)
        with self._lock:  # started under the lock: a close never joins an unstarted thread
            self._starters = [t for t in self._starters if t.is_alive()]
            thread.start()
            self._starters.append(thread)
        return thread

    @property
    def peak_rss_kb(self) -> int:
        """The largest resident size any worker reached."""
        return max((w.peak_rss_kb for w in self.workers), default=0)

    def alive_pids(self) -> list[int]:
        """Process ids of the running workers (for tests and diagnostics)."""
        processes = [w.process for w in self.workers]  # each read once: a kill may clear it
        return [p.pid for p in processes if p is not None and p.poll() is None]

    def close(self) -> None:
        """Stop every worker, then the zygote; later requests are refused, not restarted.

        Workers go first, so that the zygote reaps them (their CPU time is then counted in
        this process's children, as a spawned worker's is; a kept zygote's handler reaps them
        instead, and their time is not)."""
        if self.zygote is not None:
            self.zygote.closed = True  # no fork from now on
            # a zygote starting again (the last one died) has no workers to reap, but holds
            # the lock reaping needs until its TensorFlow import ends: it is stopped first
            self.zygote.interrupt_start(only_a_start=True)
        for worker in self.workers:
            worker.close()
        if self.zygote is not None:
            self.zygote.shut()
        with self._lock:
            starters, self._starters = self._starters, []
        for thread in starters:  # each start has met the close by now, and ends at once
            if thread is not threading.current_thread():
                thread.join(STARTUP_TIMEOUT)
