"""What ``mkdocs serve`` watches for the plugin: snippet files, project modules, oracles.

MkDocs watches the docs folder and ``mkdocs.yml``; a block's code often lives elsewhere (a
``code=`` file, the project's package). :class:`Watcher` collects those paths while the site
builds and hands the new ones to the server after each build; :class:`FolderKeeper` keeps a
package folder watched through a branch switch; :class:`Edits` tells a build that a file it read
was saved again, so that its remaining checks are stale. All of it through MkDocs' public
``watch``/``unwatch`` and the files themselves: the speed-ups that reach into MkDocs' server are
the separate ``formula-check-serve`` plugin.
"""

from __future__ import annotations

import contextlib
import os
import re
import threading
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from formula_check.pages.blocks import PageBlock

if TYPE_CHECKING:  # MkDocs' server (and watchdog with it) loads only under `mkdocs serve`
    from mkdocs.livereload import LiveReloadServer


class Watcher:
    """The paths to watch, and which of them the server watches already.

    :meth:`attach` is called once the server exists (``on_serve``); before that, and in a
    plain ``mkdocs build``, :meth:`add` only collects.
    """

    def __init__(self) -> None:
        self.wanted: set[Path] = set()
        self.watching: set[Path] = set()
        self.server: LiveReloadServer | None = None
        self.folders: FolderKeeper | None = None

    def add(self, paths: Iterable[Path]) -> None:
        """Watch ``paths`` too (from the next :meth:`refresh` on)."""
        self.wanted.update(paths)

    def attach(self, server: LiveReloadServer) -> None:
        """The server is up: watch what was collected so far."""
        self.server = server
        self.folders = FolderKeeper(server)

    def refresh(self) -> None:
        """Watch the paths not watched yet: a file a page starts using while ``mkdocs serve``
        runs is watched from the rebuild that found it."""
        if self.server is None:
            return
        for path in sorted(self.wanted - self.watching):
            watched = path
            if not path.exists():  # named before it exists: its folder tells when it appears
                watched = next((p for p in path.parents if p.is_dir()), path)
                if watched in self.watching or not watched.is_dir():
                    continue
                self.server.watch(str(watched), recursive=False)
            else:
                self.server.watch(str(path))
                if path.is_dir() and self.folders is not None:
                    self.folders.add(str(path))  # its watch ends if it is removed
            self.watching.add(watched)

    def close(self) -> None:
        """Stop keeping watched folders alive (the end of ``mkdocs serve``)."""
        if self.folders is not None:
            self.folders.close()


def _identity(folder: str) -> tuple[int, ...]:
    """A folder's inode and device (another folder put in its place has others); empty when
    it is gone."""
    try:
        info = os.stat(folder)
    except OSError:
        return ()
    return (info.st_ino, info.st_dev)


class FolderKeeper:
    """Keeps the watches on project folders (a package a snippet imports) through their
    removal and return. A folder that goes away ends its watch for good (the polling emitter
    stops), and MkDocs ignores the folder's own deletion: a package moved away and back, as a
    branch switch does, would be edited unseen for the rest of ``mkdocs serve``. Once a second
    each folder is looked at; one gone or back (another inode) is watched afresh, so that the
    next edit in it rebuilds."""

    def __init__(self, server: LiveReloadServer, interval: float = 1.0) -> None:
        self.server = server
        self.interval = interval
        self.folders: dict[str, tuple[int, ...]] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def add(self, folder: str) -> None:
        """Keep ``folder`` watched (the first one starts the looking thread)."""
        with self._lock:
            self.folders.setdefault(folder, _identity(folder))
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._run, name="formula-check-folders", daemon=True
                )
                self._thread.start()

    def look(self) -> bool:
        """Watch afresh each folder removed or put back since the last look; True if any."""
        changed = False
        with self._lock:
            for folder, known in list(self.folders.items()):
                now = _identity(folder)
                if now == known:
                    continue
                self.folders[folder] = now
                with contextlib.suppress(KeyError, OSError):
                    self.server.unwatch(folder)
                if now:
                    self.server.watch(folder)
                changed = True
        return changed

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            self.look()

    def close(self) -> None:
        """Stop looking."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()


class Edits:
    """Whether a file a build read was saved again since: the build's remaining checks are
    then stale, and MkDocs, which watches the same files, builds again once this build ends.
    Read from the files' own stamps (modification time and size), not from MkDocs' server."""

    def __init__(self) -> None:
        self.stamps: dict[Path, tuple[int, ...]] = {}

    def begin(self, paths: Iterable[Path]) -> None:
        """A build starts reading ``paths`` (its pages, its blocks' snippet files)."""
        self.stamps = {path: _stamp(path) for path in paths}

    def since(self) -> bool:
        """Has any of them changed (or appeared, or gone) since :meth:`begin`?"""
        return any(_stamp(path) != stamp for path, stamp in self.stamps.items())


def _stamp(path: Path) -> tuple[int, ...]:
    try:
        info = path.stat()
    except OSError:
        return ()
    return (info.st_mtime_ns, info.st_size)


def snippet_files(blocks: Sequence[PageBlock], root: Path) -> set[Path]:
    """What serve watches for the blocks before any of them ran: each code= file or module,
    and the project modules a snippet's own import statements name. A run reports what it
    imported, however deep; this is for a run that never reports (a timeout, a crash), whose
    fix is often in the module it imported."""
    paths: set[Path] = set()
    modules: set[str] = set()
    for block in blocks:
        snippet = block.spec.snippet if block.spec else None
        if snippet is None:
            continue
        if snippet.origin == "file":
            paths.add(root / snippet.location.path)
        if snippet.module:
            modules.add(snippet.module)
        modules.update(imported_modules(snippet.source))
    for top in {module.split(".", 1)[0] for module in modules}:
        paths.update(module_files(top, root))
    return paths


_IMPORT = re.compile(
    r"^[ \t]*(?:from[ \t]+([A-Za-z_][\w.]*)[ \t]+import\b|import[ \t]+([^#\n]+))", re.M
)


def imported_modules(source: str) -> set[str]:
    """The absolute module names the ``import`` lines of ``source`` name (a relative
    ``from . import`` names none). Read from the lines rather than parsed with ``ast``: a
    snippet with a syntax error still names what to watch, and its fix may be in a module."""
    names: set[str] = set()
    for found, listed in _IMPORT.findall(source):
        if found:
            names.add(found)
        else:
            names.update(part.split()[0] for part in listed.split(",") if part.split())
    return names


def module_files(module: str, root: Path) -> set[Path]:
    """The project file or package folder a module comes from (its top-level package, since
    it may import siblings); nothing for installed modules, which do not change while serving."""
    top = module.split(".", 1)[0]
    candidates = (root / top, root / f"{top}.py")
    return {path for path in candidates if path.exists()}
