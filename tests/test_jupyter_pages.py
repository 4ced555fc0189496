"""Notebook pages of a site rendered by mkdocs-jupyter: cards by cell, logs and the report.

mkdocs-jupyter renders each ``.ipynb`` with nbconvert, so the plugin reads its blocks from the
file and places the cards into that HTML by cell id. The builds here are real ``mkdocs build``
runs of ``fixtures/sites/jupyter-pages`` in ``tmp_path``, answered by the fake engine (``tf``:
by TensorFlow).
"""

from __future__ import annotations

import json
import logging
import re
import shutil
from pathlib import Path

import nbformat
import pytest
from mkdocs.commands.build import build
from mkdocs.config import load_config
from mkdocs.exceptions import Abort
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook, new_output

from fakes import FakeMaker, build_with_fake_engine, drift_on_axis_1, mismatch
from formula_check.faces.mkdocs_plugin.jupyter_pages import NotebookPage, place_cards
from formula_check.model import Location
from formula_check.pages.blocks import PageBlock
from formula_check.pages.fence_scan import FormulaFence
from support import mkdocs_build

pytest.importorskip("mkdocs_jupyter")

FIXTURE = Path(__file__).resolve().parent.parent / "fixtures" / "sites" / "jupyter-pages"
DRIFT = "docs/softmax.ipynb:cell 5:line 3 [drifted]: mismatch: "
SOFTMAX = r"\text{softmax}(x)_i = \frac{e^{x_i}}{\sum_j e^{x_j}}"
CODE = "import tensorflow as tf\n\n\ndef softmax(x):\n    return tf.nn.softmax(x, axis=-1)"


@pytest.fixture
def site(tmp_path: Path) -> Path:
    project = tmp_path / "site-project"
    shutil.copytree(FIXTURE, project, ignore=shutil.ignore_patterns("site", ".cache"))
    return project


def _build(project: Path, *, strict: bool = False) -> None:
    build_with_fake_engine(project, FakeMaker(drift_on_axis_1), strict=strict)


def _page(project: Path, name: str) -> str:
    return (project / "site" / name / "index.html").read_text(encoding="utf-8")


def _order(html: str, *marks: str) -> list[int]:
    return [html.index(mark) for mark in marks]


def _notebook_html(page: str) -> str:
    """What mkdocs-jupyter made of the notebook: its wrapper, up to the inlined styles."""
    return page[page.index('<div class="jupyter-wrapper">') : page.index("<style")]


def _messages(caplog: pytest.LogCaptureFixture, level: int) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno == level]


def _write_notebook(path: Path, *cells: nbformat.NotebookNode, ids: bool = True) -> None:
    notebook = new_notebook(cells=list(cells))
    for number, cell in enumerate(notebook.cells, 1):
        cell.id = f"{path.stem}-{number}"
    text = nbformat.writes(notebook)
    if not ids:  # as nbformat 4.4 wrote it
        data = json.loads(text)
        data["nbformat_minor"] = 4
        for cell in data["cells"]:
            del cell["id"]
        text = json.dumps(data, indent=1)
    path.write_text(text, encoding="utf-8")


# -- a notebook page's cards --------------------------------------------------------------------


def test_each_card_sits_right_under_its_formula_in_the_notebook_page(site: Path) -> None:
    _build(site)
    html = _page(site, "softmax")
    cell_3, rows, cell_4, cell_5, drifted, cell_6 = _order(
        html,
        'id="cell-id=softmax-3"',
        'id="fc-rows"',
        'id="cell-id=softmax-4"',
        'id="cell-id=softmax-5"',
        'id="fc-drifted"',
        'id="cell-id=softmax-6"',
    )
    assert cell_3 < rows < cell_4 < cell_5 < drifted < cell_6
    assert 'id="fc-rows" data-fc-status="verified"' in html
    assert 'id="fc-drifted" data-fc-status="mismatch"' in html
    formula_end = html.index("</code></pre>", cell_3)
    assert html[formula_end:rows].startswith("</code></pre>\n<div"), "under the formula"
    assert "fc-pending" not in html, "every placeholder filled"


def test_strict_fails_on_a_notebook_drift_naming_cell_and_line(
    site: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.INFO), pytest.raises(Abort):
        _build(site, strict=True)
    warnings = _messages(caplog, logging.WARNING)
    assert len(warnings) == 1 and warnings[0].startswith(DRIFT), warnings
    infos = _messages(caplog, logging.INFO)
    assert "formula-check: checking 2 blocks on 3 pages with " in " ".join(infos)
    assert any(re.search(r": 1 verified, 1 failing$", line) for line in infos), infos


