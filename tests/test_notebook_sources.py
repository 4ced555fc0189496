"""Notebooks as sources: ``formula-check check `` and ``pytest --formula-check``.

A notebook is read with nbformat, never run: a ``formula`` fence in a Markdown cell pairs with
the next code cell, a ``%%formula`` cell is a block, and every location names the cell and
the line within it (``analysis.ipynb:cell 7:line 3``). The reading is tested without
TensorFlow; the ``tf`` tests check the fixture notebooks for real, through the CLI.
"""

from __future__ import annotations

import json
import shutil
import xml.etree.ElementTree as ET
from collections.abc import Sequence
from pathlib import Path

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

import formula_check.project.loading  # noqa: F401  # see test_pytest_plugin: pytester drops modules
from fakes import FakeMaker, pytest_conftest
from formula_check.faces import cli
from formula_check.model import Location, Status
from formula_check.pages.blocks import PageBlock, Settings
from formula_check.pages.notebooks import as_python, notebook_blocks
from formula_check.project.ci_formats import github_annotation, junit_xml, source_line
from formula_check.project.loading import bare_project, read_blocks, target_pages
from formula_check.results import CheckResult

pytest_plugins = ["pytester"]

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "fixtures" / "notebooks"
SOFTMAX = r"\text{softmax}(x)_i = \frac{e^{x_i}}{\sum_j e^{x_j}}"
FORMULA = f'```formula oracle="softmax"\n{SOFTMAX}\n```'
CODE = "def softmax(x):\n    return tf.nn.softmax(x, axis=-1)"


def notebook_bytes(*cells: tuple[str, str]) -> bytes:
    """A notebook of ``(kind, source)`` cells, ``kind`` ``md`` or ``code``."""
    made = [
        new_markdown_cell(text) if kind == "md" else new_code_cell(text) for kind, text in cells
    ]
    return nbformat.writes(new_notebook(cells=made)).encode()


def blocks_of(*cells: tuple[str, str], name: str = "nb.ipynb") -> list[PageBlock]:
    return notebook_blocks(notebook_bytes(*cells), notebook=name, settings=Settings(Path(".")))


def where(blocks: Sequence[PageBlock]) -> list[str]:
    return [f"{block.location} [{block.block_id}]" for block in blocks]


# -- locations ---------------------------------------------------------------------------------


def test_a_cell_location_names_the_cell_and_the_line_within_it() -> None:
    cell = Location("analysis.ipynb:cell 7", 3)
    assert str(cell) == "analysis.ipynb:cell 7:line 3"
    assert (cell.file, cell.cell) == ("analysis.ipynb", 7)
    page = Location("docs/attention.md", 42)
    assert (str(page), page.file, page.cell) == ("docs/attention.md:42", "docs/attention.md", None)
    assert str(Location("a.ipynb:cell 2")) == "a.ipynb:cell 2"


def test_ci_formats_place_a_cell_on_its_notebook_without_a_file_line() -> None:
    result = CheckResult("sm", Location("nb/a.ipynb:cell 3", 2), "softmax", Status.MISMATCH)
    annotation = github_annotation(result, failing=True)
    assert annotation.startswith("::error file=nb/a.ipynb,title=formula-check [sm]::")
    assert annotation.endswith("nb/a.ipynb:cell 3:line 2 [sm]: mismatch: ")
    case = ET.fromstring(junit_xml([result], lambda _: True)).find("testcase")
    assert case is not None
    assert (case.get("classname"), case.get("file"), case.get("line")) == (
        "nb/a.ipynb",
        "nb/a.ipynb",
        None,
    )


def test_a_cell_line_is_read_from_the_cell(tmp_path: Path) -> None:
    (tmp_path / "a.ipynb").write_bytes(notebook_bytes(("md", "# title"), ("code", "x = 1\ny = 2")))
    assert source_line(tmp_path, Location("a.ipynb:cell 2", 2)) == "y = 2"
    assert source_line(tmp_path, Location("a.ipynb:cell 9", 1)) is None


# -- reading a notebook ------------------------------------------------------------------------


