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
    WIDTHS,
    chromium,
    open_page,
    serve,
    set_scheme,
    unmarked_scroll_boxes,
)
from fakes import FakeMaker, build_with_fake_engine
from formula_check.model import CheckSpec, Status
from formula_check.render.card import READABLE_PX
from formula_check.render.picture import SMALLEST_TEXT
from formula_check.results import CheckResult, FormulaVerdict, Verdict

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


def reading_problems(page: Any, name: str, *, scroll_marks: bool) -> list[str]:
    """What a reader of this page, as it is drawn now, cannot read, each naming ``name``."""
    widths = page.evaluate(MATH_WIDTHS)
    squeezed = [w for w in widths if w["drawn"] < max(2.0, w["natural"] - 1.0)]
    contrast = page.evaluate(CODE_CONTRAST)
    said = [
        *(["no display formula"] if not widths else []),
        *([f"formulas drawn smaller than their content: {squeezed}"] if squeezed else []),
        *[
            f"cut mid-word: {word}"
            for word in page.evaluate(BROKEN_WORDS, ".fc-card td, .fc-card th")
        ],
        *([f"a code chip's contrast is {contrast:.2f} < 4.5"] if contrast < 4.5 else []),
        *page.evaluate(LAYOUT_PROBLEMS, [SMALLEST_TEXT, READABLE_PX]),
        *(unmarked_scroll_boxes(page) if scroll_marks else []),
    ]
    return [f"{name}: {problem}" for problem in said]


def test_our_docs_read_well_at_every_width(docs: str, browser: Any) -> None:
    """Each page loaded once per width and read in the light palette, then in the slate one
    (switched in place, as a reader does); every problem of every width and palette said at
    once."""
    problems = []
    for width in WIDTHS:
        context = browser.new_context(viewport={"width": width, "height": 900})
        for path in PAGES:
            where = f"{path or 'index'} at {width} px"
            page, log = open_page(context, docs + path)
            scroll_marks = path == "guide/attention/"  # the widest formulas; shots take time
            for scheme in ("default", "slate"):
                set_scheme(page, scheme)
                problems += reading_problems(page, f"{where}, {scheme}", scroll_marks=scroll_marks)
            log.assert_clean(where)
            page.close()
        context.close()
    assert problems == [], "\n".join(problems)
