"""The ``%%formula`` magic in a real kernel: a notebook executed by nbclient, its outputs read.

The kernel runs each cell as Jupyter would; the magic's checks run in our worker processes.
"""

from __future__ import annotations

import re

import nbformat
import pytest
from nbclient import NotebookClient

from formula_check.faces.jupyter import block_page
from formula_check.pages.notebooks import cell_code, split_magic_options

SOFTMAX_LATEX = r"\text{softmax}(x)_i = \frac{e^{x_i}}{\sum_j e^{x_j}}"


def _html(cell: nbformat.NotebookNode) -> str:
    return "".join(
        output.get("data", {}).get("text/html", "")
        for output in cell.outputs
        if output.output_type == "display_data"
    )


def test_magic_options_leave_the_block_header() -> None:
    header, latex, strict = split_magic_options(
        f'id="sm" oracle="softmax" latex="{SOFTMAX_LATEX}" strict seed=3'
    )
    assert (header, latex, strict) == ('id="sm" oracle="softmax" seed=3', SOFTMAX_LATEX, True)
    assert split_magic_options('oracle="softmax"') == ('oracle="softmax"', "", False)


def test_strict_is_the_flag_only_as_a_bare_word() -> None:
    header, _, strict = split_magic_options('id="a" oracle="softmax" skip="flaky in strict mode"')
    assert (header, strict) == ('id="a" oracle="softmax" skip="flaky in strict mode"', False)
    assert split_magic_options("oracle='x' strict")[2] is True


@pytest.mark.parametrize(
    ("written", "latex"),
    [
        ('latex="f\'(x) = \\text{\\"a\\"}"', 'f\'(x) = \\text{"a"}'),
        ('latex="a \\\\\\\\ b \\frac{1}{2}"', "a \\\\ b \\frac{1}{2}"),
        ('latex="\\\\\\"o"', '\\"o'),
        ("latex='it\\'s'", "it's"),
    ],
)
def test_the_latex_value_reads_its_escapes(written: str, latex: str) -> None:
    r"""``\\`` is one backslash, ``\"`` the quote; any other backslash is the formula's."""
    assert split_magic_options(f'oracle="softmax" {written}') == ('oracle="softmax"', latex, False)


def test_only_imports_functions_and_classes_of_earlier_cells_are_kept() -> None:
    cells = [
        "import numpy as np\nx = np.ones(3)\nfor _ in range(10**9): pass\n",
        "@staticmethod\ndef helper(x):\n    return x\n",
        "def broken(:\n",
        "class Layer:\n    pass\nprint('hi')\n",
    ]
    code = cell_code("In [5]", [(f"In [{n}]", c) for n, c in enumerate(cells, 1)], "", 2)
    assert code.source == (
        "import numpy as np\n\n@staticmethod\ndef helper(x):\n    return x\n\n"
        "class Layer:\n    pass\n\n"
    )
    assert code.where(4) == ("In [2]", 2), "a line of the earlier code names its own cell"


def test_the_cells_own_definition_of_a_name_is_the_one_checked() -> None:
    """An earlier cell defined softmax and attention; this cell defines softmax again: the
    earlier softmax is left out, so the last definition (the default entry) is this cell's."""
    earlier = [("In [1]", "def softmax(x):\n    return x\n\ndef attention(q):\n    return q")]
    code = cell_code("In [2]", earlier, "def softmax(x):\n    return -x", 2)
    assert code.source.count("def softmax") == 1
    namespace: dict[str, object] = {}
    exec(code.source, namespace)
    assert [n for n in namespace if n != "__builtins__"][-1] == "softmax"


def test_future_imports_go_to_the_top_and_the_cells_lines_stay() -> None:
    earlier = [("In [1]", "import numpy as np\n\ndef helper(x):\n    return x")]
    body = "from __future__ import annotations\n\ndef f(x: int) -> int:\n    return x"
    code = cell_code("In [2]", earlier, body, 2)
    compile(code.source, "<cell>", "exec")
    assert code.source.startswith("from __future__ import annotations\n")
    assert code.where(code.before + 3) == ("In [2]", 4), "def f is the cell's line 4"


def test_the_code_keeps_the_cells_line_numbers() -> None:
    code = cell_code("In [3]", [("In [1]", "import numpy as np")], "def f(x):\n    return x", 2)
    lines = block_page('oracle="softmax"', "", code)
    body_row = lines.index("def f(x):")
    fence_row = lines.index("```python")
    assert code.line_offset() + (body_row - fence_row) == 2, "the cell's line 2 (1: %%formula)"


