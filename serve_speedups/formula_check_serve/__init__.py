"""A quicker ``mkdocs serve``: changes seen sooner, theme templates compiled once.

Of the time between saving a page and seeing it rebuilt, most is MkDocs' own. The
``formula-check-serve`` MkDocs plugin (:mod:`.plugin`) removes some of it under ``mkdocs serve``,
one module per speed-up:

- :mod:`.polling`: MkDocs' observer polls sooner than every 0.5 s (:func:`quicken_polling`);
- :mod:`.templates`: the theme's templates compiled once per session (:class:`TemplateCache`);
- :mod:`.theme`: the theme's file list kept while its folders are unchanged
  (:class:`ThemeListing`);
- :mod:`.folders`: a folder's state, as the kept theme file list reads it.

These lean on parts of MkDocs, watchdog and Jinja that no release promises to keep: private
attributes, a nested function, the settings that decide Jinja's compiled code. :mod:`.gates`
holds, for each, the versions it was written and tested for, and decides once per serve session
whether it is on: where the versions or the shape of a private part are not as expected, MkDocs
is left as it is and one INFO line per session says which speed-up is off and why. An upgrade
turns a speed-up off, never ``mkdocs serve``.

This package imports nothing of ``formula_check``: it speeds up any MkDocs site. A module reads
its own settings (``polling.snapshot_seconds``, ``theme.UNSETTLED_SECONDS``): change them there.
:mod:`.polling` imports watchdog, which only ``mkdocs serve`` needs, so it is imported where used.
"""

from __future__ import annotations

from .gates import (
    JINJA,
    KEPT_TEMPLATES,
    KEPT_THEME_LIST,
    MKDOCS,
    QUICKER_POLLING,
    SPEEDUPS,
    WATCHDOG,
    Shape,
    SpeedUp,
    WrittenFor,
    log,
)
from .templates import TemplateCache
from .theme import THEME_FILTER_NAMES, UNSETTLED_SECONDS, ThemeListing

__all__ = [
    "JINJA",
    "KEPT_TEMPLATES",
    "KEPT_THEME_LIST",
    "MKDOCS",
    "QUICKER_POLLING",
    "SPEEDUPS",
    "THEME_FILTER_NAMES",
    "UNSETTLED_SECONDS",
    "WATCHDOG",
    "Shape",
    "SpeedUp",
    "TemplateCache",
    "ThemeListing",
    "WrittenFor",
    "log",
]
