"""Index notation: sums, products and extrema over named indices, elements such as ``x_i``,
output subscripts, and definitions split over several statements, compiled and compared."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from formula_check.errors import FormulaCheckError
from formula_check.latex import (
    FormulaAgreement,
    LatexError,
    NotExecutable,
    check_against_oracle,
    compile_formula,
    default_symbols,
    parse_symbols,
)
from formula_check.oracles import get_oracle
from test_latex import agreement, oracle_case  # one way to run a formula against its oracle


def error(name: str, latex: str) -> LatexError:
    with pytest.raises(LatexError) as caught:
        agreement(name, latex)
    return caught.value


def caret_under(latex: str, error: LatexError) -> str:
    """The text the error's caret points at, from there to the end of the formula."""
    line, marks = error.caret().splitlines()
    assert line == latex, "the formulas below fit on one line"
    return latex[marks.index("^") :]


# Softmax as the textbooks write it ----------------------------------------------------------

SOFTMAX = r"\text{softmax}(x)_i = \frac{e^{x_i}}{\sum_j e^{x_j}}"
STABLE = r"\text{softmax}(x)_i = \frac{e^{x_i - \max_j x_j}}{\sum_k e^{x_k - \max_j x_j}}"


def test_the_textbook_softmax_agrees_with_the_oracle() -> None:
    result = agreement("softmax", SOFTMAX)
    assert result.ok, result.message
    assert result.max_abs <= 1e-12
    assert result.compiled == "softmax(x)[i] = exp(x[..., i]) / sum_j(exp(x[..., j]))"


def test_the_catalog_softmax_is_executable_now() -> None:
    assert agreement("softmax", get_oracle("softmax").latex).ok


@pytest.mark.parametrize(
    "latex",
    [
        SOFTMAX.replace(r"\sum_j", r"\sum_{j=1}^{m}"),
        SOFTMAX.replace(r"\sum_j", r"\sum_{j}"),
        SOFTMAX.replace(r"\sum_j", r"\sum\limits_{j=0}^{m-1}"),
        SOFTMAX.replace("e^{x_j}", r"\exp(x_j)").replace("e^{x_i}", r"\exp x_i"),
        SOFTMAX.replace(r"\text{softmax}(x)_i", "y_i"),
        SOFTMAX.replace(r"\text{softmax}", r"\operatorname{softmax}"),
        r"\frac{e^{x_i}}{\sum_j e^{x_j}}",  # no left side: i is the output's axis
        r"s(x)_i = \frac{e^{x_i}}{\sum_{j=1}^{m} e^{x_j}}",
    ],
)
def test_spellings_of_the_softmax_agree(latex: str) -> None:
    result = agreement("softmax", latex)
    assert result.ok, result.message


@pytest.mark.parametrize(
    ("edit", "latex"),
    [
        ("sum over the wrong axis", SOFTMAX.replace("e^{x_j}", "e^{x_{ji}}")),
        ("exp dropped in the denominator", SOFTMAX.replace("e^{x_j}", "x_j")),
        ("exp dropped in the numerator", SOFTMAX.replace("e^{x_i}", "x_i")),
        ("summing the wrong index", SOFTMAX.replace(r"\sum_j e^{x_j}", r"\sum_{j=1}^{m} e^{x_i}")),
        ("product for sum", SOFTMAX.replace(r"\sum", r"\prod")),
    ],
)
def test_a_wrong_softmax_differs(edit: str, latex: str) -> None:
    result = agreement("softmax", latex)
    assert not result.ok, edit
    assert result.max_abs > 1e-3
    assert "differs from the oracle" in result.message


def test_the_stable_softmax_with_max_agrees() -> None:
    result = agreement("softmax", STABLE)
    assert result.ok, result.message
    assert "max_j(x[..., j])" in result.compiled


def test_a_stable_softmax_shifted_only_above_differs() -> None:
    latex = STABLE.replace(r"e^{x_k - \max_j x_j}", "e^{x_k}")
    assert not agreement("softmax", latex).ok


def test_a_page_softmax_with_a_sum_is_the_one_an_attention_formula_calls() -> None:
    softmax_table, attention_table = default_symbols("softmax"), default_symbols("attention")
    assert softmax_table is not None and attention_table is not None
    attention = r"\text{Attention}(Q, K, V) = \text{softmax}\left(\frac{QK^T}{\sqrt{d_k}}\right)V"
    right = compile_formula(SOFTMAX, softmax_table)
    assert right.definition is not None and right.definition.name == "softmax"
    assert agreement("attention", attention, definitions={"softmax": right}).ok
    wrong = compile_formula(SOFTMAX.replace("e^{x_j}", "x_j"), softmax_table)
    assert not agreement("attention", attention, definitions={"softmax": wrong}).ok


