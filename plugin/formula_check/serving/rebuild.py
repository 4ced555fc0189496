"""MkDocs' rebuild flag, read and set, and the watches on project folders kept.

What it speeds up: :func:`rebuild_wanted` tells a build that a newer edit came in, so its
remaining checks (stale) are stopped and the fixed page shows at once; :func:`request_rebuild`
asks for a rebuild when :class:`FolderKeeper` sees a watched package folder come back (a
branch switch), instead of waiting for the next edit.

Private parts relied on: MkDocs' ``LiveReloadServer._want_rebuild`` (a bool) and its
``_rebuild_cond`` (a condition); ``FolderKeeper`` otherwise uses MkDocs' public
``watch``/``unwatch``. Where the gate says no, :data:`.gates.STOP_STALE_CHECKS` off means
each build runs its checks to the end (no rebuild is ever "wanted"), and
:data:`.gates.REBUILD_ON_RETURN` off means a folder that comes back is watched again and the
next edit rebuilds.
"""

from __future__ import annotations

import contextlib
import threading
from typing import Any

from .folders import folder_identity
from .gates import REBUILD_ON_RETURN, STOP_STALE_CHECKS, verdicts


def _rebuild_flag_shape(server: Any) -> str | None:
    if not isinstance(getattr(server, "_want_rebuild", None), bool):
        return "MkDocs' LiveReloadServer has no _want_rebuild flag"
    return None


def _rebuild_request_shape(server: Any) -> str | None:
    condition = getattr(server, "_rebuild_cond", None)
    if not all(callable(getattr(condition, name, None)) for name in ("__enter__", "notify_all")):
        return "MkDocs' LiveReloadServer has no _rebuild_cond condition"
    return _rebuild_flag_shape(server)


def rebuild_wanted(server: Any) -> bool:
    """Has a change come in since this build started? MkDocs then builds again as soon as
    this build ends, so what this build still checks is stale. (MkDocs' own flag: never, where
    :data:`STOP_STALE_CHECKS` is off.)"""
    if not verdicts.on(server, STOP_STALE_CHECKS, lambda: _rebuild_flag_shape(server)):
        return False
    return bool(getattr(server, "_want_rebuild", False))


def request_rebuild(server: Any) -> None:
    """Ask MkDocs for a rebuild, as its own watch does when a file changes (nothing, where
    :data:`REBUILD_ON_RETURN` is off)."""
    if not verdicts.on(server, REBUILD_ON_RETURN, lambda: _rebuild_request_shape(server)):
        return
    with server._rebuild_cond:
        server._want_rebuild = True
        server._rebuild_cond.notify_all()


class FolderKeeper:
    """Keeps the watches on project folders (a package a snippet imports) through their
    removal and return. A folder that goes away ends its watch for good (the polling emitter
    stops), and MkDocs ignores the folder's own deletion: a package moved away and back, as a
    branch switch does, would be edited unseen for the rest of ``mkdocs serve``. Once a second
    each folder is looked at; one gone or back (another inode) is watched afresh, and a
    rebuild is asked for, since the verdicts of the blocks importing it changed."""

    def __init__(self, server: Any, interval: float = 1.0) -> None:
        self.server = server
        self.interval = interval
        self.folders: dict[str, tuple[int, ...]] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def add(self, folder: str) -> None:
        with self._lock:
            self.folders.setdefault(folder, folder_identity(folder))
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
                now = folder_identity(folder)
                if now == known:
                    continue
                self.folders[folder] = now
                with contextlib.suppress(KeyError, OSError):
                    self.server.unwatch(folder)
                if now:
                    self.server.watch(folder)
                changed = True
        if changed:
            request_rebuild(self.server)
        return changed

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            self.look()

    def close(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
