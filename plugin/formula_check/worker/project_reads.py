"""What one check read and wrote in the project: every file it opened (Python's audit
hook), and the files of the page's folder it changed by ways no audit event shows."""

from __future__ import annotations

import contextlib
import importlib.util
import os
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from . import isolation


@dataclass
class Reads:
    """What one check opened in the project: to read, and to write."""

    read: set[str] = field(default_factory=set)
    written: set[str] = field(default_factory=set)


class _ProjectReads:
    """The project files a check opens for reading: the modules it imports (also one whose
    import fails, which never reaches ``sys.modules``; a module read from its ``.pyc`` counts
    as its source) and the data it loads with Python's own ``open`` (a JSON of
    hyper-parameters, ``np.load``). An edit to any of them can change the result, so the
    cache keys the result on them and ``mkdocs serve`` watches them. A file the check writes
    as well is left out: it changes with every run, and would make ``serve`` rebuild
    forever. Python's audit hook sees every open; it is installed once per worker and records
    only while a check runs."""

    def __init__(self) -> None:
        self.root = ""
        self.files: Reads | None = None
        self.installed = False

    @contextlib.contextmanager
    def recording(self, root: Path, files: Reads) -> Iterator[None]:
        if not self.installed:
            sys.addaudithook(self)
            self.installed = True
        self.root, self.files = str(root) + os.sep, files
        try:
            yield
        finally:
            self.files = None

    def __call__(self, event: str, args: tuple[Any, ...]) -> None:
        files = self.files  # once: the check may end on another thread meanwhile
        if files is None or event not in _FILE_EVENTS:
            return
        with contextlib.suppress(Exception):  # an audit hook must never fail an open
            if event == "open":
                self._record(files, *(*args, None, None)[:3])
            else:  # a rename changes both names, a removal its own: written, both
                for path in args[: _FILE_EVENTS[event]]:
                    self._record(files, path, "w", None)

    def _record(self, files: Reads, path: Any, mode: Any, flags: Any) -> None:
        if isinstance(path, bytes):
            path = os.fsdecode(path)
        if not isinstance(path, str):
            return  # a file descriptor: its file was recorded when it was opened
        if isinstance(mode, str):
            reading = not any(letter in mode for letter in "wax+")
        else:  # os.open: flags only
            reading = isinstance(flags, int) and flags & (os.O_WRONLY | os.O_RDWR | os.O_CREAT) == 0
        path = os.path.abspath(path)
        if "__pycache__" in path:  # Python's own bytecode: read, it stands for its source
            if not reading:
                return
            with contextlib.suppress(ValueError):
                path = importlib.util.source_from_cache(path)
        if not path.startswith(self.root):
            return
        relative = os.path.relpath(path, self.root)
        if reading:
            files.read.add(relative)
        elif relative not in files.written:
            files.written.add(relative)
            isolation.note_written(relative)  # known even if the check dies before it answers


READS = _ProjectReads()
_FILE_EVENTS = {"open": 1, "os.rename": 2, "os.remove": 1, "os.truncate": 1}
"""Audit events that touch a file, and how many of their first arguments are paths."""


def folder_state(root: Path, folder: str, limit: int = 5000) -> dict[str, tuple[int, ...]]:
    """Each file of the project's ``folder`` (``limit`` at most), by its path relative to the
    project, with what tells a change of it: inode, size, modification time. Compared before
    and after a check, it shows what the check wrote there by ways no audit event shows
    (TensorFlow's own file system, a program it ran)."""
    top = root / folder
    state: dict[str, tuple[int, ...]] = {}
    pending = [str(top)] if folder and top.is_dir() and not top.is_symlink() else []
    while pending and len(state) < limit:
        with contextlib.suppress(OSError), os.scandir(pending.pop()) as entries:
            for entry in entries:
                with contextlib.suppress(OSError):
                    if entry.is_dir(follow_symlinks=False):
                        pending.append(entry.path)
                        continue
                    info = entry.stat(follow_symlinks=False)
                    key = os.path.relpath(entry.path, root)
                    state[key] = (info.st_ino, info.st_size, info.st_mtime_ns)
    return state


def changed(before: dict[str, tuple[int, ...]], after: dict[str, tuple[int, ...]]) -> set[str]:
    """Files made, changed or removed between two :func:`folder_state` looks."""
    return {path for path in before.keys() | after.keys() if before.get(path) != after.get(path)}