# Softmax along a block's axis ---------------------------------------------------------------

BY_ROWS_AND_COLUMNS = r"\text{softmax}(x)_{ij} = \frac{e^{x_{ij}}}{\sum_k e^{x_{kj}}}"
"""A softmax whose indices name the axis it runs along: n, the columns of each (n, m) slice."""


def along(axis: int, latex: str, **kw: Any) -> FormulaAgreement:
    arrays, params = oracle_case("softmax")
    return check_against_oracle(latex, "softmax", arrays, {**params, "axis": axis}, **kw)


@pytest.mark.parametrize("axis", [-1, 2])
def test_a_softmax_over_the_last_axis_is_compiled_as_written(axis: int) -> None:
    result = along(axis, SOFTMAX)
    assert result.ok, result.message
    assert "along" not in result.compiled


@pytest.mark.parametrize(
    ("axis", "dim"), [(1, "n"), (-2, "n"), (0, "b"), (-3, "b")], ids=["1", "-2", "0", "-3"]
)
@pytest.mark.parametrize(
    "latex",
    [
        SOFTMAX,
        STABLE,
        r"\text{softmax}(x)",
        get_oracle("softmax").latex,
    ],
    ids=["textbook", "stable", "builtin", "catalog"],
)
def test_a_softmax_whose_indices_name_no_axis_runs_along_the_blocks_axis(
    axis: int, dim: str, latex: str
) -> None:
    """Not a false "differs": the formula is a function of a vector, the block says where."""
    result = along(axis, latex)
    assert result.ok, result.message
    line = f"(along {dim}, the block's axis={axis}, which the formula's indices do not name)"
    assert result.compiled.splitlines()[-1] == line


@pytest.mark.parametrize(
    ("edit", "latex"),
    [
        ("exp dropped in the denominator", SOFTMAX.replace("e^{x_j}", "x_j")),
        ("product for sum", SOFTMAX.replace(r"\sum", r"\prod")),
        ("summing the wrong index", SOFTMAX.replace(r"\sum_j e^{x_j}", r"\sum_{j=1}^{m} e^{x_i}")),
    ],
)
def test_a_wrong_softmax_along_the_blocks_axis_still_differs(edit: str, latex: str) -> None:
    result = along(1, latex)
    assert not result.ok, edit
    assert result.max_abs > 1e-3


def test_a_softmax_whose_indices_name_the_axis_is_taken_as_written() -> None:
    result = along(1, BY_ROWS_AND_COLUMNS)
    assert result.ok, result.message
    assert result.compiled == "softmax(x)[i, j] = exp(x[..., i, j]) / sum_k(exp(x[..., k, j]))"
    assert not along(-1, BY_ROWS_AND_COLUMNS).ok, "it sums over n, not m"
    assert not along(0, BY_ROWS_AND_COLUMNS).ok, "it sums over n, not b"


def test_a_sum_whose_upper_limit_names_the_last_axis_is_taken_as_written() -> None:
    latex = SOFTMAX.replace(r"\sum_j", r"\sum_{j=1}^{m}")
    assert along(-1, latex).ok
    result = along(1, latex)
    assert not result.ok, "its limit says m: the formula sums over m, the block over n"
    assert "along" not in result.compiled


def test_a_sum_whose_upper_limit_names_the_blocks_axis_runs_along_it() -> None:
    latex = SOFTMAX.replace(r"\sum_j", r"\sum_{j=1}^{n}")
    assert along(1, latex).ok
    for axis in (-1, 0):  # j runs along m (or b), and its limit says n: the error as written
        with pytest.raises(LatexError) as caught:
            along(axis, latex)
        message = "index j ranges over m here but over n at its sum's upper limit"
        assert caught.value.message == message


def test_declared_symbols_run_along_the_blocks_axis_too() -> None:
    table = parse_symbols("z: [b, n, m] = x")
    latex = r"\text{softmax}(z)_i = \frac{e^{z_i}}{\sum_j e^{z_j}}"
    assert along(1, latex, symbols=table).ok
    assert along(-1, latex, symbols=table).ok


