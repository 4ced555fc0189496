"""Built sites in a real Chromium: the report page people open, and a site with its own MathJax.

Both sites are Material sites built in this process on a fake engine (``fakes.FakeMaker``):
no TensorFlow, and each block's outcome is chosen here. Served from loopback; every request
that leaves it is aborted and fails the test. Screenshots land in ``test-artifacts/sites/``.
"""

from __future__ import annotations

import logging
import re
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urljoin, urlsplit

import pytest
import yaml

from browser_support import (
    BROKEN_WORDS,
    CHROMIUM,
    PALETTE_TOGGLE,
    WIDTHS,
    chromium,
    open_page,
    serve,
    set_scheme,
    watch,
)
from fakes import FakeMaker, build_with_fake_engine, by_id, mismatch, verified
from formula_check.model import CheckSpec, Status
from formula_check.project import assets
from formula_check.results import CheckResult, SnippetFailure

pytestmark = pytest.mark.browser
pytest.importorskip("playwright.sync_api", reason="playwright is not installed")
if CHROMIUM is None:
    pytest.skip("no chromium on PATH (apt-get install chromium)", allow_module_level=True)

ROOT = Path(__file__).resolve().parent.parent
ARTIFACTS = ROOT / "test-artifacts" / "sites"

BLOCK = """\
```formula id="{name}" oracle="softmax" timing="off"{extra}
\\mathrm{{softmax}}(x)_i = \\frac{{e^{{x_i}}}}{{\\sum_j e^{{x_j}}}}
```

```python
import tensorflow as tf


def softmax(x):
    return tf.nn.softmax(x, axis=-1)
```
"""
LONG_PAGE = "guide/scaled-dot-product-attention-with-a-causal-mask.md"
PAGES = {
    "index.md": ["softmax-rows", "softmax-drift"],
    LONG_PAGE: [
        "scaled-dot-product-attention-causal-mask-float32",
        "positional-encoding-sinusoidal-broken",
        "sdpa-later",
    ],
    "notes.md": ["skipped-on-purpose"],
}
# Not as their author said (a skip too, as the JSON report's "failed" counts it), in that order.
FAILING = ["softmax-drift", "positional-encoding-sinusoidal-broken", "skipped-on-purpose"]
# TensorFlow's style: long, a node tag, shapes and a path with no space to break at.
LONG_ERROR = (
    "{{function_node __wrapped__MatMul_device_/job:localhost/replica:0/task:0/device:CPU:0}} "
    "Matrix size-incompatible: In[0]: [2,8,64,64], In[1]: [2,8,32,64] [Op:BatchMatMulV2] "
    "raised in /usr/lib/python3/dist-packages/keras/src/layers/core/einsum_dense.py while "
    "computing the attention logits for the second head of the first layer of the encoder"
    "\nCall arguments received by layer 'attention':\n  • query=tf.Tensor(shape=(2, 8, 64))"
)
# Material's documented recipe for MathJax (docs/reference/math.md), word for word.
MATERIAL_MATHJAX = """\
window.MathJax = {
  tex: {
    inlineMath: [["\\\\(", "\\\\)"]],
    displayMath: [["\\\\[", "\\\\]"]],
    processEscapes: true,
    processEnvironments: true
  },
  options: {
    ignoreHtmlClass: ".*|",
    processHtmlClass: "arithmatex"
  }
};

document$.subscribe(() => {
  MathJax.startup.output.clearCache()
  MathJax.typesetClear()
  MathJax.texReset()
  MathJax.typesetPromise()
})
"""


def _error(spec: CheckSpec) -> CheckResult:
    return CheckResult(
        spec.block_id,
        spec.location,
        spec.oracle,
        Status.ERROR,
        failure=SnippetFailure("InvalidArgumentError", LONG_ERROR),
    )


ANSWERS = by_id({"softmax-drift": mismatch, "positional-encoding-sinusoidal-broken": _error})


