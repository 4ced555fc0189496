"""Which reads of a check outside its project its cached result depends on.

A module imported from a package on ``PYTHONPATH``, from an editable install or from any
installed distribution, and a data file read from anywhere, can change a check's result
without any edit to the project: each is keyed, by the path the check opened (the cache
stamps it with its digest, size and time). Every file is keyed the same way, an installed
distribution's too: its version would miss a package reinstalled with the same version, and
a stat per file on look-up costs microseconds. Left out are what cannot change a result
between two builds, or is keyed otherwise: the interpreter's standard library, this
checker's own package (its digest is in every key), the check's own temporary folder (gone
with it) and the kernel's files (``/proc``, ``/sys``, ``/dev``: the machine, not data).

Reads no audit event shows are not keyed but named (:data:`UNSEEN`): a result that depends
on them is never cached.
"""

from __future__ import annotations

import functools
import os
import site
import sys
import sysconfig
import tempfile
from typing import Any

from formula_check.paths import PACKAGE

_KERNEL = ("/proc/", "/sys/", "/dev/")

UNSEEN: dict[str, str] = {
    "subprocess.Popen": "it started a program",
    "os.system": "it ran a shell command",
    "os.exec": "it ran a program in its own process",
    "os.posix_spawn": "it started a program",
    "os.spawn": "it started a program",
    "os.fork": "it forked a process",
    "os.forkpty": "it forked a process",
    "sqlite3.connect": "it opened an SQLite database",
    "socket.connect": "it connected to a socket (the network or another process)",
    "socket.sendto": "it sent to a socket (the network or another process)",
    "urllib.Request": "it made a URL request",
}
"""Audit events of reads the audit cannot follow, and what the card says of each: what a
program, a database engine or a server on the other end read is nowhere in the key."""
UNSEEN_EVENT = "formula_check.unseen_read"
"""The audit event of another read no key can follow (:mod:`.native_reads`: TensorFlow's
ops); its one argument says what it was."""


@functools.cache
def _standard_library() -> tuple[str, ...]:
    paths = sysconfig.get_paths()
    return _folders(paths.get("stdlib"), paths.get("platstdlib"))


@functools.cache
def _installed() -> tuple[str, ...]:
    """Where distributions are installed: inside the standard library's folder in some
    images (``/usr/local/lib/python3.11/site-packages``), and keyed all the same."""
    paths = sysconfig.get_paths()
    named = [p for p in sys.path if os.path.basename(p) in {"site-packages", "dist-packages"}]
    user = site.getusersitepackages() if site.ENABLE_USER_SITE else None
    return _folders(paths.get("purelib"), paths.get("platlib"), user, *named)


@functools.cache
def _checker() -> tuple[str, ...]:
    return _folders(PACKAGE)


def _folders(*paths: Any) -> tuple[str, ...]:
    found = set()
    for path in paths:
        if isinstance(path, str) and path:
            found |= {os.path.abspath(path) + os.sep, os.path.realpath(path) + os.sep}
    return tuple(found)


def keyed(path: str) -> bool:
    """Whether the cache keys a result on ``path`` (absolute, outside the project)."""
    if path.startswith(_KERNEL) or path.startswith(_checker()):
        return False
    if path.startswith(os.path.join(tempfile.gettempdir(), "")):
        return False  # the check's own folder (TMPDIR), gone with it
    if path.startswith(_installed()):
        return True
    return not path.startswith(_standard_library())


def warm() -> None:
    """Find the folders now, in the warm worker: no check pays for it."""
    _standard_library()
    _installed()
    _checker()
