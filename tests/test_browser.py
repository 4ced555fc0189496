"""The built good site in a real Chromium: math drawn, cards visible, figures loaded, nothing external.

One ``mkdocs build --strict`` of ``fixtures/sites/good`` (with Material's light/slate toggle added
to the copy's config), served from loopback, and one headless browser for every page. Counting
``mjx-container`` elements is not enough (MathJax can leave them with blank glyphs when its fonts
never load), so each formula's SVG must reference real glyph outlines and have a drawn size.

Screenshots land in ``test-artifacts/browser/``; with ``FORMULA_CHECK_UPDATE_SCREENSHOT=1`` the
first verified card is also written to ``docs/assets/verified-card.png`` for the README.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from browser_support import (
    CHROMIUM,
    CODE_CONTRAST,
    LAYOUT_PROBLEMS,
    MATH_WIDTHS,
    PALETTE_TOGGLE,
    WIDTHS,
    PageLog,
    chromium,
    open_page,
    png_pixel,
    serve,
    set_scheme,
    unmarked_scroll_boxes,
)
from formula_check.render.card import READABLE_PX
from formula_check.render.picture import SMALLEST_TEXT
from sites import built_once
from support import mkdocs_build

ROOT = Path(__file__).resolve().parent.parent
GOOD_SITE = ROOT / "fixtures" / "sites" / "good"
ARTIFACTS = ROOT / "test-artifacts" / "browser"
README_SCREENSHOT = ROOT / "docs" / "assets" / "verified-card.png"
# Every page is served from one real `mkdocs build` of the good site: its blocks run in TensorFlow.
pytestmark = [pytest.mark.browser, pytest.mark.site, pytest.mark.tf]
sync_api = pytest.importorskip(
    "playwright.sync_api", reason="playwright is not installed (pip install playwright)"
)
if CHROMIUM is None:
    pytest.skip("no chromium on PATH (apt-get install chromium)", allow_module_level=True)

# One record per `.arithmatex` element: is there a container, and did its SVG draw glyphs?
MATH_PROBE = """() => [...document.querySelectorAll('.arithmatex')].map((block, index) => {
  const svg = block.querySelector('mjx-container svg');
  const drawn = svg ? [...svg.querySelectorAll('path, use')].filter((node) => {
    if (node.tagName === 'path') return (node.getAttribute('d') || '').trim() !== '';
    const ref = node.getAttribute('href') || node.getAttribute('xlink:href') || '';
    const target = ref.startsWith('#') ? document.getElementById(ref.slice(1)) : null;
    return target !== null && target.tagName === 'path' && (target.getAttribute('d') || '').trim() !== '';
  }).length : 0;
  const box = svg ? svg.getBoundingClientRect() : {width: 0, height: 0};
  const ink = svg ? svg.getBBox() : {width: 0, height: 0};
  return {
    index,
    tex: block.textContent.trim().slice(0, 60),
    containers: block.querySelectorAll('mjx-container').length,
    glyphs: drawn,
    box: [box.width, box.height],
    ink: [ink.width, ink.height],
  };
})"""

# Opens every card section (figures sit in collapsed <details>) and waits for each figure to load.
LOAD_CARD_FIGURES = """async () => {
  document.querySelectorAll('.fc-card details').forEach((section) => { section.open = true; });
  const images = [...document.querySelectorAll('.fc-card img')];
  for (const image of images) {
    image.scrollIntoView();
    await image.decode().catch(() => {});
  }
  window.scrollTo(0, 0);
  return images.map((image) => ({
    src: image.getAttribute('src'),
    complete: image.complete,
    naturalWidth: image.naturalWidth,
  }));
}"""

# Card table headers whose text sits on more lines than it has words: a word was cut in two.
BROKEN_HEADERS = """() => [...document.querySelectorAll('.fc-card th')].flatMap((header) => {
  const range = document.createRange();
  range.selectNodeContents(header);
  const lines = new Set([...range.getClientRects()].map((rect) => Math.round(rect.top))).size;
  const words = header.textContent.trim().split(/\\s+/).length;
  return lines > words ? [`${header.textContent.trim()} (${lines} lines)`] : [];
})"""


# Words of card table cells drawn on more than one line: cut mid-word ("outpu/t").
BROKEN_CELLS = """() => [...document.querySelectorAll('.fc-card td')].flatMap((cell) => {
  const walker = document.createTreeWalker(cell, NodeFilter.SHOW_TEXT);
  const broken = [];
  for (let node = walker.nextNode(); node; node = walker.nextNode()) {
    const words = node.data.split(/(\\s+)/);
    let offset = 0;
    for (const word of words) {
      if (word.trim()) {
        const range = document.createRange();
        range.setStart(node, offset);
        range.setEnd(node, offset + word.length);
        const lines = new Set([...range.getClientRects()].map((rect) => Math.round(rect.top)));
        if (lines.size > 1) broken.push(`${word} (${lines.size} lines)`);
      }
      offset += word.length;
    }
  }
  return broken;
})"""


def build_good_site(project: Path) -> None:
    """A strict build of the good fixture site, its copy given Material's palette toggle."""
    ignore = shutil.ignore_patterns("site", ".cache")
    shutil.copytree(GOOD_SITE, project, ignore=ignore, dirs_exist_ok=True)
    config_path = project / "mkdocs.yml"
    config = yaml.safe_load(config_path.read_text(encoding="utf-8"))
    config["theme"]["palette"] = PALETTE_TOGGLE
    config_path.write_text(yaml.safe_dump(config, allow_unicode=True), encoding="utf-8")
    build = mkdocs_build(project, strict=True)
    assert build.returncode == 0, build.stdout + build.stderr