def _site(project: Path, pages: dict[str, list[str]], **config: Any) -> Path:
    settings = {
        "site_name": "report fixture",
        "theme": {"name": "material", "font": False, "palette": PALETTE_TOGGLE},
        "plugins": ["formula-check"],
        "markdown_extensions": [{"pymdownx.arithmatex": {"generic": True}}],
        **config,
    }
    (project / "mkdocs.yml").write_text(yaml.safe_dump(settings), encoding="utf-8")
    for name, blocks in pages.items():
        path = project / "docs" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        text = f"# {Path(name).stem}\n\n"
        for block in blocks:
            extra = ' skip="no GPU here"' if block.startswith("skipped") else ""
            text += BLOCK.format(name=block, extra=extra) + "\n"
        path.write_text(text, encoding="utf-8")
    return project / "site"


@pytest.fixture(scope="module")
def report_site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, str]]:
    """A site with passes, a drift, a long error and a skip; yields its folder and URL."""
    site = _site(tmp_path_factory.mktemp("report"), PAGES)
    build_with_fake_engine(site.parent, FakeMaker(ANSWERS))
    with serve(site) as url:
        yield site, url


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    with chromium() as launched:
        yield launched


@pytest.fixture(scope="module")
def artifacts() -> Path:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    return ARTIFACTS


def _open_report(browser: Any, url: str, width: int) -> tuple[Any, Any, Any]:
    context = browser.new_context(viewport={"width": width, "height": 900})
    page = context.new_page()
    log = watch(page)
    page.goto(url + "formula-check-report/", wait_until="load")
    page.wait_for_selector("[data-fc-report][data-fc-ready]", state="attached")
    return context, page, log


def _visible_ids(page: Any) -> list[str]:
    return page.evaluate(
        """() => [...document.querySelectorAll('.fc-report-table tbody tr')]
          .filter((row) => !row.hidden).map((row) => row.cells[1].textContent.trim())"""
    )


def _shown(page: Any) -> str:
    return page.locator("[data-fc-count]").inner_text().strip()


# The luminance of the status cell's text and of the background it is drawn on.
STATUS_COLOURS = """() => {
  const cell = document.querySelector('.fc-report-table tbody td:nth-child(3)');
  const lum = (css) => {
    const [r, g, b] = css.match(/[\\d.]+/g).map(Number);
    return (0.2126 * r + 0.7152 * g + 0.0722 * b) / 255;
  };
  let bg = 'rgba(0, 0, 0, 0)';
  for (let el = cell; el && /rgba\\(.*, 0\\)$/.test(bg); el = el.parentElement) {
    bg = getComputedStyle(el).backgroundColor;
  }
  return {text: lum(getComputedStyle(cell).color), background: lum(bg)};
}"""


def report_problems(page: Any, name: str) -> list[str]:
    """What a reader of the report, as it is drawn now, cannot read, each naming ``name``."""
    selector = ".fc-report-page td, .fc-report-page th, .fc-report-controls, .fc-summary"
    overflow = page.evaluate(
        "() => document.documentElement.scrollWidth - document.documentElement.clientWidth"
    )
    colours = page.evaluate(STATUS_COLOURS)
    said = [
        *[f"cut mid-token: {word}" for word in page.evaluate(BROKEN_WORDS, selector)],
        *([f"the page scrolls sideways by {overflow} px"] if overflow > 0 else []),
        *(
            [f"low contrast {colours}"]
            if abs(colours["text"] - colours["background"]) <= 0.5
            else []
        ),
    ]
    return [f"{name}: {problem}" for problem in said]


def test_report_page_keeps_its_words_whole_and_fits_every_width(
    browser: Any, report_site: tuple[Path, str], artifacts: Path
) -> None:
    """The report at each width, its first full message open, in the light palette and then
    the slate one (switched in place); every problem of every width and palette said at once."""
    problems = []
    for width in WIDTHS:
        context, page, log = _open_report(browser, report_site[1], width)
        page.locator("details.fc-report-more summary").first.click()  # the full message, open
        for scheme in ("default", "slate"):
            set_scheme(page, scheme)
            problems += report_problems(page, f"report at {width} px, {scheme}")
            page.screenshot(path=artifacts / f"report-{width}-{scheme}.png", full_page=True)
        log.assert_clean(f"report at {width} px")
        context.close()
    assert problems == [], "\n".join(problems)


