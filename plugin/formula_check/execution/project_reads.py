"""What one check read and wrote: every file it opened and every folder it listed (Python's
audit hook), in the project and outside it (:mod:`.outside_reads`); the reads no audit event
follows (a program it ran, a database, a socket); and the files of the page's folder it
changed by ways no audit event shows."""

from __future__ import annotations

import contextlib
import importlib.util
import os
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from formula_check.execution import outside_reads

_notes: int | None = None
"""In a check's process: where :func:`note_written` tells the warm worker what it wrote."""


@dataclass
class Reads:
    """What one check opened in the project (to read, and to write), and what else its result
    depends on: files outside the project (absolute), folders it listed (relative to the
    project inside it, else absolute), and why a read could not be followed."""

    read: set[str] = field(default_factory=set)
    written: set[str] = field(default_factory=set)
    outside: set[str] = field(default_factory=set)
    listed: set[str] = field(default_factory=set)
    unseen: set[str] = field(default_factory=set)


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
        if files is None:
            return
        with contextlib.suppress(Exception):  # an audit hook must never fail an open
            if event == "open":
                self._record(files, *(*args, None, None)[:3])
            elif event in _FILE_EVENTS:  # a rename changes both names, a removal its own
                for path in args[: _FILE_EVENTS[event]]:
                    self._record(files, path, "w", None)
            elif event in _LISTINGS:
                self._listed(files, args[0] if args else None)
            elif event in outside_reads.UNSEEN:
                files.unseen.add(outside_reads.UNSEEN[event])
            elif event == outside_reads.UNSEEN_EVENT:
                files.unseen.add(str(args[0]))

    def _listed(self, files: Reads, path: Any) -> None:
        """A folder the check listed; not one the import system lists to find a module (a
        module found elsewhere is a file read, keyed as such)."""
        if sys._getframe(2).f_code.co_name == "_fill_cache":
            return
        if isinstance(path, bytes):
            path = os.fsdecode(path)
        if path is None:
            path = "."
        if not isinstance(path, str):
            return  # a descriptor: the folder was named when it was opened
        path = os.path.abspath(path)
        if (path + os.sep).startswith(self.root):
            files.listed.add(os.path.relpath(path, self.root))
        elif outside_reads.keyed(path + os.sep):
            files.listed.add(path)

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
            if reading and outside_reads.keyed(path):
                files.outside.add(path)
            return
        relative = os.path.relpath(path, self.root)
        if reading:
            files.read.add(relative)
        elif relative not in files.written:
            files.written.add(relative)
            note_written(relative)  # known even if the check dies before it answers


def tell_written_to(fd: int) -> None:
    """In a check's process, as it starts: :func:`note_written` writes down ``fd``."""
    global _notes  # noqa: PLW0603  (this process's own, set once as it starts)
    _notes = fd


def note_written(path: str) -> None:
    """Tell the warm worker, at once, that the check wrote ``path`` (of the project): it is
    known even if the check then dies without an answer."""
    if _notes is not None:
        with contextlib.suppress(OSError):  # a full pipe loses a name, never the check
            os.write(_notes, path.encode("utf-8", "surrogateescape") + b"\n")


READS = _ProjectReads()
_FILE_EVENTS = {"os.rename": 2, "os.remove": 1, "os.truncate": 1, "os.utime": 1, "os.chmod": 1}
"""Audit events that change a file, and how many of their first arguments are paths. A touch
or a chmod lands even where the kernel confines the check (:mod:`..runtime.confinement`), and
makes ``mkdocs serve`` rebuild as a write does."""
_LISTINGS = {"os.listdir", "os.scandir"}
"""Audit events that list a folder (``glob``, ``os.walk`` and ``pathlib`` list through them)."""


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
