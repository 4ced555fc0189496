"""The checker's settings: one frozen object per face, with every default written once.

Each face reads its own configuration (the MkDocs plugin's ``mkdocs.yml`` entry, the Markdown
extension's keyword options, the command line, pytest's options) into an :class:`Options`
and derives the rest from it: :meth:`Options.engine` for the engine (engines are shared by
equal :class:`EngineSettings`), :meth:`Options.pages` for the blocks. No face copies an
option to the engine by hand.
"""

from __future__ import annotations

import dataclasses
import math
import os
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from formula_check.pages.blocks import Settings
from formula_check.planning.option_values import FORMULA_MODES, LONGEST_WAIT

STATUSES = ("mismatch", "error", "timeout", "skipped", "verified")
"""Every status a result can have, as options name them (``fail_on``)."""
DEFAULT_CACHE_DIR = ".cache/formula-check"
"""The result cache folder, relative to the project folder."""
DEFAULT_FAIL_ON = frozenset({"mismatch", "error", "timeout"})
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
AUTO_WORKERS_MOST = 4
"""The most workers ``workers: 0`` starts. Each check computes on one thread, and the build
process compares every result on one thread of its own: past four workers that thread, not
the workers, sets the pace of a build."""


@dataclass(frozen=True)
class EngineSettings:
    """What makes one engine different from another: two faces with equal settings share one
    engine (and so one TensorFlow import) for the life of the process."""

    root: Path
    workers: int = 1
    cache: bool = True
    cache_dir: Path = Path(DEFAULT_CACHE_DIR)
    """Absolute once built by :meth:`Options.engine` (relative paths are the project's)."""
    memory_limit_mb: int = 0
    fork_workers: bool = True
    keep_alive: float = 0
    env: tuple[str, ...] = ()
    python: str | None = None
    """The interpreter of the workers (``None``: this one)."""


@dataclass(frozen=True)
class Options:
    """Every setting of a check run; each face builds one and derives the rest from it."""

    workers: int = 0
    """Worker processes running snippets in parallel; ``0``: as :func:`auto_workers` says."""
    timeout: float = 60
    """Seconds a block's snippet may run (a block's ``timeout=`` wins)."""
    cache: bool = True
    cache_dir: str = DEFAULT_CACHE_DIR
    fail_on: frozenset[str] = DEFAULT_FAIL_ON
    oracles: tuple[str, ...] = ()
    timing: bool = True
    memory_limit_mb: int = 0
    fork_workers: bool = True
    keep_alive: float = 0
    env: tuple[str, ...] = ()
    formula: str = "on"
    """How a block that does not say is checked (its ``formula=`` wins): ``on``, ``off``, or
    ``required``, where a formula that cannot be checked fails its block."""

    def but(self, **changes: Any) -> Options:
        """A copy with ``changes`` (a command line's flags over the project's options)."""
        return dataclasses.replace(self, **changes)

    def engine(self, root: Path, *, python: str | None = None) -> EngineSettings:
        """The engine's part of the settings, for the project at ``root``."""
        folder = Path(self.cache_dir)
        return EngineSettings(
            root=root.resolve(),
            workers=self.worker_count(),
            cache=self.cache,
            cache_dir=folder if folder.is_absolute() else root.resolve() / folder,
            memory_limit_mb=self.memory_limit_mb,
            fork_workers=self.fork_workers,
            keep_alive=self.keep_alive,
            env=self.env,
            python=python,
        )

    def worker_count(self) -> int:
        """The workers a run starts: ``workers``, or :func:`auto_workers`'s count for ``0``."""
        return self.workers or auto_workers(fork=self.fork_workers)

    def pages(self, root: Path, timeout: float | None = None) -> Settings:
        """What every block of the project at ``root`` is built with."""
        return Settings(root, timeout or self.timeout, self.timing, self.formula)

    def problem(self) -> str:
        """What is wrong with the first option out of its range, or an empty string."""
        bad = bad_names(self.env)
        if bad:
            return (
                f"option 'env' has a bad name {bad[0]!r} (the name of a variable, like MY_DATA_DIR)"
            )
        unknown = sorted(set(self.fail_on) - set(STATUSES))
        if unknown:
            return f"option 'fail_on' has a bad value {unknown[0]!r} (one of {', '.join(STATUSES)})"
        if self.formula not in FORMULA_MODES:
            return (
                f"option 'formula' has a bad value {self.formula!r} "
                f"(one of {', '.join(FORMULA_MODES)})"
            )
        rules = [
            ("workers", self.workers >= 0, "0 for one per core, or a number of workers"),
            (
                "timeout",
                0 < self.timeout <= LONGEST_WAIT,
                f"seconds, more than 0 and at most {LONGEST_WAIT:.3g}",
            ),
            ("memory_limit_mb", self.memory_limit_mb >= 0, "MiB, 0 for no limit"),
            ("keep_alive", 0 <= self.keep_alive < math.inf, "seconds, 0 to stop with the run"),
        ]
        for option, ok, wanted in rules:
            if not ok:
                value = getattr(self, option)
                shown = f"{value:g}" if isinstance(value, float) else repr(value)
                return f"option {option!r} has a bad value {shown} ({wanted})"
        return ""


DEFAULTS = Options()
"""The defaults every face starts from (the MkDocs plugin's option schema reads them)."""


def auto_workers(*, fork: bool, cores: int | None = None) -> int:
    """How many workers ``workers: 0`` starts: one per core this process may run on, at most
    :data:`AUTO_WORKERS_MOST`, where workers are forked from one process that imported
    TensorFlow (Linux, ``fork_workers``: a second worker costs a fork, not a second import
    and half a gigabyte); one elsewhere. ``cores``: the usable cores (default: this
    process's CPU affinity)."""
    if not fork or not sys.platform.startswith("linux"):
        return 1
    if cores is None:
        cores = len(os.sched_getaffinity(0))
    return max(1, min(cores, AUTO_WORKERS_MOST))


def bad_names(names: tuple[str, ...] | list[str]) -> list[str]:
    """The entries of an ``env`` option that are not variable names."""
    return [name for name in names if not isinstance(name, str) or not _NAME.fullmatch(name)]
