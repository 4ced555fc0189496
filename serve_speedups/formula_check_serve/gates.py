"""The gate in front of every serve speed-up: is it on for this serve session?

Speeds up nothing itself. Each speed-up leans on parts of MkDocs, watchdog or Jinja that no
release promises to keep, so each is a :class:`SpeedUp` naming the versions it was written
and tested for (:class:`WrittenFor`). Before it changes anything, a speed-up asks
:data:`verdicts` whether it is on: the installed versions (read from the packages' metadata,
the only thing this module relies on) must be ones it was written for, and a *shape* check,
which lives next to the speed-up that knows its private parts, must find each part there as
expected. The answer is decided once per serve session (the server, or the cache kept for the
session). Where the gate says no, the speed-up leaves MkDocs as it is and one INFO line per
session, under ``mkdocs.plugins`` so that ``mkdocs serve`` shows it, says which speed-up is off,
why, and what MkDocs does instead: an upgrade turns a speed-up off, never ``mkdocs serve``.
"""

from __future__ import annotations

import logging
import re
import threading
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from importlib import metadata
from typing import Any

log = logging.getLogger("mkdocs.plugins.formula_check_serve")
"""Under ``mkdocs.plugins``, so that ``mkdocs serve`` shows its INFO lines."""


@dataclass(frozen=True)
class WrittenFor:
    """The versions of one package a speed-up was written and tested for: ``lowest`` up to,
    not including, ``below`` (compared on the release numbers, so ``2.0rc1`` is 2.0)."""

    package: str
    lowest: tuple[int, ...]
    below: tuple[int, ...]

    def mismatch(self) -> str | None:
        """Why the installed version is not one of these, or None when it is."""
        try:
            installed = metadata.version(self.package)
        except metadata.PackageNotFoundError:
            return f"the installed version of {self.package} is unknown"
        release = _release(installed)
        if release is None or not self.lowest <= release < self.below:
            return (
                f"{self.package} {installed} is not one of the versions it was written for ({self})"
            )
        return None

    def __str__(self) -> str:
        dotted = ".".join
        return f">={dotted(map(str, self.lowest))},<{dotted(map(str, self.below))}"


def _release(version: str) -> tuple[int, ...] | None:
    match = re.match(r"\d+(\.\d+)*", version)
    return tuple(int(part) for part in match.group().split(".")) if match else None


MKDOCS = WrittenFor("mkdocs", (1, 6), (2,))
"""The versions this project supports (``mkdocs>=1.6,<2``); tested on 1.6.1."""
WATCHDOG = WrittenFor("watchdog", (2, 0), (8,))
"""From the first MkDocs 1.6 accepts to the next major; the observers' and emitters'
``_timeout`` are read as here from 2.0 through 7.x. Tested on 7.1.0."""
JINJA = WrittenFor("jinja2", (2, 11, 1), (4,))
"""From the first MkDocs 1.6 accepts to the next major. Tested on 3.1.6."""


@dataclass(frozen=True)
class SpeedUp:
    """A speed-up relying on private parts of the packages it was ``written_for``. Without it,
    ``instead`` is what happens: MkDocs' own behaviour."""

    name: str
    instead: str
    written_for: tuple[WrittenFor, ...]

    def mismatch(self) -> str | None:
        """Why the installed versions are not ones it was written for, or None."""
        return next(filter(None, (versions.mismatch() for versions in self.written_for)), None)


QUICKER_POLLING = SpeedUp(
    "quicker polling",
    "MkDocs' observer is left as it is (MkDocs polls every 0.5 s)",
    (MKDOCS, WATCHDOG),
)
KEPT_THEME_LIST = SpeedUp(
    "the kept theme file list",
    "MkDocs lists the theme's files on every rebuild",
    (MKDOCS, JINJA),
)
KEPT_TEMPLATES = SpeedUp(
    "the template cache",
    "Jinja compiles the theme's templates on every rebuild",
    (JINJA,),
)
SPEEDUPS = (QUICKER_POLLING, KEPT_THEME_LIST, KEPT_TEMPLATES)


Shape = Callable[[], str | None]
"""Looks at the private parts a speed-up uses: what is missing or not as expected, or None."""


class Verdicts:
    """Whether each speed-up is on, decided once per serve session (the server, or the cache
    kept for the session) and said once when it is off. A session object that cannot be
    weakly referenced is judged on every call."""

    def __init__(self) -> None:
        self._known: weakref.WeakKeyDictionary[Any, dict[str, str | None]] = (
            weakref.WeakKeyDictionary()
        )
        self._lock = threading.Lock()  # asked from MkDocs' threads

    def on(self, session: object, speedup: SpeedUp, shape: Shape) -> bool:
        """Is ``speedup`` on for ``session``: the versions it was written for, and each
        private part as ``shape`` expects? Never raises."""
        with self._lock:
            known = self._of(session)
            if speedup.name not in known:
                reason = looked_at(lambda: speedup.mismatch() or shape())
                self._decide(known, speedup, reason)
            return known[speedup.name] is None

    def turn_off(self, session: object, speedup: SpeedUp, reason: str) -> None:
        """A private part found not as expected while in use: off from now on, said once."""
        with self._lock:
            known = self._of(session)
            if known.get(speedup.name) is None:
                self._decide(known, speedup, reason)

    def _of(self, session: object) -> dict[str, str | None]:
        try:
            return self._known.setdefault(session, {})
        except TypeError:  # not weakly referable: nothing to remember it by
            return {}

    @staticmethod
    def _decide(known: dict[str, str | None], speedup: SpeedUp, reason: str | None) -> None:
        known[speedup.name] = reason
        if reason is not None:
            log.info(f"formula-check-serve: {speedup.name} is off: {reason}; {speedup.instead}")


def looked_at(shape: Shape) -> str | None:
    """What ``shape`` found not as expected, or None; a failure to look is one of those."""
    try:
        return shape()
    except Exception as exc:  # a private part that cannot even be looked at is not as expected
        return f"looking at the private parts it uses failed ({failure(exc)})"


def failure(exc: Exception) -> str:
    """``exc`` as the INFO line names it."""
    return f"{type(exc).__name__}: {exc}"


verdicts = Verdicts()
"""The one record of verdicts that every speed-up asks."""
