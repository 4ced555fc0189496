"""Processes a worker or a check leaves behind, found and ended (Linux).

A warm worker, a check's process and the zygote are *child subreapers*: an orphan of the
snippet, also one that called ``setsid``, is re-parented to them instead of to init, and
:func:`end_children` kills each until none is left. :func:`children` also lets the build
measure a worker's whole tree (:mod:`.memory`). Elsewhere these do nothing.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
from pathlib import Path

_PR_SET_PDEATHSIG = 1
_PR_SET_DUMPABLE = 4
_PR_SET_CHILD_SUBREAPER = 36
_SWEEPS = 1000
"""Rounds of :func:`end_children` at most: each kills every child it finds, and only a child
killed in the previous round can hand it new ones (its own orphans)."""


def _prctl(option: int, value: int) -> bool:
    """Linux's ``prctl``; False where it is missing or refused."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return bool(libc.prctl(option, value, 0, 0, 0) == 0)
    except (OSError, AttributeError):
        return False


def become_subreaper() -> bool:
    """Adopt this process's orphaned descendants (Linux 3.4+), so that they can be ended."""
    return _prctl(_PR_SET_CHILD_SUBREAPER, 1)


def keep_private() -> bool:
    """Make this process's memory, descriptors and ``/proc`` files out of reach of other
    processes of the same user (Linux: not *dumpable*), such as the checks forked from it: a
    check cannot take the worker's conversation with its parent over, nor read the worker's
    environment. (Root still can.) Its children inherit it until they exec a program."""
    return _prctl(_PR_SET_DUMPABLE, 0)


def die_with_parent(parent: int) -> None:
    """SIGKILL this process when ``parent`` dies; exit now if it already has."""
    _prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != parent:
        os._exit(70)


def children(pid: int | None = None) -> list[int]:
    """The child processes of ``pid`` (this process by default), zombies included."""
    parent = os.getpid() if pid is None else pid
    found: list[int] = []
    try:
        tasks = os.listdir(f"/proc/{parent}/task")
    except OSError:
        return found
    for task in tasks:
        with contextlib.suppress(OSError, ValueError):
            text = Path(f"/proc/{parent}/task/{task}/children").read_text(encoding="ascii")
            found.extend(int(child) for child in text.split())
    return found


def end_children(keep: frozenset[int] = frozenset()) -> int:
    """Kill and reap every child of this process but ``keep``, and every orphan that comes to
    us as they die, until none is left. Returns how many were ended."""
    ended = 0
    for _ in range(_SWEEPS):
        strays = [pid for pid in children() if pid not in keep]
        if not strays:
            break
        for pid in strays:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
        for pid in strays:
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pid, 0)
                ended += 1
    return ended