def test_the_fixture_notebooks_read_as_blocks_in_their_cells() -> None:
    project = bare_project(ROOT)
    blocks = read_blocks(FIXTURES / "drifted.ipynb", project, project.settings())
    assert where(blocks) == [
        "fixtures/notebooks/drifted.ipynb:cell 3:line 3 [softmax]",
        "fixtures/notebooks/drifted.ipynb:cell 6:line 1 [sdpa]",
    ]
    paired, magic = (block.spec for block in blocks)
    assert paired is not None and magic is not None
    # The paired code is cell 4, after the definitions of the cells above (cell 2's import).
    snippet = paired.snippet
    assert snippet.location == Location("fixtures/notebooks/drifted.ipynb:cell 4", 1)
    assert snippet.source.startswith("import tensorflow as tf\n\ndef softmax(x):")
    assert snippet.source.split("\n").index("def softmax(x):") + 1 + snippet.line_offset == 1
    # The magic's code starts on its cell's line 2; its LaTeX comes from latex="…".
    source = magic.snippet.source.split("\n")
    assert source.index("def attention(q, k, v):") + 1 + magic.snippet.line_offset == 2
    assert magic.latex.startswith(r"\text{Attention}(Q, K, V) =")


def test_a_formula_pairs_with_the_next_code_cell_past_prose() -> None:
    blocks = blocks_of(
        ("code", "import tensorflow as tf"),
        ("md", f"Softmax:\n\n{FORMULA}"),
        ("md", "Some prose between them."),
        ("code", CODE),
    )
    assert where(blocks) == ["nb.ipynb:cell 2:line 3 [nb-1]"]
    spec = blocks[0].spec
    assert spec is not None and spec.snippet.location.path == "nb.ipynb:cell 4"


def test_a_python_fence_in_the_same_cell_pairs_as_on_a_page() -> None:
    blocks = blocks_of(("md", f"{FORMULA}\n\n```python\n{CODE}\n```"), ("code", "x = 1"))
    spec = blocks[0].spec
    assert spec is not None and spec.snippet.location == Location("nb.ipynb:cell 1", 5)
    assert "x = 1" not in spec.snippet.source


def test_a_formula_without_code_before_the_next_formula_is_an_error() -> None:
    blocks = blocks_of(("md", FORMULA), ("md", FORMULA), ("code", CODE))
    assert where(blocks) == ["nb.ipynb:cell 1:line 1 [nb-1]", "nb.ipynb:cell 2:line 1 [nb-2]"]
    assert blocks[0].error is not None and "no ```python fence follows" in blocks[0].error.message
    assert blocks[1].spec is not None


def test_code_points_elsewhere_as_on_a_page(tmp_path: Path) -> None:
    (tmp_path / "model.py").write_text(CODE, encoding="utf-8")
    data = notebook_bytes(("md", FORMULA.replace('"softmax"', '"softmax" code="model.py:softmax"')))
    [block] = notebook_blocks(data, notebook="nb.ipynb", settings=Settings(tmp_path))
    assert block.spec is not None and block.spec.snippet.origin == "file"


def test_formula_magic_cells() -> None:
    blocks = blocks_of(
        ("code", "%load_ext formula_check\nimport tensorflow as tf\n!pip list"),
        ("code", f'%%formula id="sm" oracle="softmax" strict latex="{SOFTMAX}"\n{CODE}'),
        ("code", '%%formula oracle="softmax" entry="softmax"'),
        ("code", '%formula oracle="softmax" entry="softmax"\nx = 1'),
    )
    assert where(blocks) == [
        "nb.ipynb:cell 2:line 1 [sm]",
        "nb.ipynb:cell 3:line 1 [nb-2]",
        "nb.ipynb:cell 4:line 1 [nb-3]",
    ]
    first, without_latex, line_magic = (block.spec for block in blocks)
    assert first is not None and first.latex == SOFTMAX and first.check_formula
    # The cells above give their imports (IPython's lines read as nothing); the code keeps
    # its cell's lines, under the %%formula line.
    source = first.snippet.source.split("\n")
    assert source[:3] == ["import tensorflow as tf", "", "def softmax(x):"]
    assert source.index("def softmax(x):") + 1 + first.snippet.line_offset == 2
    assert without_latex is not None and not without_latex.check_formula
    # A %formula line checks what the cells above defined (the magic's own cell excluded).
    assert line_magic is not None and "def softmax" in line_magic.snippet.source
    assert "x = 1" not in line_magic.snippet.source


