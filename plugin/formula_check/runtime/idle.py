"""The pool's idle workers, handed out by the order of the checks asking for them.

A worker given back goes straight to the waiting request with the lowest ``order`` (the
earliest block of the batch; the earliest to ask among equals), never to whichever thread
happens to ask next: with a plain queue, the thread that had just given a worker back could
take it again at once, request after request, and starve the block the caller was waiting
on. With no request waiting, a running worker goes before one that would have to start
(after a timeout killed it, say), and the one most recently given back goes first (its
memory is warm).

Any thread may :meth:`IdleWorkers.put` and :meth:`IdleWorkers.get`; a worker is either idle
here, or borrowed by exactly one thread.
"""

from __future__ import annotations

import heapq
import math
import queue
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Generic, Protocol, TypeVar


class Lendable(Protocol):
    """What the idle list needs to know of a worker."""

    @property
    def started(self) -> bool:
        """Has it a process (so it need not start)?"""


W = TypeVar("W", bound=Lendable)


class IdleWorkers(Generic[W]):
    """The pool's idle workers; see the module's docstring."""

    def __init__(self, event: Callable[[], threading.Event] = threading.Event) -> None:
        """``event`` makes what a waiting request waits on (tests give one that is
        interrupted)."""
        self._event = event
        self._lock = threading.Lock()
        self._workers: list[W] = []
        self._waiting: list[tuple[float, int, _Waiter[W]]] = []
        self._asked = 0

    def put(self, worker: W) -> None:
        """Give ``worker`` back: to the first request waiting, else to the idle list."""
        with self._lock:
            if self._waiting:
                waiter = heapq.heappop(self._waiting)[2]
                waiter.worker = worker
                waiter.ready.set()
            else:
                self._workers.append(worker)

    def get(self, order: float = math.inf) -> W:
        """Borrow a worker, waiting (by ``order``) until one is given back if none is idle."""
        with self._lock:
            if self._workers:  # then no request is waiting either
                return self._take()
            waiter: _Waiter[W] = _Waiter(self._event())
            self._asked += 1
            heapq.heappush(self._waiting, (order, self._asked, waiter))
        try:
            waiter.ready.wait()
        except BaseException:  # Ctrl-C while waiting: leave no waiter to swallow a worker
            with self._lock:
                handed = waiter.worker
                if handed is None:
                    self._waiting = [entry for entry in self._waiting if entry[2] is not waiter]
                    heapq.heapify(self._waiting)
            if handed is not None:
                self.put(handed)
            raise
        assert waiter.worker is not None
        return waiter.worker

    def get_nowait(self) -> W:
        """Borrow an idle worker; :class:`queue.Empty` if none is."""
        with self._lock:
            if not self._workers:
                raise queue.Empty
            return self._take()

    def _take(self) -> W:
        running = [n for n, worker in enumerate(self._workers) if worker.started]
        return self._workers.pop(running[-1] if running else -1)

    def qsize(self) -> int:
        """How many are idle now."""
        with self._lock:
            return len(self._workers)

    def waiting(self) -> int:
        """How many requests wait for a worker now."""
        with self._lock:
            return len(self._waiting)


@dataclass(eq=False)
class _Waiter(Generic[W]):
    ready: threading.Event
    worker: W | None = None