def test_the_report_lists_notebook_blocks_and_links_to_their_cards(site: Path) -> None:
    _build(site)
    report = json.loads((site / "site" / "formula-check-report.json").read_text("utf-8"))
    found = {(b["page"], b["line"], b["id"], b["status"]) for b in report["blocks"]}
    assert found == {
        ("docs/softmax.ipynb:cell 3", 3, "rows", "verified"),
        ("docs/softmax.ipynb:cell 5", 3, "drifted", "mismatch"),
    }
    table = _page(site, "formula-check-report")
    assert 'href="../softmax/#fc-drifted"' in table and 'href="../softmax/#fc-rows"' in table


def test_a_notebook_page_without_blocks_is_left_as_mkdocs_jupyter_made_it(site: Path) -> None:
    _build(site)
    checked = _notebook_html(_page(site, "plain"))
    config = site / "mkdocs.yml"
    config.write_text(
        config.read_text("utf-8").replace("  - formula-check\n", ""), encoding="utf-8"
    )
    build(load_config(config_file=str(site / "mkdocs.yml")))  # mkdocs-jupyter alone
    assert _notebook_html(_page(site, "plain")) == checked


def test_with_checks_off_notebook_pages_build_without_cards(
    site: Path, caplog: pytest.LogCaptureFixture
) -> None:
    config = site / "mkdocs.yml"
    config.write_text(
        config.read_text("utf-8").replace(
            "  - formula-check\n", "  - formula-check:\n      enabled: false\n"
        ),
        encoding="utf-8",
    )
    with caplog.at_level(logging.INFO):
        _build(site, strict=True)
    assert "fc-card" not in _page(site, "softmax")
    assert 'id="cell-id=softmax-3"' in _page(site, "softmax")
    assert not _messages(caplog, logging.WARNING)


def test_either_plugin_order_gives_the_same_cards(
    site: Path, caplog: pytest.LogCaptureFixture
) -> None:
    config = site / "mkdocs.yml"
    jupyter, ours = "  - mkdocs-jupyter:\n      cache: false\n", "  - formula-check\n"
    config.write_text(
        config.read_text("utf-8").replace(jupyter + ours, ours + jupyter), encoding="utf-8"
    )
    assert config.read_text("utf-8").count(ours + jupyter) == 1
    with caplog.at_level(logging.INFO):
        _build(site)
    html = _page(site, "softmax")
    assert 'id="fc-rows" data-fc-status="verified"' in html
    assert 'id="fc-drifted" data-fc-status="mismatch"' in html
    assert [w for w in _messages(caplog, logging.WARNING) if w.startswith(DRIFT)]


def test_a_formula_cell_gets_its_card_right_after_the_cell(site: Path) -> None:
    magic = (
        f'%%formula id="magic" oracle="softmax" timing="off" latex="{SOFTMAX}"\n'
        "def softmax(x):\n    return tf.nn.softmax(x, axis=-1)"
    )
    _write_notebook(
        site / "docs" / "magic.ipynb",
        new_code_cell("import tensorflow as tf"),
        new_code_cell(magic),
        new_markdown_cell("After the check."),
    )
    _build(site)
    html = _page(site, "magic")
    cell_2, card, cell_3 = _order(
        html, 'id="cell-id=magic-2"', 'id="fc-magic"', 'id="cell-id=magic-3"'
    )
    assert cell_2 < card < cell_3


def test_a_notebook_without_cell_ids_gets_its_cards_at_the_end_and_says_so(
    site: Path, caplog: pytest.LogCaptureFixture
) -> None:
    source = nbformat.read(site / "docs" / "softmax.ipynb", as_version=4)
    _write_notebook(site / "docs" / "old.ipynb", *source.cells, ids=False)
    with caplog.at_level(logging.INFO):
        _build(site)
    html = _page(site, "old")
    assert html.index("</div> <!-- jupyter-wrapper -->") < html.index('id="fc-rows"')
    assert "docs/old.ipynb: the cards of cells 3, 5 are at the end of the page" in " ".join(
        _messages(caplog, logging.INFO)
    )


def test_without_mkdocs_jupyter_a_notebook_is_no_page_and_is_not_checked(
    site: Path, caplog: pytest.LogCaptureFixture
) -> None:
    config = site / "mkdocs.yml"
    config.write_text(
        config.read_text("utf-8").replace("  - mkdocs-jupyter:\n      cache: false\n", ""),
        encoding="utf-8",
    )
    with caplog.at_level(logging.INFO):
        _build(site, strict=True)
    assert not (site / "site" / "softmax" / "index.html").exists()
    assert not any("checking" in line for line in _messages(caplog, logging.INFO))


