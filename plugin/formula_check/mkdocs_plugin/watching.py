"""What ``mkdocs serve`` watches for the plugin: snippet files, project modules, oracles.

MkDocs watches the docs folder and ``mkdocs.yml``; a block's code often lives elsewhere (a
``code=`` file, the project's package). :class:`Watcher` collects those paths while the site
builds and hands the new ones to the server after each build.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from .. import serving
from ..pages import PageBlock

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
        self.folders: serving.FolderKeeper | None = None
        self.later_watched: list[str] = []

    def add(self, paths: Iterable[Path]) -> None:
        """Watch ``paths`` too (from the next :meth:`refresh` on)."""
        self.wanted.update(paths)

    def attach(self, server: LiveReloadServer, config_watch: Sequence[object]) -> None:
        """The server is up: watch what was collected so far."""
        self.server = server
        self.folders = serving.FolderKeeper(server)
        self.later_watched = [str(path) for path in config_watch]  # MkDocs adds them next

    def refresh(self, *, quicken: bool, fast: bool) -> None:
        """Watch the paths not watched yet: a file a page starts using while ``mkdocs serve``
        runs is watched from the rebuild that found it. With ``fast`` (``fast_serve``), the
        polling interval is sized anew for all that is watched when anything was added."""
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
            quicken = True
        if quicken and fast:
            serving.quicken_polling(self.server, self.later_watched)

    def close(self) -> None:
        """Stop keeping watched folders alive (the end of ``mkdocs serve``)."""
        if self.folders is not None:
            self.folders.close()


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