def test_ids_are_numbered_through_the_notebook_and_used_once() -> None:
    named = FORMULA.replace("oracle=", 'id="sm" oracle=')
    blocks = blocks_of(("md", FORMULA), ("code", CODE), ("md", named), ("code", CODE))
    blocks += blocks_of(("md", named), ("code", CODE), ("md", named), ("code", CODE))
    assert [block.block_id for block in blocks] == ["nb-1", "sm", "sm", "sm"]
    assert blocks[3].error is not None
    assert blocks[3].error.message == "duplicate id 'sm' (first used at cell 1:line 1)"


def test_ipython_lines_read_as_pass_line_for_line() -> None:
    assert as_python("%matplotlib inline\nif x:\n    !ls\ny = 1") == (
        "pass  # matplotlib inline\nif x:\n    pass  # ls\ny = 1"
    )
    assert as_python("%%time\nx = 1") == ""


def test_a_file_that_is_no_notebook_is_one_error_block() -> None:
    settings = Settings(Path("."))
    [block] = notebook_blocks(b"{not json", notebook="broken.ipynb", settings=settings)
    assert block.location == Location("broken.ipynb") and block.block_id == "notebook"
    assert block.error is not None and block.error.message.startswith("not a Jupyter notebook")


def _nested(depth: int) -> bytes:
    """A notebook whose metadata is ``depth`` objects deep."""
    inner = b'{"a":' * depth + b"1" + b"}" * depth
    return b'{"cells": [], "metadata": ' + inner + b', "nbformat": 4, "nbformat_minor": 5}'


