"""Cards rendered before their result exists: placeholders, filled in per page, never forged."""

from __future__ import annotations

import threading
from concurrent.futures import Future
from pathlib import Path

import numpy as np
import pytest

from formula_check.model import Location, Status, frozen_map
from formula_check.pages.blocks import PageBlock, Settings, page_blocks
from formula_check.render import labels_for
from formula_check.render.figure_cache import FigureCache
from formula_check.results import CheckResult, SnippetFailure
from formula_check.session import SUPERSEDED_GRACE, FormulaSession, PageContext

PAGE = """# Attention

```formula id="sdpa" oracle="softmax" dims="b=1 n=2 m=3"
\\text{softmax}(x)_i = \\frac{e^{x_i}}{\\sum_j e^{x_j}}
```

```python
import tensorflow as tf

def softmax(x):
    return tf.nn.softmax(x, axis=-1)
```
"""


class Links:
    """An image sink that says which page each figure link was made for."""

    def url(self, figure: object, page: PageContext) -> str:
        return f"{page.url}figure.svg"


@pytest.fixture
def session(tmp_path: Path) -> FormulaSession:
    return FormulaSession(
        settings=Settings(tmp_path, 60.0, False),
        labels=labels_for("en"),
        images=Links(),
        figure_cache=FigureCache(),
    )


def block_of(session: FormulaSession) -> PageBlock:
    (block,) = page_blocks(PAGE.split("\n"), page="docs/a.md", settings=session.settings)
    return block


def failed(block: PageBlock) -> CheckResult:
    failure = SnippetFailure("ValueError", "<b>bad</b>", Location("docs/a.md", 9))
    weights = frozen_map({"weights": np.full((1, 2, 3), 1 / 3)})
    return CheckResult(
        block.block_id, block.location, "softmax", Status.ERROR, failure=failure, arrays=weights
    )


def test_a_placeholder_becomes_the_card_once_the_result_is_in(session: FormulaSession) -> None:
    block = block_of(session)
    future: Future[CheckResult] = Future()
    session.enter_page(PageContext("docs/a.md", url="a/"))
    html = "<main>" + session.placeholder(future, block, None) + "</main>"
    assert 'class="fc-pending"' in html and len(session.placeholders) == 1
    future.set_result(failed(block))
    session.enter_page(PageContext("docs/b.md", url="b/"))  # another page renders meanwhile
    filled = session.fill_placeholders(html)
    assert filled.startswith('<main><div class="admonition danger fc-card fc-status-error"')
    assert "&lt;b&gt;bad&lt;/b&gt;" in filled and "<b>bad</b>" not in filled
    assert "fc-pending" not in filled
    assert '<img src="a/figure.svg"' in filled  # linked from its own page, not the latest one
    assert session.placeholders == {}


def test_foreign_or_repeated_tokens_are_left_alone(session: FormulaSession) -> None:
    block = block_of(session)
    future: Future[CheckResult] = Future()
    future.set_result(failed(block))
    ours = session.placeholder(future, block, None)
    forged = '<div class="fc-pending" data-fc-token="abc123-0" data-search-exclude></div>'
    filled = session.fill_placeholders(forged + ours + ours)
    assert filled.startswith(forged)
    assert filled.count("fc-card") == 1  # a token is used once; a copy of it stays inert
    assert filled.endswith(ours)


def test_an_error_while_checking_reaches_whoever_waits(session: FormulaSession) -> None:
    block = block_of(session)
    future: Future[CheckResult] = Future()
    html = session.placeholder(future, block, None)
    future.set_exception(RuntimeError("the worker pool broke"))
    with pytest.raises(RuntimeError, match="the worker pool broke"):
        session.fill_placeholders(html)


def test_lookup_returns_a_future_only_for_the_same_spec(session: FormulaSession) -> None:
    block = block_of(session)
    assert block.spec is not None
    future: Future[CheckResult] = Future()
    session.pending[block.location] = (block.spec, future)
    assert session.lookup(block) is future
    result = failed(block)
    future.set_result(result)
    assert session.lookup(block) is result  # done: the result itself
    other = PAGE.replace("axis=-1", "axis=1")
    (edited,) = page_blocks(other.split("\n"), page="docs/a.md", settings=session.settings)
    assert session.lookup(edited) is None  # the page changed under the running check


def test_tokens_are_never_reused_after_a_partial_fill(session: FormulaSession) -> None:
    block = block_of(session)
    first: Future[CheckResult] = Future()
    first.set_result(failed(block))
    kept = session.placeholder(first, block, None)
    session.placeholder(first, block, None)  # its page never comes back (a plugin dropped it)
    session.fill_placeholders(kept)
    later = [session.placeholder(first, block, None) for _ in range(2)]
    assert len(set(later)) == 2 and not set(later) & {kept}
    assert session.fill_placeholders("".join(later)).count("fc-card") == 2


def test_a_re_serialised_placeholder_is_still_found(session: FormulaSession) -> None:
    block = block_of(session)
    future: Future[CheckResult] = Future()
    future.set_result(failed(block))
    ours = session.placeholder(future, block, None)
    token = ours.split('data-fc-token="')[1].split('"')[0]
    rewritten = f'<div data-search-exclude="" data-fc-token=\'{token}\' class="fc-pending">\n</div>'
    assert "fc-card" in session.fill_placeholders(rewritten)


def test_a_superseded_build_lets_its_checks_finish_within_the_grace(
    session: FormulaSession,
) -> None:
    """An edit came in (prose, say): a check about to end still ends, and its result is
    used; one that would not end is stopped once the grace is over."""
    block = block_of(session)
    session.superseded = lambda: True
    soon: Future[CheckResult] = Future()
    threading.Timer(SUPERSEDED_GRACE / 4, soon.set_result, [failed(block)]).start()
    assert session._awaited(soon).status is Status.ERROR
    assert not session._batch_stop.is_set(), "nothing was stopped: the check ended in time"

    never: Future[CheckResult] = Future()
    stopped = CheckResult(block.block_id, block.location, "softmax", Status.SKIPPED)

    def answer_once_stopped() -> None:  # what a stopped batch does to its futures
        session._batch_stop.wait()
        never.set_result(stopped)

    threading.Thread(target=answer_once_stopped, daemon=True).start()
    assert session._awaited(never) is stopped
    assert session._batch_stop.is_set()
