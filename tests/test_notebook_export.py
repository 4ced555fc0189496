"""Every page as a runnable notebook ("Open as notebook"): the page's prose and formulas as
Markdown cells, each block's code in a ``%%formula`` cell under the block's options. The
notebook is the same bytes for the same page, and, executed by nbclient on a real kernel,
shows the same verdicts as the site."""

from __future__ import annotations

import json
import logging
import re
import shutil
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

from fakes import FakeMaker, build_with_fake_engine
from formula_check.pages.blocks import PageBlock, Settings, source_blocks
from formula_check.pages.front_matter import split_front_matter
from formula_check.pages.notebooks import notebook_blocks, split_magic_options
from formula_check.project.notebook_export import notebook_name, page_notebook

ROOT = Path(__file__).resolve().parents[1]
PROJECT = ROOT / "fixtures" / "sites" / "notebook-export"
PAGE = (PROJECT / "docs" / "index.md").read_text(encoding="utf-8")
BODY = PAGE.split("---\n", 2)[2].lstrip("\n")  # as MkDocs hands it over, front matter apart
META = {"formula_check": {"seed": 3}}


def _cells(text: str) -> list[tuple[str, str]]:
    return [(cell["cell_type"], "".join(cell["source"])) for cell in json.loads(text)["cells"]]


def test_the_notebook_holds_the_prose_the_formulas_and_a_formula_cell_per_block() -> None:
    cells = _cells(page_notebook(BODY, page="docs/index.md", meta=META))
    kinds = [kind for kind, _ in cells]
    assert kinds == ["code", "markdown", "code", "markdown", "code", "markdown", "code"]
    assert cells[0][1] == "%load_ext formula_check"
    assert cells[1][1].startswith("# Softmax, two ways")
    assert "$$\n\\text{softmax}(x)_i = \\frac{e^{x_i}}{\\sum_j e^{x_j}}\n$$" in cells[1][1]
    first = cells[2][1].split("\n")
    assert first[0].startswith('%%formula seed="3" id="softmax" oracle="softmax" latex="')
    assert first[1:3] == ["import tensorflow as tf", ""], "the snippet follows, as written"
    assert 'expect="mismatch"' in cells[4][1].split("\n")[0], "the block's own options kept"
    shown = cells[5][1]
    assert '```python\nraise RuntimeError("shown, never run")\n```' in shown, (
        "shown code stays text"
    )
    assert cells[6][1].startswith('%formula seed="3" id="norm" oracle="layer_norm" code=')
    assert "\n" not in cells[6][1], "code elsewhere: a line magic, no code of its own"


def test_the_same_page_gives_the_same_bytes_and_a_valid_notebook() -> None:
    once = page_notebook(BODY, page="docs/index.md", meta=META)
    assert once == page_notebook(BODY, page="docs/index.md", meta=META)
    notebook = nbformat.reads(once, as_version=4)
    nbformat.validate(notebook)
    assert [cell.id for cell in notebook.cells] == [f"cell-{i}" for i in range(1, 8)]
    assert notebook.metadata == {
        "kernelspec": {"display_name": "Python 3", "language": "python", "name": "python3"},
        "language_info": {"name": "python"},
    }
    assert all(cell.metadata == {} for cell in notebook.cells), "no tool's metadata"
    assert once.endswith("}\n")


@pytest.mark.parametrize(
    "latex",
    [
        r"\begin{aligned} a &= b \\ c &= d \end{aligned}",
        r"x \\\\ y",  # two row breaks
        r'\text{say "hi"}',  # a double quote: written \"
        'f\'(x) = \\text{"a"}',  # both quote kinds
        r"\"o \\",  # TeX's umlaut accent, a row break at the end
        r"\frac{1}{\sqrt{d_k}}",
    ],
)
def test_the_latex_the_magic_reads_back_is_the_pages(latex: str) -> None:
    page = f'```formula id="f" oracle="softmax"\n{latex}\n```\n\n```python\ndef f(x):\n    return x\n```\n'
    magic = _cells(page_notebook(page, page="docs/p.md"))[2][1].split("\n")[0]
    _, read_back, _ = split_magic_options(magic.removeprefix("%%formula "))
    assert read_back == latex


def test_formula_off_writes_no_latex_and_the_name_follows_the_page() -> None:
    page = '```formula oracle="softmax" formula="off"\nx\n```\n\n```python\ndef f(x):\n    return x\n```\n'
    magic = _cells(page_notebook(page, page="docs/p.md"))[2][1].split("\n")[0]
    assert magic == '%%formula oracle="softmax" formula="off"'
    assert notebook_name("docs/guide/attention.md") == "attention.ipynb"
    assert notebook_name("docs/zh/index.md") == "index.ipynb"