# Deeper than JSON's reader recurses, and deeper than nbformat's checks of what it read do.
@pytest.mark.parametrize("depth", [100_000, 900])
def test_a_deeply_nested_notebook_is_an_error_block_not_a_crash(
    depth: int, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = _nested(depth)
    [block] = notebook_blocks(data, notebook="deep.ipynb", settings=Settings(Path(".")))
    assert block.error is not None
    assert block.error.message == "not a Jupyter notebook: its JSON is nested too deeply to read"
    assert source_line(tmp_path, Location("deep.ipynb:cell 1", 1)) is None
    (tmp_path / "deep.ipynb").write_bytes(data)
    assert cli.main(["check", str(tmp_path)], make_engine=FakeMaker()) == 1
    said = "deep.ipynb [notebook]: error: PageError: not a Jupyter notebook: its JSON is nested"
    assert said in capsys.readouterr().out


def test_a_folder_collects_its_notebooks_but_not_checkpoints(tmp_path: Path) -> None:
    shutil.copytree(FIXTURES, tmp_path / "notebooks")
    checkpoints = tmp_path / "notebooks" / ".ipynb_checkpoints"
    checkpoints.mkdir()
    shutil.copy(FIXTURES / "good.ipynb", checkpoints / "good-checkpoint.ipynb")
    _, pages = target_pages(tmp_path / "notebooks")
    assert [page.name for page in pages] == ["drifted.ipynb", "good.ipynb"]
    _, one = target_pages(tmp_path / "notebooks" / "good.ipynb")
    assert [page.name for page in one] == ["good.ipynb"]


# -- pytest --formula-check, on a fake engine --------------------------------------------------


def test_pytest_collects_notebook_blocks(pytester: pytest.Pytester) -> None:
    pytester.makeconftest(pytest_conftest())
    folder = pytester.mkdir("notebooks")
    for name in ("good.ipynb", "drifted.ipynb"):
        shutil.copy(FIXTURES / name, folder / name)
    result = pytester.runpytest("--formula-check", "notebooks", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=2, failed=2)
    text = result.stdout.str()
    assert "notebooks/drifted.ipynb:cell 3:line 3 [softmax]: mismatch" in text
    assert "FAILED notebooks/drifted.ipynb::sdpa" in text


# -- checked for real --------------------------------------------------------------------------


def check(folder: Path, capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str]:
    code = cli.main(["check", "--no-timing", str(folder), *args])
    return code, capsys.readouterr().out


def outcomes(report: Path) -> dict[tuple[str, str], tuple[str, bool]]:
    blocks = json.loads(report.read_text("utf-8"))["blocks"]
    return {(b["page"], b["id"]): (b["status"], b["cached"]) for b in blocks}


@pytest.mark.tf
def test_the_cli_checks_notebooks_names_cells_and_caches(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = tmp_path / "notebooks"
    shutil.copytree(FIXTURES, folder)
    # A third notebook, whose code cell uses a helper module next to it.
    (folder / "helper.py").write_text("SCALE = 1.0\n", encoding="utf-8")
    helped = "import helper\n\ndef softmax(x):\n    return tf.nn.softmax(x * helper.SCALE, axis=-1)"
    (folder / "imports.ipynb").write_bytes(
        notebook_bytes(
            ("code", "import tensorflow as tf"),
            ("md", FORMULA.replace("oracle=", 'id="helped" oracle=')),
            ("code", helped),
        )
    )
    # Run in the notebooks' folder, as Jupyter runs them: the project folder is on the path.
    monkeypatch.chdir(folder)
    report = tmp_path / "report.json"
    code, out = check(folder, capsys, "--json", str(report), "--github")
    assert code == 1
    assert "::error file=drifted.ipynb,title=formula-check [softmax]::" in out
    assert "drifted.ipynb:cell 3:line 3 [softmax]: mismatch: output:" in out
    assert "drifted.ipynb:cell 6:line 1 [sdpa]: mismatch: output:" in out
    first = outcomes(report)
    assert first == {
        ("drifted.ipynb:cell 3", "softmax"): ("mismatch", False),
        ("drifted.ipynb:cell 6", "sdpa"): ("mismatch", False),
        ("good.ipynb:cell 3", "softmax"): ("verified", False),
        ("good.ipynb:cell 6", "sdpa"): ("verified", False),
        ("imports.ipynb:cell 2", "helped"): ("verified", False),
    }

    # Again: every block from the cache.
    assert check(folder, capsys, "--json", str(report))[0] == 1
    assert outcomes(report) == {key: (status, True) for key, (status, _) in first.items()}

    # An edited code cell is checked again, with the blocks whose code comes after it (the
    # magic's code runs after cell 4's definitions); the other notebooks come from the cache.
    drifted = nbformat.read(folder / "drifted.ipynb", as_version=4)
    # (a fix of its own: code identical to good.ipynb's would be good.ipynb's cached result)
    drifted.cells[3].source = drifted.cells[3].source.replace(
        "axis=1, keepdims=True)", "axis=-1, keepdims=True)  # fixed"
    )
    nbformat.write(drifted, folder / "drifted.ipynb")
    # A file the code imports changes: its block is checked again, and fails on the code
    # cell's own line, which the result names.
    (folder / "helper.py").write_text('SCALE = "1"\n', encoding="utf-8")
    code, out = check(folder, capsys, "--json", str(report))
    assert code == 1
    assert outcomes(report) == {
        ("drifted.ipynb:cell 3", "softmax"): ("verified", False),
        ("drifted.ipynb:cell 6", "sdpa"): ("mismatch", False),
        ("good.ipynb:cell 3", "softmax"): ("verified", True),
        ("good.ipynb:cell 6", "sdpa"): ("verified", True),
        ("imports.ipynb:cell 2", "helped"): ("error", False),
    }
    assert "(imports.ipynb:cell 3:line 4)" in out


# -- a verdict is its own cell's ----------------------------------------------------------------

SOFTMAX_CELL = "import tensorflow as tf\n\n\ndef softmax(x):\n    return tf.nn.softmax(x, axis=-1)"
ATTENTION_CELL = SOFTMAX_CELL + "\n\n\ndef attention(q, k, v):\n    return softmax(q @ k) @ v"


def _last_defined(source: str) -> str:
    """The worker's default entry on ``source``: the last function or class in its module."""
    namespace: dict[str, object] = {}
    exec(compile(source, "<cell>", "exec"), namespace)
    return [name for name, value in namespace.items() if callable(value)][-1]


def test_a_cell_that_defines_a_name_again_is_checked_on_its_own_definition() -> None:
    blocks = blocks_of(
        ("code", f'%%formula oracle="attention"\n{ATTENTION_CELL}'),
        ("md", FORMULA),
        ("code", SOFTMAX_CELL.replace("-1", "0")),
    )
    spec = blocks[1].spec
    assert spec is not None and "axis=0" in spec.snippet.source
    assert _last_defined(spec.snippet.source.replace("import tensorflow as tf", "")) == "softmax"


def test_a_future_import_goes_to_the_top_for_this_and_later_cells() -> None:
    header = f'%%formula oracle="softmax" latex="{SOFTMAX}"\n'
    blocks = blocks_of(
        ("code", "import numpy as np\n\n\ndef helper(x):\n    return x"),
        ("code", header + "from __future__ import annotations\n\n" + CODE),
        ("code", header + CODE),
    )
    for block in blocks:
        assert block.spec is not None, block.error
        compile(block.spec.snippet.source, str(block.location), "exec")
    spec = blocks[0].spec
    assert spec is not None
    lines = spec.snippet.source.split("\n")
    assert lines.index("def softmax(x):") + 1 + spec.snippet.line_offset == 4, "its cell line"


@pytest.mark.parametrize(
    ("cell", "why"),
    [
        ("%%time\n" + CODE, ": a cell under another cell magic (%%time) is not read"),
        ("x = 3", '; to check a function of a cell above, say entry="name"'),
    ],
)
def test_a_formula_paired_with_a_cell_that_defines_nothing_is_an_error(cell: str, why: str) -> None:
    blocks = blocks_of(("code", SOFTMAX_CELL), ("md", FORMULA), ("code", cell))
    (block,) = blocks
    assert block.spec is None and block.error is not None
    assert (
        block.error.message
        == f"the code cell 3 paired with this formula defines nothing to check{why}"
    )
    named = blocks_of(
        ("code", SOFTMAX_CELL),
        ("md", FORMULA.replace("oracle=", 'entry="softmax" oracle=')),
        ("code", cell),
    )
    assert named[0].spec is not None, "entry= names what the cells above define"


def test_a_line_magic_without_entry_and_a_formula_cell_that_defines_nothing_are_errors() -> None:
    blocks = blocks_of(
        ("code", SOFTMAX_CELL),
        ("code", '%formula oracle="softmax"'),
        ("code", '%%formula oracle="softmax"\nx = 3'),
    )
    assert [block.spec for block in blocks] == [None, None]
    assert all(b.error is not None and "entry=" in b.error.message for b in blocks)


def test_a_formula_cell_the_page_would_not_run_gives_later_cells_nothing() -> None:
    """A skipped cell, or one expected to raise, does not run in the kernel (the magic's
    rule), so its imports are not in the code of the cells below it."""
    skipped = '%%formula oracle="softmax" skip="needs fastsoftmax"\nimport fastsoftmax\n' + CODE
    blocks = blocks_of(("code", skipped), ("code", f'%%formula oracle="softmax"\n{CODE}'))
    spec = blocks[1].spec
    assert spec is not None and "fastsoftmax" not in spec.snippet.source


def test_a_definition_formula_reaches_the_blocks_of_later_cells() -> None:
    blocks = blocks_of(("md", FORMULA), ("code", CODE), ("md", FORMULA), ("code", CODE))
    first, second = (block.spec for block in blocks)
    assert first is not None and second is not None and first.definitions == ()
    assert [d[:2] for d in second.definitions] == [("softmax", SOFTMAX)]
