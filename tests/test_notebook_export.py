"""Every page as a runnable notebook ("Open as notebook"): the page's prose and formulas as
Markdown cells, each block's code in a ``%%formula`` cell under the block's options. The
notebook is the same bytes for the same page, and, executed by nbclient on a real kernel,
shows the same verdicts as the site."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

from fakes import FakeMaker, build_with_fake_engine
from formula_check.notebook_export import notebook_name, page_notebook
from formula_check.notebooks import split_magic_options

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
    assert '```py\nraise RuntimeError("shown, never run")\n```' in shown, "shown code stays text"
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
        r'\text{say "hi"}',  # a double quote: the option is single-quoted
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
