"""Our own docs in a real Chromium, at a phone's, a split screen's and a desktop's width, in
the light and the slate palettes: every display formula drawn at its natural size, no word of
a card cut in two, every code chip readable, every column of every verdict table in its box,
every box that scrolls sideways marked as scrolling, nothing sticking out of a card.

The site is built in this process from the repository's ``mkdocs.yml``, its checks answered
by a fake engine (the layout is under test here; the checks are the docs build's job) with
cards as full as real ones (two outputs, derived tolerances, a regime, a formula not checked,
long notes), into a temporary folder, and served from loopback.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from browser_support import (
    BROKEN_WORDS,
    CHROMIUM,
    CODE_CONTRAST,
    LAYOUT_PROBLEMS,
    MATH_WIDTHS,
    MATHJAX_DONE,
    WIDTHS,
    chromium,
    serve,
    set_scheme,
    unmarked_scroll_boxes,
    watch,
)
from fakes import FakeMaker, build_with_fake_engine
from formula_check.model import CheckResult, CheckSpec, FormulaVerdict, Status, Verdict
from formula_check.render.card import READABLE_PX
from formula_check.render.picture import SMALLEST_TEXT

pytestmark = pytest.mark.browser
pytest.importorskip("playwright.sync_api", reason="playwright is not installed")
if CHROMIUM is None:
    pytest.skip("no chromium on PATH (apt-get install chromium)", allow_module_level=True)

ROOT = Path(__file__).resolve().parent.parent
PAGES = ("", "guide/attention/", "zh/guide/attention/", "authoring/", "verdicts/")
"""Pages with the most formulas and cards, in both languages."""


DERIVED = "derived: 64 × float32 rounding (spread of 8 draws, 3 runs) + float32 ulp"


def _verdict(name: str, regime: str = "") -> Verdict:
    shape = (2, 5, 24)
    return Verdict(
        name, True, ("b", "n", "d_model"), shape, shape, 3.1e-7, 2e-7, n_total=240,
        atol=4.4e-6, rtol=1e-5, used=0.23, tolerance=DERIVED, regime=regime,
    )  # fmt: skip


def full_card(spec: CheckSpec) -> CheckResult:
    """A verified result with what makes a real card wide: two outputs and a regime, derived
    tolerances with a relative part, a formula that could not be checked, long notes."""
    message = (
        "the formula uses \\operatorname{LayerNormalisationWithAVeryLongNameIndeed}, which "
        "the compiler does not know; name it in symbols= or give formula=skip"
    )
    return CheckResult(
        spec.block_id,
        spec.location,
        spec.oracle,
        Status.VERIFIED,
        expect=spec.expect,
        verdicts=(
            _verdict("output"),
            _verdict("attention_weights"),
            _verdict("attention_weights", "large logits (×30, the softmax saturates)"),
        ),
        formula=FormulaVerdict("not_executable", message=message),
        notes=(
            "also checked on other inputs: large_logits (logits scaled ×30 so that the softmax "
            "saturates and a missing max-subtraction overflows float32)",
            f"tolerance of output, attention_weights: {DERIVED}",
        ),
    )


@pytest.fixture(scope="module")
def docs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    site = tmp_path_factory.mktemp("docs") / "site"
    build_with_fake_engine(ROOT, FakeMaker(full_card), site_dir=site)
    with serve(site) as url:
        yield url


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    with chromium() as launched:
        yield launched


@pytest.mark.parametrize("scheme", ["default", "slate"])
@pytest.mark.parametrize("width", WIDTHS)
def test_our_docs_read_well_at_every_width(
    docs: str, browser: Any, width: int, scheme: str
) -> None:
    context = browser.new_context(viewport={"width": width, "height": 900})
    for path in PAGES:
        name = f"{path or 'index'} at {width} px, {scheme}"
        page = context.new_page()
        log = watch(page)
        page.goto(docs + path, wait_until="load")
        set_scheme(page, scheme)
        page.wait_for_function("() => window.MathJax && MathJax.startup && MathJax.startup.promise")
        page.evaluate(MATHJAX_DONE)
        widths = page.evaluate(MATH_WIDTHS)
        assert widths, f"{name}: no display formula"
        squeezed = [w for w in widths if w["drawn"] < max(2.0, w["natural"] - 1.0)]
        assert squeezed == [], f"{name}: formulas drawn smaller than their content: {squeezed}"
        assert page.evaluate(BROKEN_WORDS, ".fc-card td, .fc-card th") == [], name
        assert page.evaluate(CODE_CONTRAST) >= 4.5, name
        problems = page.evaluate(LAYOUT_PROBLEMS, [SMALLEST_TEXT, READABLE_PX])
        assert problems == [], f"{name}: {problems}"
        if path == "guide/attention/":  # the page with the widest formulas; shots take time
            assert unmarked_scroll_boxes(page) == [], name
        log.assert_clean(name)
        page.close()
    context.close()
