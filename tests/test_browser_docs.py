"""Our own docs in a real Chromium, at a phone's, a split screen's and a desktop's width, in
the light and the slate palettes: every display formula drawn at its natural size, no word of
a card cut in two, every code chip readable.

The site is built in this process from the repository's ``mkdocs.yml``, its checks answered
by a fake engine (the layout is under test here; the checks are the docs build's job), into a
temporary folder, and served from loopback.
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
    MATH_WIDTHS,
    MATHJAX_DONE,
    WIDTHS,
    chromium,
    serve,
    set_scheme,
    watch,
)
from fakes import FakeMaker, build_with_fake_engine, verified

pytest.importorskip("playwright.sync_api", reason="playwright is not installed")
if CHROMIUM is None:
    pytest.skip("no chromium on PATH (apt-get install chromium)", allow_module_level=True)

ROOT = Path(__file__).resolve().parent.parent
PAGES = ("", "guide/attention/", "zh/guide/attention/", "authoring/", "verdicts/")
"""Pages with the most formulas and cards, in both languages."""


@pytest.fixture(scope="module")
def docs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    site = tmp_path_factory.mktemp("docs") / "site"
    build_with_fake_engine(ROOT, FakeMaker(verified), site_dir=site)
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
        log.assert_clean(name)
        page.close()
    context.close()
