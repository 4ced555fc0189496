"""A worker's memory, watched from the build: what its whole tree holds (Linux).

A process's resident size counts the pages it shares with the process it was forked from:
a check's process shares most of its warm worker's, and a process the snippet forks shares
most of the check's. Summing resident sizes would count TensorFlow once per process and stop
a correct check that forks. So each process counts what it holds beyond its parent
(:func:`tree_kb`): for a fork, what it allocated or copied since; the tree's first process
counts whole. A child that runs another program shares nothing with its parent and is
counted short by up to its parent's size: the sum stays a floor, never an overcount, and
four children of 900 MB each are four times 900 MB. Read from ``/proc``; 0 where it cannot
be told.
"""

from __future__ import annotations

from pathlib import Path

from .reaping import children


class MemoryWatch:
    """The peak memory a worker's tree reached, and whether it is over ``limit_mb``
    (0: no limit)."""

    def __init__(self, limit_mb: int = 0) -> None:
        self.limit_mb = limit_mb
        self.peak_kb = 0
        self.last_kb = 0
        """What the tree held when it was last measured."""

    def over(self, pid: int | None) -> bool:
        """Measure the tree of ``pid`` now (None: no process); is it over the limit?"""
        self.last_kb = tree_kb(pid) if pid is not None else 0
        self.peak_kb = max(self.peak_kb, self.last_kb)
        return bool(self.limit_mb) and self.last_kb > self.limit_mb * 1024


def tree_kb(pid: int) -> int:
    """The memory ``pid``'s tree holds now: ``pid``'s resident size, and each descendant's
    beyond its parent's (see the module's docstring); 0 when unknown."""
    tree = process_tree(pid)
    sizes = {each: _rss_kb(each) for each, _ in tree}
    return sum(
        sizes[each] if parent is None else max(0, sizes[each] - sizes[parent])
        for each, parent in tree
    )


def process_tree(pid: int, limit: int = 256) -> list[tuple[int, int | None]]:
    """``pid`` and its descendants (Linux; ``pid`` alone elsewhere), each with its parent
    (None for ``pid``), ``limit`` at most, parents before their children."""
    tree: list[tuple[int, int | None]] = []
    pending: list[tuple[int, int | None]] = [(pid, None)]
    while pending and len(tree) < limit:
        current = pending.pop()
        tree.append(current)
        pending.extend((child, current[0]) for child in children(current[0]))
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
