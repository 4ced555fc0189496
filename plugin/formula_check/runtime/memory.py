"""A worker's memory, watched from the build: what its whole tree holds (Linux).

A process's resident size counts the pages it shares with the process it was forked from:
a check's process shares most of its warm worker's, and a process the snippet forks shares
most of the check's. Summing resident sizes would count TensorFlow once per process and stop
a correct check that forks. So a process forked from its parent, and still running its
parent's program, counts what it holds beyond its parent (:func:`tree_kb`): what it allocated
or copied since. A process that runs a program of its own shares nothing with its parent and
counts whole, as does the tree's first. Four children of 900 MB each are thus four times
900 MB, forked or not.

A child runs its parent's program while its address space is laid out as its parent's (where
its code, stack and heap begin: a new program is laid out afresh). The kernel shows that
layout only to whom may trace the process, and the same placeholders to others: a check's
process and its forks are not dumpable, so both show the placeholders (to a build that is
not root), while a program they run is dumpable again and shows its own. Read from
``/proc``; 0 where it cannot be told.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from formula_check.runtime.reaping import children


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
    seen = {each: _resident(each) for each, _ in tree}
    return sum(
        seen[each].kb
        if parent is None or seen[each].layout != seen[parent].layout
        else max(0, seen[each].kb - seen[parent].kb)
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


@dataclass(frozen=True)
class _Resident:
    """A process's resident memory, and the layout of its address space (placeholders where
    the kernel does not show it)."""

    kb: int
    layout: tuple[str, ...]


_PAGE_KB = os.sysconf("SC_PAGE_SIZE") // 1024 if hasattr(os, "sysconf") else 4
_RSS, _LAYOUT = 21, (23, 24, 25, 44)
"""In ``/proc/<pid>/stat`` after the command's name: the resident pages; where the code
begins and ends, where the stack begins, where the heap begins."""


def _resident(pid: int) -> _Resident:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
        return _Resident(int(fields[_RSS]) * _PAGE_KB, tuple(fields[i] for i in _LAYOUT))
    except (OSError, IndexError, ValueError):  # gone, or not Linux
        return _Resident(0, ())
