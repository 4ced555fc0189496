"""One build's session: the results every page shares, checked in the background, and the
cards (or placeholders, filled once the page's HTML is complete) the pages show."""

from __future__ import annotations

import itertools
import re
import secrets
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import Future
from concurrent.futures import TimeoutError as NotYet
from dataclasses import dataclass, field
from typing import Any

from formula_check.model import CheckSpec, Location, Snippet, Status
from formula_check.pages.blocks import PageBlock, Settings
from formula_check.render import Labels, labels_for, render_card
from formula_check.render.figure_cache import FigureCache
from formula_check.results import CheckResult, SnippetFailure
from formula_check.session.engines import Checker, checked_in_order, close_results
from formula_check.session.page import ImageSink, PageContext

_SUPERSEDED_POLL = 0.1
"""Seconds between looks at :attr:`FormulaSession.superseded` while a page waits."""
SUPERSEDED_GRACE = 1.0
"""Seconds the checks of a superseded build still get to finish: a save that touched prose
alone does not throw away a check about to end (an editor saving every second would
otherwise never let a 2 s check finish); a loop is stopped this much after the fix."""

# Found by its token alone, so that a plugin that re-serialises the HTML (attribute order,
# quoting, empty-attribute syntax) before us does not hide a card.
_PLACEHOLDER = re.compile(
    r"""<div\b[^>]*?\bdata-fc-token=["']?([0-9a-f]+-[0-9]+)["']?[^>]*>\s*</div>"""
)


@dataclass(frozen=True)
class Placeholder:
    """A card waiting for its result: what to render it with, and for which page."""

    future: Future[CheckResult]
    block: PageBlock
    labels: Labels
    page: PageContext