def test_a_site_links_each_page_with_blocks_to_its_notebook(tmp_path: Path) -> None:
    project = tmp_path / "project"
    shutil.copytree(PROJECT, project, ignore=shutil.ignore_patterns("site", ".cache"))
    site = tmp_path / "site"
    build_with_fake_engine(project, FakeMaker(), site_dir=site)
    written = (site / "index.ipynb").read_text(encoding="utf-8")
    assert written == page_notebook(BODY, page="docs/index.md", meta=META)
    assert '<a href="index.ipynb" download' in (site / "index.html").read_text(encoding="utf-8")
    kept = (site / "no-notebook" / "index.html").read_text(encoding="utf-8")
    assert "fc-notebook" not in kept and not list((site / "no-notebook").glob("*.ipynb"))
    assert "fc-notebook" not in (site / "prose" / "index.html").read_text(encoding="utf-8")
    assert sorted(p.name for p in site.rglob("*.ipynb")) == ["index.ipynb"]


def test_a_front_matter_value_that_is_no_boolean_is_a_warning_at_the_page(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    project = tmp_path / "project"
    shutil.copytree(PROJECT, project, ignore=shutil.ignore_patterns("site", ".cache"))
    page = project / "docs" / "no-notebook.md"
    page.write_text(
        page.read_text(encoding="utf-8").replace("notebook: false", "notebook: maybe"),
        encoding="utf-8",
    )
    build_with_fake_engine(project, FakeMaker(), site_dir=tmp_path / "site")
    warned = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert any(
        m.startswith("docs/no-notebook.md:1: front matter 'formula_check_notebook' must be true")
        for m in warned
    ), warned
    assert (tmp_path / "site" / "no-notebook" / "index.html").exists(), "the page still built"


@pytest.mark.tf
def test_the_exported_notebook_runs_and_shows_the_sites_verdicts(tmp_path: Path) -> None:
    project = tmp_path / "project"
    shutil.copytree(PROJECT, project, ignore=shutil.ignore_patterns("site", ".cache"))
    notebook = nbformat.reads(page_notebook(BODY, page="docs/index.md", meta=META), as_version=4)
    client = NotebookClient(
        notebook,
        timeout=300,
        kernel_name="python3",
        allow_errors=False,  # "Run all" goes through: a drift shows its card, raises nothing
        resources={"metadata": {"path": str(project)}},
    )
    client.execute()
    statuses = []
    for cell in notebook.cells:
        html = "".join(o.get("data", {}).get("text/html", "") for o in cell.get("outputs", []))
        if "data-fc-status" in html:
            statuses.append(html.split('data-fc-status="', 1)[1].split('"', 1)[0])
    assert statuses == ["verified", "expected_failure", "verified"], statuses


# -- the notebook's verdicts are the page's ------------------------------------------------------

SM = r"\text{softmax}(x)_i = \frac{e^{x_i}}{\sum_j e^{x_j}}"
SOFTMAX = "import tensorflow as tf\n\n\ndef softmax(x):\n    return tf.nn.softmax(x, axis=-1)\n"
ATTENTION = SOFTMAX + "\n\ndef attention(q, k, v):\n    return tf.matmul(softmax(q @ k), v)\n"
SETTINGS = Settings(PROJECT, timing=False)


def _block(header: str, latex: str, code: str | None) -> str:
    fence = f"```formula {header}\n{latex}\n```\n\n"
    return fence + (f"```python\n{code.strip()}\n```\n\n" if code is not None else "")


def _both(page: str) -> tuple[list[PageBlock], list[PageBlock]]:
    """The page's blocks as the site reads them, and the exported notebook's, read back."""
    markdown, meta = split_front_matter(page)
    notebook = page_notebook(markdown, page="docs/p.md", meta=meta)
    on_page = source_blocks(page, page="docs/p.md", settings=SETTINGS)
    return on_page, notebook_blocks(notebook.encode(), notebook="p.ipynb", settings=SETTINGS)


def _magic_line(page: str) -> str:
    return _cells(page_notebook(page, page="docs/p.md"))[2][1].split("\n")[0]


def test_a_tex_comment_ends_at_its_line_not_at_the_formulas_end() -> None:
    latex = (
        "\\text{softmax}(x)_i = % the softmax, row by row\n\\frac{e^{x_i}}{\\sum_j e^{x_j}} 50\\%"
    )
    _, read_back, _ = split_magic_options(_magic_line(_block('oracle="softmax"', latex, SOFTMAX)))
    assert read_back == "\\text{softmax}(x)_i = \\frac{e^{x_i}}{\\sum_j e^{x_j}} 50\\%"


def test_a_formula_without_code_stays_an_error() -> None:
    page = _block('id="sm" oracle="softmax"', SM, SOFTMAX) + _block(
        'id="nocode" oracle="softmax" entry="softmax" skip="later"', SM, None
    )
    on_page, in_notebook = _both(page)
    assert on_page[1].spec is None and in_notebook[1].spec is None
    assert in_notebook[1].error is not None and "entry=" in in_notebook[1].error.message


def test_a_page_default_the_block_does_not_take_is_not_written() -> None:
    page = "---\nformula_check:\n  mask_convention: keep\n  seed: 3\n---\n\n" + _block(
        'id="sm" oracle="softmax"', SM, SOFTMAX
    )
    on_page, in_notebook = _both(page)
    assert on_page[0].spec is not None and in_notebook[0].spec is not None, in_notebook[0].error
    assert in_notebook[0].spec.seed == on_page[0].spec.seed == 3


def test_each_block_is_checked_on_its_own_function() -> None:
    page = _block('id="att" oracle="attention"', "x", ATTENTION) + _block(
        'id="sm" oracle="softmax"', SM, SOFTMAX
    )
    _, in_notebook = _both(page)
    source = in_notebook[1].spec.snippet.source.replace("import tensorflow as tf", "")
    namespace: dict[str, object] = {}
    exec(source, namespace)
    assert [name for name, value in namespace.items() if callable(value)][-1] == "softmax"


@pytest.mark.parametrize(
    "info",
    ["bash", "sh", "python3", "PYTHON", "html", "javascript", "ruby", "sql", "latex", "markdown"],
)
def test_a_fence_the_page_only_shows_stays_text(info: str) -> None:
    page = _block('id="sm" oracle="softmax"', SM, SOFTMAX) + f"```{info}\necho ran > x.txt\n```\n"
    cells = _cells(page_notebook(page, page="docs/p.md"))
    assert [kind for kind, _ in cells] == ["code", "markdown", "code", "markdown"]
    assert cells[3][1] == f"```{info}\necho ran > x.txt\n```"


def test_the_pages_definitions_reach_later_blocks() -> None:
    page = _block('id="sm" oracle="softmax"', SM, SOFTMAX) + _block(
        'id="sm2" oracle="softmax"', SM, SOFTMAX
    )
    on_page, in_notebook = _both(page)
    assert on_page[1].spec.definitions
    assert [d[:2] for d in in_notebook[1].spec.definitions] == [
        d[:2] for d in on_page[1].spec.definitions
    ]


def test_a_notebook_the_docs_ship_is_kept(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    project = tmp_path / "project"
    shutil.copytree(PROJECT, project, ignore=shutil.ignore_patterns("site", ".cache"))
    config = project / "mkdocs.yml"
    config.write_text(config.read_text("utf-8") + "use_directory_urls: false\n", "utf-8")
    own = '{"cells": [], "metadata": {"mine": true}, "nbformat": 4, "nbformat_minor": 5}\n'
    (project / "docs" / "index.ipynb").write_text(own, encoding="utf-8")
    caplog.set_level(logging.INFO)
    build_with_fake_engine(project, FakeMaker(), site_dir=tmp_path / "site")
    assert (tmp_path / "site" / "index.ipynb").read_text(encoding="utf-8") == own
    assert (tmp_path / "site" / "index.formula.ipynb").exists()
    assert '<a href="index.formula.ipynb" download' in (tmp_path / "site" / "index.html").read_text(
        "utf-8"
    )
    assert (
        "docs/index.md: its notebook is index.formula.ipynb, not index.ipynb: the docs ship a "
        "file index.ipynb of their own, which is kept"
    ) in [r.getMessage() for r in caplog.records]


def test_the_link_to_a_notebook_is_url_encoded(tmp_path: Path) -> None:
    project = tmp_path / "project"
    shutil.copytree(PROJECT, project, ignore=shutil.ignore_patterns("site", ".cache"))
    shutil.copy(project / "docs" / "index.md", project / "docs" / "a b#c.md")
    build_with_fake_engine(project, FakeMaker(), site_dir=tmp_path / "site")
    html = next((tmp_path / "site").glob("a b#c/index.html")).read_text("utf-8")
    assert '<p class="fc-notebook"><a href="a%20b%23c.ipynb" download' in html
    assert (tmp_path / "site" / "a b#c" / "a b#c.ipynb").exists()


@pytest.mark.tf
def test_run_all_does_not_run_a_skipped_or_failing_blocks_code(tmp_path: Path) -> None:
    """A skipped block, and one expected to raise, are checked without running their code in
    the kernel: "Run all" goes through and shows the page's cards."""
    project = tmp_path / "project"
    shutil.copytree(PROJECT, project, ignore=shutil.ignore_patterns("site", ".cache"))
    skipped = "import fastsoftmax_nobody_has\n\n\ndef softmax(x):\n    return x\n"
    raising = "def softmax(x):\n    raise ValueError('on purpose')\n"
    page = (
        _block('id="fast" oracle="softmax" skip="needs fastsoftmax"', SM, skipped)
        + _block('id="raises" oracle="softmax" expect="error"', SM, raising)
        + "Run at import: `raise` would stop here.\n"
    )
    notebook = nbformat.reads(page_notebook(page, page="docs/p.md"), as_version=4)
    NotebookClient(
        notebook,
        timeout=300,
        kernel_name="python3",
        allow_errors=False,
        resources={"metadata": {"path": str(project)}},
    ).execute()
    statuses = []
    for cell in notebook.cells:
        html = "".join(o.get("data", {}).get("text/html", "") for o in cell.get("outputs", []))
        statuses += re.findall(r'data-fc-status="([^"]*)"', html)
    assert statuses == ["skipped", "expected_failure"], statuses
