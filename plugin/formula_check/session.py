"""State shared by every page of one build: engine, results, figures, the page being rendered.

Markdown makes a new extension instance per page (MkDocs does, Zensical does); the session is
what survives between them, so the TensorFlow workers start once and a block checked in the
MkDocs plugin's site-wide pre-pass is not checked again when its page renders.
"""

from __future__ import annotations

import atexit
import base64
import hashlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from .engine import Engine
from .model import CheckResult, CheckSpec, Location
from .pages import PageBlock, Settings
from .render import Figure, Labels, labels_for, render_card
from .render.figure_cache import FigureCache


@dataclass(frozen=True)
class PageContext:
    """The page being rendered.

    ``line_offset`` is how many lines were cut from the top of the file before Markdown saw it
    (MkDocs strips front matter). ``meta`` is the page's front matter; ``None`` means "read it
    from the text" (plain Markdown keeps it in). ``url`` is the page's URL in the site, used to
    make figure links relative.
    """

    path: str = "<page>"
    line_offset: int = 0
    meta: dict[str, Any] | None = None
    url: str = ""


class ImageSink(Protocol):
    """Stores a figure where the page can load it and returns the URL to use."""

    def url(self, figure: Figure, page: PageContext) -> str:
        """The URL of ``figure`` as seen from ``page``."""


def figure_name(figure: Figure) -> str:
    """A content-addressed file name: the same picture always gets the same name."""
    return hashlib.sha256(figure.data).hexdigest()[:20] + figure.suffix


class DataUriImages:
    """Figures inlined as ``data:`` URIs: nothing to copy, pages are self-contained."""

    def url(self, figure: Figure, page: PageContext) -> str:
        """The file's bytes as a base64 ``data:`` URI."""
        encoded = base64.b64encode(figure.data).decode("ascii")
        return f"data:{figure.media_type};base64,{encoded}"


class DirectoryImages:
    """Figures written to ``directory``; pages link to them under ``url_prefix``."""

    def __init__(self, directory: Path, url_prefix: str) -> None:
        self.directory = directory
        self.url_prefix = url_prefix.rstrip("/")

    def url(self, figure: Figure, page: PageContext) -> str:
        """Write the file (once) and return its URL."""
        name = figure_name(figure)
        target = self.directory / name
        if not target.exists():
            self.directory.mkdir(parents=True, exist_ok=True)
            target.write_bytes(figure.data)
        return f"{self.url_prefix}/{name}"


def is_failure(result: CheckResult, fail_on: frozenset[str] | set[str]) -> bool:
    """Should this result fail the build? A broken promise (``expect=``) always does."""
    if result.outcome_ok:
        return False
    if result.expected_failure:
        return True
    return result.status.value in fail_on


_ENGINES: dict[tuple[Any, ...], Engine] = {}


def shared_engine(
    root: Path,
    *,
    workers: int,
    cache: bool,
    cache_dir: str | None,
    memory_limit_mb: int,
    fork: bool = True,
) -> Engine:
    """One engine per settings for the life of the process (closed at exit).

    Without the MkDocs plugin nobody owns a build's lifetime, and a new engine per page would
    import TensorFlow once per page.
    """
    key = (root, workers, cache, cache_dir, memory_limit_mb, fork)
    if key not in _ENGINES:
        if not _ENGINES:
            atexit.register(_close_engines)
        directory = Path(cache_dir) if cache_dir else None
        _ENGINES[key] = Engine(
            root,
            workers=workers,
            cache_dir=directory,
            use_cache=cache,
            memory_limit_mb=memory_limit_mb,
            fork=fork,
        )
    return _ENGINES[key]


def _close_engines() -> None:
    for engine in _ENGINES.values():
        engine.close()
    _ENGINES.clear()


@dataclass
class FormulaSession:
    """Everything the pages of one build share (see the module docstring)."""

    settings: Settings
    labels: Labels
    images: ImageSink
    engine: Engine | None = None
    engine_factory: Callable[[], Engine] | None = None
    fail_on: frozenset[str] = frozenset()
    page: PageContext = field(default_factory=PageContext)
    on_result: Callable[[CheckResult], None] | None = None
    known: dict[Location, tuple[CheckSpec | None, CheckResult]] = field(default_factory=dict)
    figure_cache: FigureCache | None = None

    def get_engine(self) -> Engine:
        """The engine, created on first use (pages without formulas never start TensorFlow)."""
        if self.engine is None:
            if self.engine_factory is None:
                raise RuntimeError("FormulaSession has neither an engine nor an engine factory")
            self.engine = self.engine_factory()
        return self.engine

    def results_for(self, blocks: Sequence[PageBlock]) -> list[CheckResult]:
        """Results in block order: reused when known, the rest checked in one batch."""
        todo = [b.spec for b in blocks if b.spec is not None and self._reusable(b) is None]
        fresh = iter(self.get_engine().check_many(todo) if todo else [])
        results = []
        for block in blocks:
            result = self._reusable(block)
            if result is None:
                result = block.error_result() if block.spec is None else next(fresh)
                self.known[block.location] = (block.spec, result)
                if self.on_result is not None:
                    self.on_result(result)
            results.append(result)
        return results

    def _reusable(self, block: PageBlock) -> CheckResult | None:
        stored = self.known.get(block.location)
        if stored is None or stored[0] != block.spec:
            return None
        if block.spec is None and stored[1].detail() != block.error_result().detail():
            return None
        return stored[1]

    def labels_for_page(self, meta: Mapping[str, Any] | None) -> Labels:
        """The card labels of one page: its front matter's ``language:`` wins over the site's.

        A bilingual site keeps one theme language; the Chinese pages say ``language: zh``.
        """
        language = meta.get("language") if meta else None
        if isinstance(language, str) and language.strip():
            return labels_for(language)
        return self.labels

    def render(
        self, result: CheckResult, block: PageBlock | None, labels: Labels | None = None
    ) -> str:
        """The card for ``result`` in ``labels`` (default: the site's), figures via the sink."""
        spec = block.spec if block is not None else None
        return render_card(
            result,
            labels=labels or self.labels,
            image_url=lambda figure: self.images.url(figure, self.page),
            heatmaps=spec.heatmaps if spec else None,
            sweep_dim=spec.sweep_dim if spec else "n",
            make_figures=self._figures(),
        )

    def _figures(self) -> FigureCache:
        """Figures are cached beside the results (in memory only when the cache is off)."""
        if self.figure_cache is None:
            engine = self.get_engine()
            directory = engine.cache.directory / "figures" if engine.use_cache else None
            self.figure_cache = FigureCache(directory)
        return self.figure_cache