def test_report_lists_failures_first_and_filters_searches_and_sorts(
    browser: Any, report_site: tuple[Path, str], artifacts: Path
) -> None:
    context, page, log = _open_report(browser, report_site[1], 1280)
    every = [block for blocks in PAGES.values() for block in blocks]
    assert _visible_ids(page)[:3] == FAILING
    assert sorted(_visible_ids(page)) == sorted(every)
    assert page.locator(".fc-summary").inner_text().startswith("6 blocks: ")
    assert _shown(page) == "6 of 6 blocks shown"

    page.select_option("[data-fc-filter]", "failing")
    assert _visible_ids(page) == FAILING and _shown(page) == "3 of 6 blocks shown"
    page.select_option("[data-fc-filter]", "skipped")
    assert _visible_ids(page) == ["skipped-on-purpose"]
    page.select_option("[data-fc-filter]", "")

    page.fill("[data-fc-search]", "causal")  # the long page's path
    assert sorted(_visible_ids(page)) == sorted(PAGES[LONG_PAGE])
    page.fill("[data-fc-search]", "SDPA later")  # every word, any case
    assert _visible_ids(page) == ["sdpa-later"]
    page.fill("[data-fc-search]", "no such block")
    assert _visible_ids(page) == [] and page.locator("[data-fc-empty]").is_visible()
    page.fill("[data-fc-search]", "")
    assert page.locator("[data-fc-empty]").is_hidden()

    page.locator("th[data-fc-column=block] button").click()
    assert _visible_ids(page) == sorted(every)
    assert page.locator("th[data-fc-column=block]").get_attribute("aria-sort") == "ascending"
    page.locator("th[data-fc-column=block] button").click()
    assert _visible_ids(page) == sorted(every, reverse=True)
    page.locator("th[data-fc-column=status] button").click()
    assert _visible_ids(page)[:3] == FAILING

    # The table where it fits, cards where it does not (sidebars hidden: a wide page).
    page.add_style_tag(content=".md-sidebar { display: none } .md-grid { max-width: none }")
    page.set_viewport_size({"width": 2400, "height": 900})
    page.wait_for_function("() => !document.querySelector('.fc-report-cards')")
    assert (
        page.locator(".fc-report-table tbody tr").first.evaluate(
            "(row) => getComputedStyle(row).display"
        )
        == "table-row"
    )
    page.screenshot(path=artifacts / "report-2400-table.png")
    page.set_viewport_size({"width": 1280, "height": 900})
    page.wait_for_function("() => document.querySelector('.fc-report-cards')")

    more = page.locator("details.fc-report-more").first
    assert not more.locator("pre").is_visible()
    more.locator("summary").click()
    assert "Call arguments received" in more.locator("pre").inner_text()
    page.screenshot(path=artifacts / "report-1280-message-open.png", full_page=True)
    log.assert_clean("report")
    context.close()


def test_report_links_reach_every_card(
    browser: Any, report_site: tuple[Path, str], artifacts: Path
) -> None:
    site, url = report_site
    context, page, log = _open_report(browser, url, 390)
    report_url = url + "formula-check-report/"
    links = page.evaluate(
        """() => [...document.querySelectorAll('.fc-report-table tbody tr')].map((row) =>
          [...row.querySelectorAll('a')].map((a) => a.getAttribute('href')))"""
    )
    assert len(links) == 6
    for hrefs in links:
        assert len(hrefs) == 2 and hrefs[0] == hrefs[1], hrefs  # block id and page:line
        target = urlsplit(urljoin(report_url, hrefs[0]))
        html_file = site / target.path.removeprefix("/") / "index.html"
        assert f'id="{target.fragment}"' in html_file.read_text(encoding="utf-8"), hrefs[0]
    page.locator("a", has_text="sdpa-later").click()
    page.wait_for_url(re.compile(r"#fc-sdpa-later$"))
    card = page.locator("#fc-sdpa-later")
    assert card.is_visible() and card.evaluate(
        "(card) => { const box = card.getBoundingClientRect();"
        " return box.top >= 0 && box.top < window.innerHeight; }"
    ), "the card is scrolled into view"
    page.screenshot(path=artifacts / "card-from-report-390.png")
    log.assert_clean("report link")
    context.close()