NOTEBOOK = [
    "%load_ext formula_check",
    "import tensorflow as tf\n\ndef scaled(x):\n    return tf.nn.softmax(x, axis=-1)",
    f'%%formula id="good" oracle="softmax" latex="{SOFTMAX_LATEX}"\n'
    "def softmax(x):\n    return tf.nn.softmax(x, axis=-1)",
    '%%formula id="drift" oracle="softmax"\ndef softmax(x):\n    return tf.nn.softmax(x, axis=1)',
    '%formula id="earlier" oracle="softmax" entry="scaled"',
    "softmax(tf.ones((2, 3)))  # what a %%formula cell defines is there for later cells",
    '%%formula id="strict" oracle="softmax" strict\ndef softmax(x):\n    return tf.nn.softmax(x, axis=0)',
]


@pytest.mark.tf
def test_a_notebook_shows_a_card_under_each_formula_cell(tmp_path) -> None:
    notebook = nbformat.v4.new_notebook()
    notebook.cells = [nbformat.v4.new_code_cell(source) for source in NOTEBOOK]
    client = NotebookClient(
        notebook,
        timeout=300,
        kernel_name="python3",
        allow_errors=True,
        resources={"metadata": {"path": str(tmp_path)}},
    )
    client.execute()
    cells = notebook.cells
    good, drift, earlier, strict = (_html(cells[i]) for i in (2, 3, 4, 6))
    assert 'data-fc-status="verified"' in good and "<style>" in good
    assert any(o.get("data", {}).get("text/latex") for o in cells[2].outputs), "the formula shown"
    assert 'data-fc-status="mismatch"' in drift
    assert f"In [{cells[3].execution_count}]:1" in drift, re.findall(r"fc-where\">([^<]*)", drift)
    assert 'data-fc-status="verified"' in earlier, "entry= reaches a function of an earlier cell"
    assert not any(o.output_type == "error" for o in cells[3].outputs), "a drift raises nothing"
    assert cells[5].outputs and not any(o.output_type == "error" for o in cells[5].outputs)
    errors = [o for o in cells[6].outputs if o.output_type == "error"]
    assert errors and errors[0].ename == "FormulaCheckFailedError"
    assert 'data-fc-status="mismatch"' in strict


ATTENTION = (
    "import tensorflow as tf\n\n\ndef softmax(x):\n    return tf.nn.softmax(x, axis=-1)\n\n\n"
    "def attention(q, k, v):\n    scores = tf.matmul(q, k, transpose_b=True)\n"
    "    return tf.matmul(softmax(scores), v)"
)
ON_ITS_OWN = [
    "%load_ext formula_check",
    "import not_a_module_anyone_has",
    f'%%formula oracle="attention"\n{ATTENTION}',
    "def helper(x):\n    raise ValueError('from an earlier cell')",
    f'%%formula oracle="softmax" latex="{SOFTMAX_LATEX}"\n'
    "def softmax(x):\n    return tf.nn.softmax(x, axis=-1)",
    '%%formula oracle="softmax"\nfrom __future__ import annotations\n\n'
    "def softmax(x):\n    return helper(x)",
    '%%formula oracle="softmax" skip="needs fastsoftmax"\nimport fastsoftmax_nobody_has\n\n'
    "def softmax(x):\n    return x",
    "print(_formula_result.status)",
]


@pytest.mark.tf
def test_each_cell_is_checked_on_its_own_code_after_the_cells_that_ran(tmp_path) -> None:
    """A failed import defines nothing for later checks; a softmax cell after an attention
    cell is checked as softmax; an error in an earlier cell's function names that cell and
    its line; a skipped cell does not run in the kernel; the magic prints no result."""
    notebook = nbformat.v4.new_notebook()
    notebook.cells = [nbformat.v4.new_code_cell(source) for source in ON_ITS_OWN]
    NotebookClient(
        notebook,
        timeout=300,
        kernel_name="python3",
        allow_errors=True,
        resources={"metadata": {"path": str(tmp_path)}},
    ).execute()
    cells = notebook.cells
    errors = [[o.ename for o in c.outputs if o.output_type == "error"] for c in cells]
    assert errors == [[], ["ModuleNotFoundError"], [], [], [], [], [], []]
    assert 'data-fc-status="verified"' in _html(cells[4]), "softmax, not attention"
    failed = _html(cells[5])
    assert 'data-fc-status="error"' in failed
    assert f"In [{cells[3].execution_count}]:2" in failed, re.findall(r"In \[\d+\]:-?\d+", failed)
    assert not re.search(r"In \[\d+\]:-\d", failed)
    assert 'data-fc-status="skipped"' in _html(cells[6])
    assert not any(o.output_type == "execute_result" for c in cells for o in c.outputs)
    assert "skipped" in "".join(o.get("text", "") for o in cells[7].outputs).lower()