@dataclass
class FormulaSession:
    """Everything the pages of one build share (see the module docstring)."""

    settings: Settings
    labels: Labels
    images: ImageSink
    engine: Checker | None = None
    engine_factory: Callable[[], Checker] | None = None
    fail_on: frozenset[str] = frozenset()
    page: PageContext = field(default_factory=PageContext)
    on_result: Callable[[CheckResult], None] | None = None
    known: dict[Location, tuple[CheckSpec | None, CheckResult]] = field(default_factory=dict)
    figure_cache: FigureCache | None = None
    pending: dict[Location, tuple[CheckSpec, Future[CheckResult]]] = field(default_factory=dict)
    placeholders: dict[str, Placeholder] = field(default_factory=dict)
    nonce: str = field(default_factory=lambda: secrets.token_hex(6))
    superseded: Callable[[], bool] = lambda: False
    """True once the results being checked are stale (``mkdocs serve``: an edit came in): a
    page waiting for one stops the batch instead of waiting out a slow or hanging check."""
    served: bool = False
    """Cards are the author's preview (``mkdocs serve``): they say which results were cached."""
    _checking: threading.Thread | None = None
    _stopping: threading.Event = field(default_factory=threading.Event)
    _batch_stop: threading.Event = field(default_factory=threading.Event)
    _superseded_at: float = 0.0
    _tokens: Iterator[int] = field(default_factory=itertools.count)

    # -- what a face's hooks call: a build, a page, what came of them ---------------------------

    def begin_build(self) -> None:
        """A new build (each ``mkdocs serve`` rebuild): the last batch ends first; its results
        and the placeholders of pages it never finished are forgotten."""
        self.wait_all()
        self.known.clear()
        self.placeholders.clear()

    def enter_page(self, page: PageContext) -> None:
        """The page rendered next: its cards' line numbers, front matter and figure links."""
        self.page = page

    def results(self, blocks: Sequence[PageBlock] | None = None) -> list[CheckResult]:
        """The results known: of ``blocks``, in their order (a block a stopped batch left out
        has none), or all of them."""
        if blocks is None:
            return [result for _, result in self.known.values()]
        return [self.known[b.location][1] for b in blocks if b.location in self.known]

    def unfilled_pages(self) -> list[str]:
        """Pages whose placeholders were never filled (their HTML was rewritten before
        :meth:`fill_placeholders` saw it); they are forgotten once told."""
        pages = sorted({waiting.page.path for waiting in self.placeholders.values()})
        self.placeholders.clear()
        return pages

    def get_engine(self) -> Checker:
        """The engine, created on first use (pages without formulas never start TensorFlow)."""
        if self.engine is None:
            if self.engine_factory is None:
                raise RuntimeError("FormulaSession has neither an engine nor an engine factory")
            self.engine = self.engine_factory()
        return self.engine

    def _check_now(self, blocks: Sequence[PageBlock]) -> list[CheckResult]:
        """Results in block order: reused when known, the rest checked in one batch."""
        todo = [block for block in blocks if self._reusable(block) is None]
        engine = self.get_engine() if any(block.spec is not None for block in todo) else None
        for block, result in checked_in_order(engine, todo):
            self._record(block, result)
        return [self._known_result(block) for block in blocks]

    def _known_result(self, block: PageBlock) -> CheckResult:
        result = self._reusable(block)
        assert result is not None, "recorded just before"
        return result

    def check_in_background(self, blocks: Sequence[PageBlock]) -> None:
        """Start checking every block not known yet, in page order, on a background thread.

        Each result is recorded (and passed to ``on_result``) as it arrives; a page asking for
        one still running gets a :class:`~concurrent.futures.Future` from :meth:`lookup`.
        """
        self.wait_all()  # an earlier batch (a rebuild) has finished before this one starts
        todo: list[PageBlock] = []
        for block in blocks:
            if self._reusable(block) is not None or block.location in self.pending:
                continue
            if block.spec is None:
                self._record(block, block.error_result())
            else:
                todo.append(block)
        if not todo:
            return
        engine = self.get_engine()
        engine.prepare(block.spec for block in todo if block.spec is not None)  # this thread
        futures = {block.location: Future[CheckResult]() for block in todo}
        for block in todo:
            assert block.spec is not None
            self.pending[block.location] = (block.spec, futures[block.location])

        stop = self._batch_stop = threading.Event()

        def check() -> None:
            specs = [block.spec for block in todo if block.spec is not None]
            results = engine.iter_check(specs, prepared=True, stop=stop)
            try:
                for block, result in zip(todo, results, strict=False):
                    if self._stopping.is_set():
                        break  # shutting down: what is left is dropped, not reported
                    if not stop.is_set():  # a stopped batch's results are not kept
                        self._record(block, result)
                    futures[block.location].set_result(result)
            except BaseException as exc:  # handed to whoever waits for a result
                for future in futures.values():
                    if not future.done():
                        future.set_exception(exc)
            finally:
                close_results(results)  # stops the queue of checks not started yet
                for future in futures.values():
                    future.cancel()  # only those never answered: nobody will answer them

        self._checking = threading.Thread(target=check, name="formula-check", daemon=True)
        self._checking.start()

    def wait_all(self) -> None:
        """Wait for the background batch; re-raises what stopped it (no TensorFlow...)."""
        if self._checking is not None:
            self._checking.join()
            self._checking = None
        pending, self.pending = self.pending, {}
        for _, future in pending.values():
            if not future.cancelled():
                future.result()

    def shutdown(self) -> None:
        """Stop for good (Ctrl-C, the end of ``mkdocs serve``): blocks not started are dropped,
        the workers stop, and the background batch ends without reporting anything more."""
        self._stopping.set()
        if self.engine is not None:
            self.engine.close()  # a check still running ends now, as "stopped"
        if self._checking is not None:
            self._checking.join()
            self._checking = None
        self.pending.clear()

    def lookup(self, block: PageBlock) -> CheckResult | Future[CheckResult] | None:
        """The block's result, its future while it is being checked, or None if unknown."""
        result = self._reusable(block)
        if result is not None:
            return result
        running = self.pending.get(block.location)
        if running is not None and running[0] == block.spec:
            future = running[1]
            return future.result() if future.done() and not future.exception() else future
        return None

    def placeholder(
        self, future: Future[CheckResult], block: PageBlock, labels: Labels | None
    ) -> str:
        """An element standing for the card until :meth:`fill_placeholders` replaces it."""
        token = f"{self.nonce}-{next(self._tokens)}"
        self.placeholders[token] = Placeholder(future, block, labels or self.labels, self.page)
        return f'<div class="fc-pending" data-fc-token="{token}" data-search-exclude></div>'

    def fill_placeholders(self, html: str) -> str:
        """``html`` with every placeholder of this session replaced by its card (waiting for
        results still being checked)."""

        def card(match: re.Match[str]) -> str:
            waiting = self.placeholders.pop(match[1], None)
            if waiting is None:
                return match[0]  # not ours (a page quoting the markup): leave it alone
            result = self._awaited(waiting.future)
            return self.card(result, waiting.block, waiting.labels, page=waiting.page)

        return _PLACEHOLDER.sub(card, html)

    def _awaited(self, future: Future[CheckResult]) -> CheckResult:
        """The future's result. Once :attr:`superseded` for :data:`SUPERSEDED_GRACE`
        seconds, the batch is stopped, which answers every future at once (a stopped check
        is SKIPPED)."""
        while True:
            try:
                return future.result(timeout=_SUPERSEDED_POLL)
            except NotYet:  # TimeoutError's alias from Python 3.11 on, a class of its own before
                if self.superseded():
                    now = time.monotonic()
                    self._superseded_at = self._superseded_at or now
                    if now - self._superseded_at >= SUPERSEDED_GRACE:
                        self._batch_stop.set()

    def answers_for(self, blocks: Sequence[PageBlock]) -> list[CheckResult | Future[CheckResult]]:
        """Known results and futures of blocks being checked; the rest is checked now."""
        found = [self.lookup(block) for block in blocks]
        missing = [block for block, answer in zip(blocks, found, strict=True) if answer is None]
        fresh = iter(self._check_now(missing) if missing else [])
        return [answer if answer is not None else next(fresh) for answer in found]

    def _record(self, block: PageBlock, result: CheckResult) -> None:
        self.known[block.location] = (block.spec, result)
        if self.on_result is not None and not self._stopping.is_set():
            self.on_result(result)

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

    def card(
        self,
        result: CheckResult,
        block: PageBlock | None,
        labels: Labels | None = None,
        *,
        page: PageContext | None = None,
    ) -> str:
        """The card for ``result`` in ``labels`` (default: the site's), its figures linked from
        ``page`` (default: the page being rendered). If drawing it fails, an error card says
        why: a card that cannot be drawn must not take the page down."""
        try:
            return self._draw(result, block, labels or self.labels, page or self.page)
        except Exception as exc:
            message = f"could not render this card: {exc}"
            failure = SnippetFailure(type(exc).__name__, message, result.location)
            broken = CheckResult(
                result.block_id, result.location, result.oracle, Status.ERROR, failure=failure
            )
            return self._draw(broken, block, labels or self.labels, page or self.page)

    def _draw(
        self, result: CheckResult, block: PageBlock | None, labels: Labels, page: PageContext
    ) -> str:
        spec = block.spec if block is not None else None
        return render_card(
            result,
            labels=labels,
            image_url=lambda figure: self.images.url(figure, page),
            heatmaps=spec.heatmaps if spec else None,
            sweep_dim=spec.sweep_dim if spec else "n",
            make_figures=self._figures(),
            timeout=spec.timeout if spec else None,
            code=checked_code(spec.snippet) if spec else None,
            open_sections=spec.open_sections if spec else (),
            served=self.served,
        )

    def _figures(self) -> FigureCache:
        """Figures are cached where the face says (in memory when it says nothing)."""
        if self.figure_cache is None:
            self.figure_cache = FigureCache(None)
        return self.figure_cache


def checked_code(snippet: Snippet) -> str | None:
    """The code a card names: ``file.py:func`` or ``pkg.mod:Name`` (nothing for the page's
    own fence, which sits right under the formula)."""
    if snippet.origin == "inline":
        return None
    place = snippet.module if snippet.origin == "module" else snippet.location.path
    return f"{place}:{snippet.entry}" if snippet.entry else place
