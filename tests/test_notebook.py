"""The ``%%formula`` magic in a real kernel: a notebook executed by nbclient, its outputs read.

The kernel runs each cell as Jupyter would; the magic's checks run in our worker processes.
"""

from __future__ import annotations

import re

import nbformat
import pytest
from nbclient import NotebookClient

from formula_check.notebook import block_page, definitions, split_magic_options

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
    assert (header, latex, strict) == ('id="sm" oracle="softmax"   seed=3', SOFTMAX_LATEX, True)
    assert split_magic_options('oracle="softmax"') == ('oracle="softmax"', "", False)


def test_only_imports_functions_and_classes_of_earlier_cells_are_kept() -> None:
    cells = [
        "import numpy as np\nx = np.ones(3)\nfor _ in range(10**9): pass\n",
        "@staticmethod\ndef helper(x):\n    return x\n",
        "def broken(:\n",
        "class Layer:\n    pass\nprint('hi')\n",
    ]
    kept = definitions(cells)
    assert (
        kept
        == "import numpy as np\n\n@staticmethod\ndef helper(x):\n    return x\n\nclass Layer:\n    pass"
    )


def test_the_code_keeps_the_cells_line_numbers() -> None:
    lines, offset = block_page(
        'oracle="softmax"', "", "import numpy as np", "def f(x):\n    return x"
    )
    body_row = lines.index("def f(x):")
    # page_blocks reads the python fence's first code line as offset + fence row + 2
    fence_row = lines.index("```python")
    first_code_line = offset + fence_row + 2
    assert first_code_line + (body_row - fence_row - 1) == 2, (
        "the cell's line 2 (line 1 is %%formula)"
    )


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