# -- a site with its own MathJax -----------------------------------------------------------


def _own_mathjax(docs: Path) -> list[str]:
    """Material's recipe with a local MathJax 3 (CHTML, fonts included) from the same package
    the plugin ships; returns the ``extra_javascript`` entries."""
    source = assets.mathjax_root()
    target = docs / "javascripts" / "mathjax"
    shutil.copytree(
        source, target, ignore=shutil.ignore_patterns("sre", "*-full*.js", "*-svg.js", "node-*")
    )
    (docs / "javascripts" / "mathjax.js").write_text(MATERIAL_MATHJAX, encoding="utf-8")
    return ["javascripts/mathjax.js", "javascripts/mathjax/tex-mml-chtml.js"]


def test_a_site_with_its_own_mathjax_keeps_it_and_our_formulas_render_with_it(
    browser: Any,
    tmp_path: Path,
    artifacts: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    project = tmp_path / "own-mathjax"
    (project / "docs").mkdir(parents=True)
    scripts = _own_mathjax(project / "docs")
    site = _site(project, {"index.md": ["first", "second"]}, extra_javascript=scripts)
    with (project / "docs" / "index.md").open("a", encoding="utf-8") as page_text:
        page_text.write("\nThe site's own formula:\n\n$$\nE = mc^2\n$$\n")
    with caplog.at_level(logging.INFO):
        build_with_fake_engine(project, FakeMaker(verified), strict=True)
    said = [r.getMessage() for r in caplog.records if "own MathJax" in r.getMessage()]
    assert said == [
        "formula-check: the site loads its own MathJax (extra_javascript: "
        "javascripts/mathjax.js); it typesets the cards' formulas and the plugin's offline "
        "copy is left out"
    ]
    html = (site / "index.html").read_text(encoding="utf-8")
    assert "assets/formula-check/mathjax" not in html
    assert not (site / "assets" / "formula-check" / "mathjax").exists()
    assert 'src="assets/formula-check/formula-check-report.js"' in html

    with serve(site) as url:
        context = browser.new_context(viewport={"width": 1280, "height": 900})
        page, log = open_page(context, url)
        page.wait_for_function(
            "() => [...document.querySelectorAll('.arithmatex')]"
            ".every((block) => block.querySelector('mjx-container'))"
        )
        page.evaluate("() => document.fonts.ready")
        loaded = page.evaluate(
            """() => ({
              scripts: [...document.scripts].map((s) => s.src).filter((src) => /tex-|mathjax/i.test(src)),
              version: MathJax.version,
              blocks: [...document.querySelectorAll('.arithmatex')].map((block) => {
                const box = block.querySelector('mjx-container').getBoundingClientRect();
                return {
                  card: (block.nextElementSibling || block).classList.contains('fc-card'),
                  jax: block.querySelector('mjx-container').getAttribute('jax'),
                  glyphs: block.querySelectorAll('mjx-c').length,
                  size: [box.width, box.height],
                };
              }),
              fonts: [...document.fonts].filter((f) => f.family.startsWith('MJXTEX'))
                .map((f) => f.status),
            })"""
        )
        page.screenshot(path=artifacts / "own-mathjax.png", full_page=True)
        log.assert_clean("own MathJax")
        context.close()
    assert [src.rsplit("/", 2)[-2:] for src in loaded["scripts"]] == [
        ["javascripts", "mathjax.js"],
        ["mathjax", "tex-mml-chtml.js"],
    ], "exactly one MathJax, the site's"
    assert loaded["version"].startswith("3.")
    blocks = loaded["blocks"]
    assert [block["card"] for block in blocks] == [True, True, False], "ours, then theirs"
    undrawn = [b for b in blocks if b["jax"] != "CHTML" or not b["glyphs"] or min(b["size"]) <= 0]
    assert undrawn == [], f"formulas the site's MathJax did not draw: {undrawn}"
    assert "loaded" in loaded["fonts"], f"MathJax's fonts never loaded: {loaded['fonts']}"