@pytest.fixture(scope="module")
def built_site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The good site, built once for the whole run (:func:`sites.built_once`)."""
    return built_once(tmp_path_factory, "browser-good", build_good_site) / "site"


@pytest.fixture(scope="module")
def server(built_site: Path) -> Iterator[str]:
    """The site served on a free loopback port; yields its base URL."""
    with serve(built_site) as url:
        yield url


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """One headless Chromium (the distribution's, with a fresh profile) for every page."""
    with chromium() as launched:
        yield launched


@pytest.fixture(scope="module")
def artifacts() -> Path:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    return ARTIFACTS


def card_pages(site: Path) -> list[str]:
    """Site-relative URLs of the pages that carry at least one formula card."""
    pages = sorted(site.rglob("index.html"))
    return [
        page.parent.relative_to(site).as_posix() + "/" if page.parent != site else ""
        for page in pages
        if "fc-card" in page.read_text(encoding="utf-8")
    ]


def assert_math_drawn(page: Any, name: str) -> None:
    blocks = page.evaluate(MATH_PROBE)
    assert blocks, f"{name}: no .arithmatex blocks"
    undrawn = [
        block
        for block in blocks
        if block["containers"] != 1
        or block["glyphs"] == 0
        or min(block["box"]) <= 0
        or min(block["ink"]) <= 0
    ]
    assert undrawn == [], f"{name}: formulas without drawn glyphs: {undrawn}"
    assert page.locator("merror, mjx-merror").count() == 0, f"{name}: MathJax reported an error"


def assert_cards_visible(page: Any, name: str) -> int:
    cards = page.locator(".fc-card")
    assert cards.count() > 0, f"{name}: no formula cards"
    for index in range(cards.count()):
        card = cards.nth(index)
        box = card.bounding_box()
        assert card.is_visible(), f"{name}: card {index} is hidden"
        assert box is not None and box["width"] > 0 and box["height"] > 0, f"{name}: card {index}"
    return page.locator(".fc-card.fc-status-verified .fc-badge", has_text="verified").count()


def assert_figures_loaded(page: Any, name: str) -> None:
    figures = page.evaluate(LOAD_CARD_FIGURES)
    broken = [image for image in figures if not (image["complete"] and image["naturalWidth"] > 0)]
    assert broken == [], f"{name}: figures that did not load: {broken}"


def assert_headers_unbroken(page: Any, name: str) -> None:
    broken = page.evaluate(BROKEN_HEADERS)
    assert broken == [], f"{name}: card table headers broken mid-word: {broken}"


def assert_nothing_external_or_failed(log: PageLog, name: str) -> None:
    assert log.requests, f"{name}: no requests recorded"
    assert log.external == [], f"{name}: requests left loopback: {log.external}"
    assert log.failed == [], f"{name}: failed responses: {log.failed}"
    assert log.errors == [], f"{name}: console errors: {log.errors}"


def save_card_screenshots(browser: Any, url: str, artifacts: Path) -> None:
    """The first verified card, light and slate, at 2x; the light one also feeds the README."""
    context = browser.new_context(viewport={"width": 1280, "height": 900}, device_scale_factor=2)
    page, log = open_page(context, url)
    card = page.locator(".fc-card.fc-status-verified").first
    card.screenshot(path=artifacts / "verified-card.png", animations="disabled")
    if os.environ.get("FORMULA_CHECK_UPDATE_SCREENSHOT") == "1":
        README_SCREENSHOT.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(artifacts / "verified-card.png", README_SCREENSHOT)

    page.locator("form[data-md-component=palette] label:visible").click()
    page.wait_for_function("() => document.body.dataset.mdColorScheme === 'slate'")
    assert_figures_loaded(page, "slate")
    page.screenshot(path=artifacts / "slate.png", full_page=True, animations="disabled")
    card.screenshot(path=artifacts / "verified-card-slate.png", animations="disabled")
    assert_nothing_external_or_failed(log, "slate")
    context.close()


def test_pages_render_math_cards_and_figures_offline(
    browser: Any, server: str, built_site: Path, artifacts: Path
) -> None:
    pages = card_pages(built_site)
    assert len(pages) >= 2, pages
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    verified = 0
    for page_url in pages:
        name = page_url or "index"
        page, log = open_page(context, server + page_url)
        assert_math_drawn(page, name)
        verified += assert_cards_visible(page, name)
        assert_figures_loaded(page, name)
        assert_headers_unbroken(page, name)
        page.screenshot(
            path=artifacts / f"{name.strip('/')}.png", full_page=True, animations="disabled"
        )
        assert_nothing_external_or_failed(log, name)
        page.close()
    assert verified > 0, "no card shows the verified status"
    context.close()
    save_card_screenshots(browser, server + pages[0], artifacts)


@pytest.mark.parametrize("scheme", ["default", "slate"])
def test_code_chips_stay_readable_when_the_system_is_dark(
    browser: Any, server: str, built_site: Path, scheme: str
) -> None:
    """A page that stays light on a dark system keeps light cards with dark code, and a dark
    palette gets light code on dark chips: never dark on dark."""
    context = browser.new_context(viewport={"width": 1280, "height": 900}, color_scheme="dark")
    page, log = open_page(context, server + card_pages(built_site)[0])
    set_scheme(page, scheme)
    assert page.evaluate(CODE_CONTRAST) >= 4.5
    assert_nothing_external_or_failed(log, f"code chips, {scheme}")
    context.close()


def test_figures_sit_in_a_dark_page(browser: Any, server: str, built_site: Path) -> None:
    """On the slate palette a figure's background is dark, not a glaring white panel; on the
    light one it stays white."""
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    page, log = open_page(context, server + card_pages(built_site)[0])
    page.evaluate(LOAD_CARD_FIGURES)
    figure = page.locator(".fc-card .fc-figure img").first
    light = png_pixel(page, figure.screenshot(), 6, 6)
    set_scheme(page, "slate")
    dark = png_pixel(page, figure.screenshot(), 6, 6)
    assert min(light) > 230, light
    assert max(dark) < 60, dark
    assert_nothing_external_or_failed(log, "figures")
    context.close()


def layout_problems(page: Any, name: str) -> list[str]:
    """What a reader of this page, as it is drawn now, cannot read, each naming ``name``."""
    widths = page.evaluate(MATH_WIDTHS)
    squeezed = [w for w in widths if w["drawn"] < max(2.0, w["natural"] - 1.0)]
    said = [
        *(["no display formula"] if not widths else []),
        *([f"formulas drawn smaller than their content: {squeezed}"] if squeezed else []),
        *[f"card cell cut mid-word: {word}" for word in page.evaluate(BROKEN_CELLS)],
        *[f"card header cut mid-word: {header}" for header in page.evaluate(BROKEN_HEADERS)],
        *page.evaluate(LAYOUT_PROBLEMS, [SMALLEST_TEXT, READABLE_PX]),
        *unmarked_scroll_boxes(page),
    ]
    return [f"{name}: {problem}" for problem in said]


def test_math_keeps_its_size_and_cells_their_words_at_every_width(
    browser: Any, server: str, built_site: Path, artifacts: Path
) -> None:
    """Every card page at each width, its sections open, in the light palette and then the
    slate one (switched in place, as a reader does): every problem found, of every width and
    palette, said at once."""
    problems = []
    for width in WIDTHS:
        context = browser.new_context(viewport={"width": width, "height": 900})
        for page_url in card_pages(built_site):
            where = f"{page_url.strip('/') or 'index'} at {width} px"
            page, log = open_page(context, server + page_url)
            assert_figures_loaded(page, where)  # opens every section: its tables and figures too
            for scheme in ("default", "slate"):
                set_scheme(page, scheme)
                if page_url == "":
                    page.screenshot(path=artifacts / f"index-{width}-{scheme}.png", full_page=True)
                problems += layout_problems(page, f"{where}, {scheme}")
            assert_nothing_external_or_failed(log, where)
            page.close()
        context.close()
    assert problems == [], "\n".join(problems)