# LayerNorm over several statements ----------------------------------------------------------

MU = r"\mu = \frac{1}{d}\sum_{i=1}^{d} x_i"
SIGMA = r"\sigma^2 = \frac{1}{d}\sum_{i=1}^{d} (x_i - \mu)^2"
LN = r"\mathrm{LN}(x) = \gamma \odot \frac{x - \mu}{\sqrt{\sigma^2 + \epsilon}} + \beta"


SQUARED = r"(x_i - \mu)^2"


def rows(*statements: str) -> str:
    """Statements one a row, as a display formula writes them."""
    return " \\\\\n".join(statements)


@pytest.mark.parametrize(
    "latex",
    [
        rows(MU, SIGMA, LN),
        f"{MU},\\quad {SIGMA},\\quad {LN}",
        f"{LN} \\quad \\text{{where}} \\quad {MU}, \\quad {SIGMA}",  # defined after use
        "\\begin{aligned}\n"
        + rows(*(part.replace(" = ", " &= ", 1) for part in (MU, SIGMA, LN)))
        + "\n\\end{aligned}",
        rows(
            MU.replace("d", "d_{model}"),
            SIGMA.replace("_{i=1}^{d}", "_i").replace("{d}", "{d_{model}}"),
            LN,
        ),
        rows(MU, SIGMA.replace(SQUARED, SQUARED[:-2] + SQUARED[:-2]), LN),
    ],
)
def test_layer_norm_split_over_statements_agrees(latex: str) -> None:
    result = agreement("layer_norm", latex)
    assert result.ok, result.message


def test_the_intermediates_read_as_where_lines() -> None:
    result = agreement("layer_norm", rows(MU, SIGMA, LN))
    assert result.compiled.splitlines() == [
        "LN(x) = gamma * (x - mu) / sqrt(sigma^2 + epsilon) + beta",
        "where mu = 1 / d * sum_i(x[..., i])",
        "where sigma^2 = 1 / d * sum_i((x[..., i] - mu) ^ 2)",
    ]


@pytest.mark.parametrize(
    ("edit", "latex"),
    [
        (
            "epsilon outside the sqrt",
            rows(
                MU, SIGMA, LN.replace(r"\sqrt{\sigma^2 + \epsilon}", r"\sqrt{\sigma^2} + \epsilon")
            ),
        ),
        ("mean over d + 1", rows(MU.replace("{d}", "{d + 1}", 1), SIGMA, LN)),
        ("variance not squared", rows(MU, SIGMA.replace(SQUARED, SQUARED[:-2]), LN)),
        ("sigma for sigma^2", rows(MU, SIGMA, LN.replace("sigma^2", "sigma"))),
    ],
)
def test_a_wrong_layer_norm_differs(edit: str, latex: str) -> None:
    result = agreement("layer_norm", latex)
    assert not result.ok, edit
    assert result.max_abs > 1e-9


def test_an_intermediate_nothing_uses_is_an_output() -> None:
    result = agreement("layer_norm", MU)
    assert not result.ok
    assert result.output == "\\mu"
    assert "does not have the oracle's dims" in result.message


def test_a_page_layer_norm_written_out_is_the_one_a_sublayer_formula_calls() -> None:
    table = default_symbols("layer_norm")
    assert table is not None
    name = LN.replace(r"\mathrm{LN}", r"\text{LayerNorm}")
    right = compile_formula(rows(MU, SIGMA, name), table)
    assert right.definition is not None and len(right.definition.where) == 2
    post = r"\text{LayerNorm}(x + \text{FFN}(x))"
    result = agreement("sublayer", post, definitions={"LayerNorm": right})
    assert result.ok, result.message
    assert result.compiled == "LayerNorm(x + Sublayer(x))"
    wrong = compile_formula(rows(MU, SIGMA, name.replace("+ \\epsilon}", "} + \\epsilon")), table)
    assert not agreement("sublayer", post, definitions={"LayerNorm": wrong}).ok


# Attention element by element ---------------------------------------------------------------

SCORES = r"s_{ij} = \frac{1}{\sqrt{d_k}} \sum_l Q_{il} K_{jl}"
WEIGHTS = r"\alpha_{ij} = \frac{e^{s_{ij}}}{\sum_k e^{s_{ik}}}"
OUTPUT = r"\text{Attention}(Q, K, V)_{il} = \sum_j \alpha_{ij} V_{jl}"
ELEMENTWISE = f"{SCORES}, \\quad {WEIGHTS}, \\quad {OUTPUT}"


