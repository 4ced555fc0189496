"""Quicker polling: an edit under ``mkdocs serve`` is seen sooner.

MkDocs looks for changed files every 0.5 s, so an edit waits 0.25 s on average before anything
starts. :func:`quicken_polling` shortens the interval of MkDocs' own polling observer, sized
from how long one look at the watched folders takes, so that polling never costs more than
about 5 % of a core. Polling still; not native file events, which miss changes on some mounts
(Docker volumes from another OS, network shares), where MkDocs' polling works. MkDocs' wait of
0.1 s for more changes before it rebuilds is kept: with quicker polling it spans two looks, so a
save that an editor spreads over both still gives one rebuild.

Private parts relied on: MkDocs' ``LiveReloadServer._watched_paths`` and its ``observer``
being watchdog's ``PollingObserver``, whose ``_timeout`` and each emitter's ``_timeout`` set
the interval. Where the gate (:data:`.gates.QUICKER_POLLING`) says no, or a part is found gone
later, MkDocs' observer is left as it is and polls every 0.5 s.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterable
from typing import Any

from watchdog.observers.polling import PollingObserver
from watchdog.utils.dirsnapshot import DirectorySnapshot

from .gates import QUICKER_POLLING, log, looked_at, verdicts


def _number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _polling_shape(server: Any) -> str | None:
    if not isinstance(getattr(server, "_watched_paths", None), dict):
        return "MkDocs' LiveReloadServer has no _watched_paths dict"
    observer = getattr(server, "observer", None)
    if not isinstance(observer, PollingObserver):
        kind = type(observer).__name__
        return f"MkDocs' server observer is not watchdog's PollingObserver but {kind}"
    if not _number(getattr(observer, "_timeout", None)):
        return "watchdog's PollingObserver has no _timeout number"
    if not all(_number(getattr(emitter, "_timeout", None)) for emitter in observer.emitters):
        return "a watchdog emitter has no _timeout number"
    return None


MKDOCS_INTERVAL = 0.5
"""MkDocs' own polling interval (``LiveReloadServer(polling_interval=0.5)``)."""
FASTEST_INTERVAL = 0.05
POLLING_SHARE = 0.05
"""Polling may take this share of one core: interval = snapshot time / share."""


def polling_interval(snapshot_seconds: float) -> float:
    """The interval for one look at the watched paths taking ``snapshot_seconds``: as short as
    :data:`FASTEST_INTERVAL`, never longer than MkDocs' own."""
    return min(MKDOCS_INTERVAL, max(FASTEST_INTERVAL, snapshot_seconds / POLLING_SHARE))


def snapshot_seconds(paths: list[str]) -> float:
    """How long one poll of ``paths`` takes: what the polling emitters do each interval (a
    folder with everything below it; for a file, the folder holding it, without subfolders)."""
    start = time.perf_counter()
    for path in paths:
        try:
            if os.path.isfile(path):
                DirectorySnapshot(os.path.dirname(os.path.abspath(path)), recursive=False)
            else:
                DirectorySnapshot(path, recursive=True)
        except OSError:
            continue  # a path that is gone costs nothing to poll
    return time.perf_counter() - start


def watched_paths(server: Any) -> frozenset[str]:
    """What ``server`` watches now (nothing, for a server it does not know)."""
    watched = getattr(server, "_watched_paths", None)
    return frozenset(map(str, watched)) if isinstance(watched, dict) else frozenset()


def quicken_polling(server: Any, paths: Iterable[str] = ()) -> float | None:
    """Poll what ``server`` (MkDocs' ``LiveReloadServer``) watches more often.

    The interval is sized from one look at the paths watched so far plus ``paths`` (those
    MkDocs or a later rebuild will add: ``watch:`` in ``mkdocs.yml``, snippet files). It is set
    on MkDocs' own observer and its emitters, so every watch keeps its callback and settings,
    whoever made it. Call it again when more is watched: it sizes the interval anew. Returns
    the interval, or None when :data:`QUICKER_POLLING` is off for this server: versions it
    was not written for, or a server or observer it does not know (left as is, said once).
    """
    if not verdicts.on(server, QUICKER_POLLING, lambda: _polling_shape(server)):
        return None
    problem = looked_at(lambda: _polling_shape(server))  # emitters come with each watch
    if problem is not None:
        verdicts.turn_off(server, QUICKER_POLLING, problem)
        return None
    observer = server.observer
    emitters = list(observer.emitters)
    every = sorted({*map(str, server._watched_paths), *map(str, paths)})
    interval = polling_interval(snapshot_seconds(every))
    observer._timeout = interval  # for watches added from now on
    for emitter in emitters:
        emitter._timeout = interval  # read by its polling loop before each look
    log.debug(f"formula-check-serve: polling {len(every)} path(s) every {interval:.2f} s")
    return interval