@pytest.mark.tf
def test_a_real_build_fails_strict_on_the_notebook_drift_then_reads_the_cache(site: Path) -> None:
    first = mkdocs_build(site, strict=True)
    warnings = [line for line in first.stderr.splitlines() if line.startswith("WARNING -  ")]
    assert first.returncode == 1
    assert len(warnings) == 1 and warnings[0].startswith("WARNING -  " + DRIFT), first.stderr
    html = _page(site, "softmax")
    assert 'id="fc-rows" data-fc-status="verified"' in html
    assert 'id="fc-drifted" data-fc-status="mismatch"' in html
    again = mkdocs_build(site)
    assert "formula-check: 2 blocks in" in again.stderr
    assert "1 verified, 1 failing; 2 from the cache" in again.stderr, again.stderr


# -- placing cards in nbconvert's HTML ------------------------------------------------------------


def _block(cell: int, block_id: str) -> PageBlock:
    fence = FormulaFence(0, 0, 0, "", "", True, None)
    return PageBlock(fence, Location(f"nb.ipynb:cell {cell}", 3), block_id, "x")


def test_a_cell_showing_another_number_of_formulas_gets_its_cards_after_it() -> None:
    html = (
        '<div id="cell-id=a"><div><pre><code class="language-formula">x</code></pre></div></div>'
        '<div id="cell-id=b"></div>'
    )
    page = NotebookPage("nb.ipynb", (_block(1, "one"), _block(1, "two")), (("markdown", "a"),))
    placed = place_cards(html, page, ["[one]", "[two]"])
    assert placed.html == html.replace("</div></div>", "</div></div>\n[one]\n\n[two]\n", 1)
    assert placed.note("nb.ipynb") == ""


def test_each_formula_of_a_cell_gets_its_own_card() -> None:
    formula = '<pre><code class="language-formula">x</code></pre>'
    html = f'<div id="cell-id=a"><div>{formula}<p>and</p>{formula}</div></div>'
    page = NotebookPage("nb.ipynb", (_block(1, "one"), _block(1, "two")), (("markdown", "a"),))
    placed = place_cards(html, page, ["[one]", "[two]"])
    assert placed.html == (
        f'<div id="cell-id=a"><div>{formula}\n[one]\n<p>and</p>{formula}\n[two]\n</div></div>'
    )


def test_a_card_stays_under_its_formula_when_the_cell_comments_out_a_div() -> None:
    formula = '<pre><code class="language-formula">x</code></pre>'
    html = (
        f'<div id="cell-id=a"><div><!-- <div> old --> {formula}</div></div>'
        f'<div id="cell-id=b"><div>{formula}</div></div>'
    )
    page = NotebookPage("nb.ipynb", (_block(1, "one"),), (("markdown", "a"), ("markdown", "b")))
    placed = place_cards(html, page, ["[one]"])
    assert placed.html == html.replace(
        f"{formula}</div></div>", f"{formula}\n[one]\n</div></div>", 1
    )


def test_a_card_saved_in_the_notebook_gives_way_to_the_builds_own(site: Path) -> None:
    """A notebook saved with the magic's output holds its card (``id="fc-sm"``, the verdict
    of when it was run): the page shows the build's card only."""
    cell = new_code_cell(f'%%formula id="sm" oracle="softmax" latex="{SOFTMAX}"\n{CODE}')
    stale = '<style>.fc-card {}</style><div class="admonition fc-card" id="fc-sm" data-fc-status="verified"><div>verified</div></div>'
    cell.outputs = [new_output("display_data", data={"text/html": stale, "text/plain": "card"})]
    _write_notebook(site / "docs" / "saved.ipynb", new_code_cell("%load_ext formula_check"), cell)
    build_with_fake_engine(site, FakeMaker(mismatch))
    html = _page(site, "saved")
    assert html.count('id="fc-sm"') == 1
    assert re.findall(r'data-fc-status="([^"]*)"', html) == ["mismatch"]


# -- the CLI checks the notebook pages the site builds ------------------------------------------


def _site_pages(project: Path) -> list[str]:
    from formula_check.project.loading import load_project, site_pages

    loaded = load_project(project / "mkdocs.yml")
    return [path.relative_to(project).as_posix() for path in site_pages(loaded)]


def test_a_whole_site_check_reads_the_notebooks_mkdocs_jupyter_makes_pages_of(site: Path) -> None:
    assert _site_pages(site) == ["docs/index.md", "docs/plain.ipynb", "docs/softmax.ipynb"]
    config = site / "mkdocs.yml"
    text = config.read_text(encoding="utf-8")
    config.write_text(text.replace("cache: false", 'cache: false\n      ignore: ["plain*"]'))
    assert _site_pages(site) == ["docs/index.md", "docs/softmax.ipynb"], "its ignore= holds"
    config.write_text(text.replace("  - mkdocs-jupyter:\n      cache: false\n", ""))
    assert _site_pages(site) == ["docs/index.md"], "without mkdocs-jupyter a notebook is no page"