def test_attention_written_element_by_element_agrees() -> None:
    result = agreement("attention", ELEMENTWISE)
    assert result.ok, result.message
    assert result.compiled.splitlines()[0] == (
        "Attention(Q, K, V)[i, l] = sum_j(alpha[..., i, j] * V[..., j, l])"
    )


def test_masked_attention_element_by_element_agrees() -> None:
    masked = ELEMENTWISE.replace(r"K_{jl}", r"K_{jl} + M_{ij}")
    assert agreement("attention", masked, mask=True).ok
    assert not agreement("attention", ELEMENTWISE, mask=True).ok


@pytest.mark.parametrize(
    ("edit", "latex"),
    [
        ("normalised over the queries", ELEMENTWISE.replace("e^{s_{ik}}", "e^{s_{kj}}")),
        ("no scaling", ELEMENTWISE.replace(r"\frac{1}{\sqrt{d_k}}", "")),
        ("no exp", ELEMENTWISE.replace("e^{s_{ij}}", "s_{ij}").replace("e^{s_{ik}}", "s_{ik}")),
        ("max for sum", ELEMENTWISE.replace(r"\sum_j", r"\max_j")),
    ],
)
def test_a_wrong_elementwise_attention_differs(edit: str, latex: str) -> None:
    result = agreement("attention", latex)
    assert not result.ok, edit
    assert result.max_abs > 1e-6


def test_values_indexed_by_the_query_are_an_error() -> None:
    latex = ELEMENTWISE.replace("V_{jl}", "V_{il}")
    caught = error("attention", latex)
    first = latex.index(r"\alpha_{ij} V") + len(r"\alpha_{")
    assert caught.message == f"index i ranges over m here but over n at column {first + 1}"
    assert caught.column == latex.index("V_{il}") + len("V_{")


def test_a_matrix_product_written_with_indices_agrees() -> None:
    result = agreement("linear", r"Q_{ik} = \sum_j X_{ij} (W_Q)_{jk}")
    assert result.ok, result.message
    assert result.compiled == "Q[i, k] = sum_j(X[..., i, j] * W_Q[j, k])"
    assert not agreement("linear", r"Q_{ik} = \max_j X_{ij} (W_Q)_{jk}").ok


def test_rms_norm_with_declared_symbols_matches_numpy() -> None:
    table = parse_symbols(r"x: [b, n, d_model]; g: [d_model] = gain; \epsilon: scalar = 1e-6")
    latex = (
        r"\text{RMSNorm}(x) = \frac{x}{\sqrt{\frac{1}{d}\sum_{i=1}^{d} x_i^2 + \epsilon}} \odot g"
    )
    rng = np.random.default_rng(2)
    x, gain = rng.standard_normal((2, 4, 10)), rng.standard_normal(10)
    value = compile_formula(latex, table).evaluate({"x": x, "gain": gain}, {"d_model": 10})
    expected = gain * x / np.sqrt(np.mean(x**2, axis=-1, keepdims=True) + 1e-6)
    np.testing.assert_allclose(value, expected, rtol=1e-12)


# Errors: each with a message and a caret ----------------------------------------------------


