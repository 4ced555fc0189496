"""Engines as faces get them: one per settings, made in one place, seen through one interface.

A face never builds an :class:`~.engine.Engine`: it asks an :class:`Engines` for the one of its
:class:`~.options.EngineSettings`, and talks to it as a :class:`Checker`, which the faces' tests
fake.
"""

from __future__ import annotations

import atexit
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Protocol

from formula_check.model import CheckSpec
from formula_check.pages.blocks import PageBlock
from formula_check.results import CheckResult
from formula_check.session.engine import Engine
from formula_check.session.options import EngineSettings


class Checker(Protocol):
    """What a face needs of an engine (:class:`~formula_check.session.engine.Engine`, or a fake that
    answers without TensorFlow in the faces' tests)."""

    @property
    def startup_seconds(self) -> float:
        """Time spent starting workers, never counted in a block's own time."""

    def check_many(self, specs: Iterable[CheckSpec]) -> list[CheckResult]:
        """Every block's result, in input order."""

    def iter_check(
        self,
        specs: Iterable[CheckSpec],
        *,
        prepared: bool = False,
        stop: threading.Event | None = None,
    ) -> Iterator[CheckResult]:
        """Results in input order, each as soon as it and those before it are done; closing
        the iterator (when it has ``close``) stops the checks not started yet."""

    def prepare(self, specs: Iterable[CheckSpec]) -> None:
        """Do on the calling thread what the first check would do before asking a worker."""

    def start_in_background(self) -> object:
        """Start the workers now, without waiting for them."""

    def close(self) -> None:
        """Stop the workers."""


EngineMaker = Callable[[EngineSettings], Checker]


def open_engine(settings: EngineSettings) -> Engine:
    """A new engine for ``settings``: the one place settings become engine arguments."""
    return Engine(
        settings.root,
        workers=settings.workers,
        cache_dir=settings.cache_dir,
        use_cache=settings.cache,
        python=settings.python,
        memory_limit_mb=settings.memory_limit_mb,
        fork=settings.fork_workers,
        keep_alive=settings.keep_alive,
        env=settings.env,
    )


class Engines:
    """Engines by their settings: equal settings share one engine (one TensorFlow import).

    ``make`` builds a missing one (:func:`open_engine`; the faces' tests give a fake).
    :meth:`only` keeps a single engine, as the MkDocs plugin does across ``mkdocs serve``
    rebuilds: new settings close the engine made for the old ones.
    """

    def __init__(self, make: EngineMaker = open_engine) -> None:
        self.make = make
        self._made: dict[EngineSettings, Checker] = {}
        self._lock = threading.Lock()

    def get(self, settings: EngineSettings) -> Checker:
        """The engine for ``settings``, made on first use."""
        with self._lock:
            if settings not in self._made:
                self._made[settings] = self.make(settings)
            return self._made[settings]

    def only(self, settings: EngineSettings) -> Checker:
        """The engine for ``settings``; any engine made for other settings is closed."""
        with self._lock:
            stale = [key for key in self._made if key != settings]
            for key in stale:
                self._made.pop(key).close()
        return self.get(settings)

    def close(self) -> None:
        """Close every engine made so far."""
        with self._lock:
            made, self._made = list(self._made.values()), {}
        for engine in made:
            engine.close()


SHARED_ENGINES = Engines()
"""Engines of faces that own no build lifetime (the Markdown extension alone, Zensical): a new
engine per page would import TensorFlow once per page. Closed when the process exits."""
atexit.register(SHARED_ENGINES.close)


def checked_in_order(
    engine: Checker | None, blocks: Sequence[PageBlock]
) -> Iterator[tuple[PageBlock, CheckResult]]:
    """Each block with its result, in block order, as soon as it is known: a block that could
    not be built (no spec) is its error result and reaches no worker (nor needs an engine:
    ``None`` will do when no block has a spec)."""
    specs = [block.spec for block in blocks if block.spec is not None]
    if specs and engine is None:
        raise ValueError("blocks to check, and no engine to check them")
    results = engine.iter_check(specs) if engine is not None and specs else iter(())
    try:
        for block in blocks:
            yield block, block.error_result() if block.spec is None else next(results)
    finally:
        close_results(results)


def close_results(results: Iterator[CheckResult]) -> None:
    """Stop the checks of ``results`` not started yet (an engine's generator can)."""
    close = getattr(results, "close", None)
    if close is not None:
        close()
