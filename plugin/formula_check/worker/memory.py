"""A worker's memory, watched from the build: the resident size of its largest process.

The largest, not the sum: a check's process forked from the worker shares most of its pages
with it. Read from ``/proc`` (Linux); 0 where it cannot be told.
"""

from __future__ import annotations

from pathlib import Path

from .reaping import children


class MemoryWatch:
    """The peak resident size a worker's tree reached, and whether it is over ``limit_mb``
    (0: no limit)."""

    def __init__(self, limit_mb: int = 0) -> None:
        self.limit_mb = limit_mb
        self.peak_kb = 0

    def over(self, pid: int | None) -> bool:
        """Measure the tree of ``pid`` now (None: no process); is it over the limit?"""
        rss = tree_rss_kb(pid) if pid is not None else 0
        self.peak_kb = max(self.peak_kb, rss)
        return bool(self.limit_mb) and rss > self.limit_mb * 1024


def tree_rss_kb(pid: int) -> int:
    """Resident memory now of the largest process of ``pid``'s tree (0 when unknown)."""
    return max((_rss_kb(each) for each in process_tree(pid)), default=0)


def process_tree(pid: int, limit: int = 256) -> list[int]:
    """``pid`` and its descendants (Linux; ``pid`` alone elsewhere), ``limit`` at most."""
    tree: list[int] = []
    pending = [pid]
    while pending and len(tree) < limit:
        current = pending.pop()
        tree.append(current)
        pending.extend(children(current))
    return tree


def _rss_kb(pid: int) -> int:
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return 0
    for line in status.splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0
