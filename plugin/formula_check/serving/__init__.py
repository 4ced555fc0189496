"""A quicker ``mkdocs serve``: changes seen sooner, theme templates compiled once.

Of the time between saving a page and seeing it rebuilt, most is MkDocs' own, not the check's.
Under ``mkdocs serve`` the plugin's ``fast_serve`` option (default on) removes the waste, one
module per speed-up:

- :mod:`.polling`: MkDocs' observer polls sooner than every 0.5 s (:func:`quicken_polling`);
- :mod:`.templates`: the theme's templates compiled once per session (:class:`TemplateCache`);
- :mod:`.theme`: the theme's file list kept while its folders are unchanged
  (:class:`ThemeListing`);
- :mod:`.rebuild`: MkDocs' rebuild flag read and set (:func:`rebuild_wanted`,
  :func:`request_rebuild`), and watched package folders kept through a branch switch
  (:class:`FolderKeeper`);
- :mod:`.folders`: a folder's state, as the last two read it.

These lean on parts of MkDocs, watchdog and Jinja that no release promises to keep: private
attributes, a nested function, the settings that decide Jinja's compiled code. :mod:`.gates`
holds, for each, the versions it was written and tested for, and decides once per serve session
whether it is on: where the versions or the shape of a private part are not as expected, MkDocs
is left as it is and one INFO line per session says which speed-up is off and why. An upgrade
turns a speed-up off, never ``mkdocs serve``.

The names below are this package's interface. A module reads its own settings
(``polling.snapshot_seconds``, ``theme.UNSETTLED_SECONDS``): change them there, not here.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from .gates import (
    JINJA,
    KEPT_TEMPLATES,
    KEPT_THEME_LIST,
    MKDOCS,
    QUICKER_POLLING,
    REBUILD_ON_RETURN,
    SPEEDUPS,
    STOP_STALE_CHECKS,
    WATCHDOG,
    Shape,
    SpeedUp,
    WrittenFor,
    log,
)
from .rebuild import FolderKeeper, rebuild_wanted, request_rebuild
from .templates import TemplateCache
from .theme import THEME_FILTER_NAMES, UNSETTLED_SECONDS, ThemeListing

if TYPE_CHECKING:
    from .polling import (
        FASTEST_INTERVAL,
        MKDOCS_INTERVAL,
        POLLING_SHARE,
        polling_interval,
        quicken_polling,
        snapshot_seconds,
    )

_FROM_POLLING = frozenset(
    [
        "FASTEST_INTERVAL",
        "MKDOCS_INTERVAL",
        "POLLING_SHARE",
        "polling_interval",
        "quicken_polling",
        "snapshot_seconds",
    ]
)
"""Names of :mod:`.polling`, loaded on first use: it imports watchdog, which only ``mkdocs
serve`` needs (a build, warm above all, should not pay for it)."""


def __getattr__(name: str) -> Any:
    if name == "polling":  # the module itself, before anything imported it
        return importlib.import_module(".polling", __name__)
    if name in _FROM_POLLING:
        return getattr(importlib.import_module(".polling", __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "FASTEST_INTERVAL",
    "JINJA",
    "KEPT_TEMPLATES",
    "KEPT_THEME_LIST",
    "MKDOCS",
    "MKDOCS_INTERVAL",
    "POLLING_SHARE",
    "QUICKER_POLLING",
    "REBUILD_ON_RETURN",
    "SPEEDUPS",
    "STOP_STALE_CHECKS",
    "THEME_FILTER_NAMES",
    "UNSETTLED_SECONDS",
    "WATCHDOG",
    "FolderKeeper",
    "Shape",
    "SpeedUp",
    "TemplateCache",
    "ThemeListing",
    "WrittenFor",
    "log",
    "polling_interval",
    "quicken_polling",
    "rebuild_wanted",
    "request_rebuild",
    "snapshot_seconds",
]
