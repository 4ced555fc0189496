"""Properties over anything a page may hold: the header parser, the fence scanner and the LaTeX
compiler either give a result or raise one of our own errors, never another exception, and
each example ends in bounded time (the deadline) whatever its nesting or length.

The strategies lean towards what breaks parsers: deep nesting, long inputs, arbitrary Unicode,
and sequences of the very tokens the grammar knows, in any order.
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any

import numpy as np
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from formula_check.errors import FormulaCheckError
from formula_check.latex import check_against_oracle, compile_formula, default_symbols
from formula_check.latex.parser import parse
from formula_check.model import Location
from formula_check.oracles import get_oracle
from formula_check.pages.blocks import Settings, decode_page, page_blocks, source_blocks
from formula_check.pages.fence_scan import find_formulas
from formula_check.pages.fences import parse_header, parse_options

PROPERTY = settings(
    max_examples=120,
    deadline=timedelta(seconds=2),  # generous for 2 shared cores; a hang still fails
    database=None,  # nothing written into the working tree
    suppress_health_check=[HealthCheck.too_slow],
)
PROJECT = Settings(Path(__file__).resolve().parent / "snippets")
WHERE = Location("docs/p.md", 3)

# -- LaTeX: the grammar's own tokens in any order, nested deep, or plain noise -----------------

LATEX_PIECES = (
    *"xyQKVWbhnim0123456789",
    *"+-*/=,;.()[]{}^_|'<>&~%",
    *("\\frac", "\\sqrt", "\\sqrt[3]", "\\cdot", "\\times", "\\odot", "\\top", "\\mathsf{T}"),
    *("\\left(", "\\right)", "\\left.", "\\Big[", "\\{", "\\}", "\\lbrace", "\\\\", "\\,"),
    *("\\text{softmax}", "\\text{where}", "\\operatorname*{Concat}", "\\text{", "\\mathrm{"),
    *("\\text{Attention}(Q, K, V)", "\\max", "\\exp", "\\log", "\\sum", "\\dots", "\\alpha"),
    *("d_k", "d_{model}", "W_i^Q", "head_i", "K^T", "x_{i}", "e^{x}", "1.5", "\\", " ", "\n"),
)
GROUPS = (("{", "}"), ("(", ")"), ("\\frac{", "}{2}"), ("\\left(", "\\right)"), ("e^{", "}"))

token_soup = st.lists(st.sampled_from(LATEX_PIECES), max_size=80).map("".join)


@st.composite
def deep_formulas(draw: st.DrawFn) -> str:
    """A random formula wrapped in up to 300 groups, closed or not."""
    opener, closer = draw(st.sampled_from(GROUPS))
    depth = draw(st.sampled_from([1, 49, 50, 51, 141, 300]) | st.integers(0, 300))
    unclosed = draw(st.integers(0, depth))
    return opener * depth + draw(token_soup) + closer * (depth - unclosed)


@st.composite
def long_chains(draw: st.DrawFn) -> str:
    """A sum, product or chain of signs of up to 1000 terms."""
    operator = draw(st.sampled_from([" + ", " - ", " ", " \\cdot ", " / ", "-"]))
    terms = draw(st.sampled_from([199, 200, 201, 496, 1000]) | st.integers(1, 1000))
    return operator.join(["x"] * terms)


formulas = st.one_of(
    token_soup,
    deep_formulas(),
    long_chains(),
    st.text(max_size=200),
    st.text("\\{}^_x", min_size=1),
)

ORACLES = ("softmax", "attention", "layer_norm")


def _arrays(oracle_name: str) -> tuple[dict[str, Any], dict[str, Any]]:
    oracle = get_oracle(oracle_name)
    params = dict(oracle.params)
    sizes = oracle.resolve_dims({}, params)
    params.update(sizes)
    rng = np.random.default_rng(0)
    return {**oracle.make_inputs(sizes, rng, params), **oracle.make_weights(sizes, rng)}, params


ARRAYS = {name: _arrays(name) for name in ORACLES}


@PROPERTY
@example(latex="1.51.5", oracle="softmax")  # found by this test: two decimal points
@given(latex=formulas, oracle=st.sampled_from(ORACLES))
def test_any_formula_compiles_or_is_refused_by_our_own_error(latex: str, oracle: str) -> None:
    table = default_symbols(oracle, ARRAYS[oracle][1])
    assert table is not None
    try:
        compiled = compile_formula(latex, table)
    except FormulaCheckError:
        return
    assert compiled.outputs
    assert len(compiled.describe()) <= 2_100


@PROPERTY
@given(latex=formulas, oracle=st.sampled_from(ORACLES))
def test_any_formula_is_compared_with_its_oracle_or_refused(latex: str, oracle: str) -> None:
    arrays, params = ARRAYS[oracle]
    try:
        with np.errstate(all="ignore"):  # a random formula may overflow: a value, not a fault
            agreement = check_against_oracle(latex, oracle, arrays, params)
    except FormulaCheckError:
        return
    assert isinstance(agreement.ok, bool)


@PROPERTY
@given(
    latex=st.text(min_size=1, max_size=20).map(lambda t: t * (10_001 // len(t) + 1))
    | deep_formulas()
)
def test_the_parser_itself_never_overflows_the_stack(latex: str) -> None:
    try:
        assert parse(latex)
    except FormulaCheckError as error:
        assert len(error.message) <= 2_100


# -- headers: key="value" pairs, near misses and noise ---------------------------------------

keys = st.sampled_from(["id", "oracle", "code", "seed", "dims", "atol", "timing", "mask", "idd"])
values = st.one_of(
    st.text(max_size=40),
    st.integers(-(2**70), 2**70).map(str),
    st.sampled_from(["softmax", "attention", "b=2 n=5", "1e-5", "off", "nan", "inf", "-0"]),
)
quoted = st.tuples(keys, st.sampled_from(['"', "'", ""]), values).map(
    lambda kqv: f"{kqv[0]}={kqv[1]}{kqv[2]}{kqv[1]}"
)
headers = st.one_of(st.lists(quoted, max_size=8).map(" ".join), st.text(max_size=300))


@PROPERTY
@given(header=headers)
def test_any_header_is_parsed_or_refused_by_our_own_error(header: str) -> None:
    try:
        options = parse_options(parse_header(header, WHERE), WHERE)
    except FormulaCheckError as error:
        assert error.location == WHERE
        return
    assert isinstance(options, dict)


# -- pages: fences of every kind and length, any bytes -----------------------------------------

LINE_PIECES = (
    "```formula",
    "```{.formula}",
    "~~~formula",
    "````markdown",
    "```python",
    "```",
    "````",
    "~~~",
    "> ```formula",
    "    ```",
    "---",
    "formula_check:",
    "  seed: 3",
    '```formula id="a" oracle="softmax"',
    '```formula oracle="softmax" code="snippets/attention.py:scaled_dot_product_attention"',
    "\\text{softmax}(x)",
    "def softmax(x):",
    "    return x",
    "",
)
line = st.one_of(st.sampled_from(LINE_PIECES), st.text(max_size=60))
pages = st.lists(line, max_size=40)


@PROPERTY
@given(lines=pages, padding=st.integers(0, 20_000))
def test_any_page_gives_blocks_each_with_a_spec_or_its_error(
    lines: list[str], padding: int
) -> None:
    if lines:
        lines[0] += " " * padding  # a long fence line: the scanner stays linear
    for formula in find_formulas(lines):
        assert formula.line >= 1
    for block in page_blocks(lines, page="docs/p.md", settings=PROJECT):
        assert (block.spec is None) != (block.error is None)


@PROPERTY
@given(
    data=st.binary(max_size=400) | pages.map(lambda ls: "\n".join(ls).encode("latin-1", "replace"))
)
def test_any_bytes_make_a_page_whose_problem_is_its_own_error(data: bytes) -> None:
    page = decode_page(data, "docs/p.md")
    blocks = source_blocks(page, page="docs/p.md", settings=PROJECT)
    if page.problem is not None:
        assert blocks[0].block_id == "encoding"
        assert blocks[0].location.path == "docs/p.md"
    for block in blocks:
        assert (block.spec is None) != (block.error is None)