@pytest.mark.parametrize(
    ("name", "latex", "message", "at"),
    [
        (
            "softmax",
            r"\text{softmax}(x)_i = \frac{e^{x_i}}{\sum_j e^{x_i}}",
            r"j does not occur in what \sum runs over, so its range is unknown: "
            r"write \sum_{j=1}^{m}",
            "j e^{x_i}}",
        ),
        (
            "softmax",
            r"y_i = x_j",
            "index i on the left does not occur on the right, so its range is unknown",
            "i = x_j",
        ),
        (
            "softmax",
            r"y_i = x_i + x_j",
            "index j is free on the right: write it on the left or sum over it",
            "j",
        ),
        (
            "attention",
            r"Q_{ij} + V_{ij}",
            "index i ranges over m here but over n at column 4",
            "ij}",
        ),
        (
            "attention",
            r"\sum_{i=1}^{d_v} Q_i",
            "index i ranges over d_k here but over d_v at its sum's upper limit",
            "i",
        ),
        (
            "softmax",
            r"\sum_j x_{ijkl}",
            "4 indices for a matrix (b, n, m): it has 3 dims to index",
            "ijkl}",
        ),
        (
            "softmax",
            r"\sum_{i=1}^{4} x_i",
            r"the upper limit names a dim's size, as in "
            r"\sum_{i=1}^{m}",
            "4} x_i",
        ),
        (
            "softmax",
            r"\sum_{i=1} x_i",
            r"give the upper limit too, as in \sum_{i=1}^{m}",
            r"\sum_{i=1} x_i",
        ),
        ("softmax", r"\sum_n x_n", "n is a declared name, not a free index", "n x_n"),
        ("softmax", r"\sum x_j", r"\sum needs its index below it, as in \sum_j", r"\sum x_j"),
        ("softmax", r"y_i = x_{ii}", "index i indexes this value twice", "i}"),
        (
            "softmax",
            r"\sum_{j=1}^{d}\sum_{k=1}^{d} x_{jk}",
            "d is the size of m in one sum and of n here",
            r"\sum_{j=1}^{d}\sum_{k=1}^{d} x_{jk}",
        ),
        (
            "softmax",
            r"\frac{1}{d} x",
            "undeclared name 'd'; declare it: symbols=\"d: [axes] = array\" (its axes, and the "
            "oracle's array it reads)",
            "d} x",
        ),
        (
            "softmax",
            r"\text{softmax}(x_i)",
            "softmax needs a vector or a matrix, got scalar (b, n, i)",
            r"\text{softmax}(x_i)",
        ),
    ],
)
def test_an_index_mistake_is_an_error_with_a_caret(
    name: str, latex: str, message: str, at: str
) -> None:
    caught = error(name, latex)
    assert caught.message == message
    assert caret_under(latex, caught) == at


def test_an_index_mistake_in_a_later_row_points_into_that_row() -> None:
    latex = rows(MU, SIGMA.replace("x_i - ", "x_j - "), LN)
    caught = error("layer_norm", latex)
    assert caught.message == "index j is free on the right: write it on the left or sum over it"
    assert caught.column == latex.index("x_j") + len("x_")


@pytest.mark.parametrize(
    ("latex", "reason"),
    [
        (
            r"\sum_{i=2}^{m} x_i",
            r"\sum over part of a dim (limits other than 1 .. m or 0 .. m-1) "
            "is outside the executable subset",
        ),
        (r"\sum_{j \le m} x_j", r"\sum under a condition (\le) is outside the executable subset"),
        (r"\begin{cases} x \end{cases}", r"\begin{cases} is outside the executable subset"),
    ],
)
def test_a_sum_outside_the_subset_is_not_executable(latex: str, reason: str) -> None:
    with pytest.raises(NotExecutable) as caught:
        agreement("softmax", latex)
    assert caught.value.reason == reason


# Whatever a page holds: compiled, or refused by our own error -------------------------------

PIECES = (
    *(r"\sum_j ", r"\sum_{j=1}^{d} ", r"\prod_k ", r"\max_j ", r"\min_{k} ", r"\sum_{i,j} "),
    *(r"\sum_{j=0}^{m-1} ", r"\sum_{ij} ", "x_i", "x_j", "x_{ij}", "x_{i,j}", "e^{x_i}", r"\mu"),
    *(r"\sigma^2", r"\mu = ", r"\sigma^2 = ", "y_i = ", r"\text{softmax}(x)_i = ", r"\frac{1}{d}"),
    *(r"\gamma", r"\beta", r"\epsilon", r"\alpha_{ij}", r"\alpha_{ij} = ", "d", r" \\ ", "_i"),
    *(r"\limits", r"(x_i - \mu)^2", "s_{ij} = ", "s_{ik}", "+", "-", "(", ")", "{", "}", "^2"),
    *(r"\begin{aligned}", r"\end{aligned}", "&", "=", ",", "m", "n", r"\mathrm{LN}(x) = "),
)


@settings(
    max_examples=300,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow],
)
@example(latex=r"\sum_j\sum_j x_j")
@example(latex=r"y_i = \sum_{i,j} x_{ij}")
@example(latex=r"a = b, b = a")
@given(latex=st.lists(st.sampled_from(PIECES), max_size=30).map("".join))
def test_index_notation_soup_compiles_or_is_refused_by_our_own_error(latex: str) -> None:
    arrays, params = oracle_case("layer_norm")
    try:
        with np.errstate(all="ignore"):
            result = check_against_oracle(latex, "layer_norm", arrays, params)
    except FormulaCheckError:
        return
    assert isinstance(result.ok, bool)
