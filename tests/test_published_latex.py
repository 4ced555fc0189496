r"""Formulas in the styles the public texts print them, written for these tests.

*Dive into Deep Learning* writes bold upright names (``\mathbf{Q}``, ``\textrm{LN}``), shape
declarations (``\mathbf{Q} \in \mathbb{R}^{n \times d}``), ``d`` for the key width and
``\begin{aligned}`` blocks; the TensorFlow tutorial wraps whole equations in ``\Large{…}``
and writes ``d_{model}`` in italics; Keras examples name layers (``LayerNorm``). Every
formula here is also checked when it is wrong: a formula that differs from the oracle must
still be caught.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from typing import Any

import numpy as np
import pytest

from formula_check.latex import (
    FormulaAgreement,
    LatexError,
    NotExecutable,
    check_against_oracle,
    compare_with_oracle,
    compile_formula,
    parse_symbols,
)
from formula_check.latex.agreement import oracle_symbols
from formula_check.model import Array
from formula_check.oracles import Oracle, TensorSpec
from test_latex import agreement, oracle_case

# Upright names: a function by its exact name, never a product of letters or another function


@pytest.mark.parametrize("command", ["textrm", "text", "mathrm", "operatorname"])
def test_an_upright_ln_is_layer_normalisation_where_the_oracle_has_one(command: str) -> None:
    result = agreement("sublayer", rf"\{command}{{LN}}(x + \{command}{{Sublayer}}(x))")
    assert result.ok, result.message
    assert result.compiled == "LayerNorm(x + Sublayer(x))"


@pytest.mark.parametrize(
    "latex",
    [
        r"\textrm{LN}(x) + \textrm{Sublayer}(x)",  # the sum left outside the normalisation
        r"\textrm{LN}(\textrm{Sublayer}(x))",  # no residual connection
        r"x + \textrm{Sublayer}(\textrm{LN}(x))",  # pre-norm, for a post-norm block
    ],
)
def test_a_wrong_post_norm_written_with_ln_is_caught(latex: str) -> None:
    result = agreement("sublayer", latex)
    assert not result.ok
    assert result.max_abs > 1e-3
    assert "log" not in result.compiled


def test_pre_norm_written_with_ln_matches_a_pre_norm_block() -> None:
    arrays, params = oracle_case("sublayer")
    latex = r"x + \textrm{Sublayer}(\textrm{LN}(x))"
    result = check_against_oracle(latex, "sublayer", arrays, {**params, "norm": "pre"})
    assert result.ok, result.message


@pytest.mark.parametrize("name", ["LN", "LayerNorm"])
def test_ln_where_the_oracle_has_no_layer_norm_is_not_executable(name: str) -> None:
    with pytest.raises(NotExecutable) as caught:
        agreement("ffn", rf"\mathrm{{{name}}}(xW_1)")
    assert caught.value.reason == (
        f"unknown function {name}: layer normalisation, which this oracle's symbols do not define"
    )


@pytest.mark.parametrize(
    ("latex", "compiled"),
    [
        (r"\ln(x + \text{Sublayer}(x))", "log(x + Sublayer(x))"),
        (r"\log(x + \text{Sublayer}(x))", "log(x + Sublayer(x))"),
        (r"\exp(x + \text{Sublayer}(x))", "exp(x + Sublayer(x))"),
    ],
)
def test_the_real_log_and_exp_still_compile_and_differ(latex: str, compiled: str) -> None:
    result = agreement("sublayer", latex)
    assert result.compiled == compiled
    assert not result.ok


@pytest.mark.parametrize("name", ["Ln", "Exp", "Log", "SQRT", "Tanh", "Sin"])
def test_a_builtin_name_in_another_case_is_not_that_builtin(name: str) -> None:
    with pytest.raises(LatexError) as caught:
        agreement("ffn", rf"\text{{{name}}}(xW_1)")
    assert caught.value.message == f"unknown function {name!r}: define it in an earlier block"


@pytest.mark.parametrize("name", ["ReLU", "relu", "Relu"])
def test_relu_is_read_in_its_usual_spellings(name: str) -> None:
    right = agreement("ffn", rf"\text{{FFN}}(x) = \text{{{name}}}(xW_1 + b_1)W_2 + b_2")
    assert right.ok, right.message
    wrong = agreement("ffn", rf"\text{{FFN}}(x) = \text{{{name}}}(xW_1 + b_1)W_2")
    assert not wrong.ok


def test_an_applied_undeclared_sigma_is_the_sigmoid() -> None:
    # A gated feed-forward would be a different oracle; the sigmoid is told from a product
    # by comparing: \sigma applied where the FFN has a ReLU must differ.
    result = agreement("ffn", r"\text{FFN}(x) = \sigma(xW_1 + b_1)W_2 + b_2")
    assert result.compiled.startswith("FFN(x) = matmul(sigmoid(")
    assert not result.ok


def test_a_declared_sigma_applied_is_a_product() -> None:
    # layer_norm declares \sigma (the spread): \sigma(x - \mu) multiplies, it is no sigmoid.
    result = agreement("layer_norm", r"\gamma \odot \frac{x - \mu}{\sigma(1)} + \beta")
    assert "sigmoid" not in result.compiled


# Formulas in the published styles, each with a wrong twin ---------------------------------

D2L_ATTENTION = (
    r"\mathrm{softmax}\left(\frac{\mathbf{Q}\mathbf{K}^\top}{\sqrt{d}}\right)\mathbf{V}"
    r" \in \mathbb{R}^{n \times v}"
)
D2L_DECLARED = (
    r"\mathbf{Q} \in \mathbb{R}^{n \times d},\ \mathbf{K} \in \mathbb{R}^{m \times d},\ "
    r"\mathbf{V} \in \mathbb{R}^{m \times v} \qquad "
    r"\textrm{softmax}\left(\mathbf{Q}\mathbf{K}^\top / \sqrt{d}\right)\mathbf{V}"
)
D2L_PE = (
    "\\begin{aligned}\n"
    r"p_{i, 2j} &= \sin\left(\frac{i}{10000^{2j/d}}\right),\\" + "\n"
    r"p_{i, 2j+1} &= \cos\left(\frac{i}{10000^{2j/d}}\right)." + "\n"
    "\\end{aligned}"
)
D2L_PE_SYMBOLS = "p: output [n, d_model]; i: range(n); j: range(d_model / 2); d = d_model"
TF_PE = (
    r"\Large{PE_{(pos, 2i)} = \sin(pos / 10000^{2i / d_{model}})}" + "\n"
    r"\Large{PE_{(pos, 2i+1)} = \cos(pos / 10000^{2i / d_{model}})}"
)
TF_ATTENTION = r"\Large{Attention(Q, K, V) = softmax_k\left(\frac{QK^T}{\sqrt{d_k}}\right) V}"

PUBLISHED = [
    # (style, oracle, formula as published, symbols=, the same formula gone wrong)
    (
        "d2l attention, d for d_k",
        "attention",
        D2L_ATTENTION,
        "d = d_k",
        D2L_ATTENTION.replace(r"{\sqrt{d}}", "{d}"),
    ),
    (
        "d2l attention with its shape declarations",
        "attention",
        D2L_DECLARED,
        "",
        D2L_DECLARED.replace(r"\mathbf{K}^\top / \sqrt{d}", r"\mathbf{K}^\top"),
    ),
    ("d2l positional encoding", "positional_encoding", D2L_PE, D2L_PE_SYMBOLS, D2L_PE[::-1]),
    (
        "d2l post-norm",
        "sublayer",
        r"\textrm{LN}(\mathbf{x} + \textrm{sublayer}(\mathbf{x}))",
        "",
        r"\mathbf{x} + \textrm{LN}(\textrm{sublayer}(\mathbf{x}))",
    ),
    (
        "d2l post-norm with shapes",
        "sublayer",
        r"\mathbf{x} \in \mathbb{R}^d \qquad \textrm{LN}(\mathbf{x} + \textrm{sublayer}(\mathbf{x}))"
        r" \in \mathbb{R}^d",
        "",
        r"\mathbf{x} \in \mathbb{R}^d \qquad \textrm{LN}(\textrm{sublayer}(\mathbf{x}))",
    ),
    ("tensorflow positional encoding", "positional_encoding", TF_PE, "", TF_PE[::-1]),
    (
        "tensorflow attention",
        "attention",
        TF_ATTENTION,
        "",
        TF_ATTENTION.replace("softmax_k", "softmax_q"),
    ),
    (
        "keras post-norm block",
        "sublayer",
        r"\text{LayerNorm}(x + \text{FFN}(x))",
        "",
        r"\text{LayerNorm}(x) + \text{FFN}(x)",
    ),
    (
        "keras feed-forward",
        "ffn",
        r"\text{FFN}(x) = \text{ReLU}(xW_1 + b_1)W_2 + b_2",
        "",
        r"\text{FFN}(x) = \text{ReLU}(xW_1)W_2 + b_2",
    ),
]


def _checked(oracle: str, latex: str, symbols: str, **params: object) -> FormulaAgreement:
    arrays, sizes = oracle_case(oracle)
    table = parse_symbols(symbols) if symbols else None
    return check_against_oracle(latex, oracle, arrays, {**sizes, **params}, symbols=table)


@pytest.mark.parametrize(
    ("oracle", "latex", "symbols"),
    [pytest.param(o, latex, s, id=style) for style, o, latex, s, _ in PUBLISHED],
)
def test_a_formula_in_a_published_style_compiles_and_agrees(
    oracle: str, latex: str, symbols: str
) -> None:
    result = _checked(oracle, latex, symbols)
    assert result.ok, result.message


@pytest.mark.parametrize(
    ("oracle", "wrong", "symbols"),
    [pytest.param(o, wrong, s, id=style) for style, o, _, s, wrong in PUBLISHED],
)
def test_a_published_style_gone_wrong_is_caught(oracle: str, wrong: str, symbols: str) -> None:
    if wrong.startswith("}"):  # a reversed formula: nonsense must not pass either
        with pytest.raises((LatexError, NotExecutable)):
            _checked(oracle, wrong, symbols)
        return
    result = _checked(oracle, wrong, symbols)
    assert not result.ok
    assert result.max_abs > 1e-3


def test_a_swapped_sine_in_the_tensorflow_style_is_caught() -> None:
    result = _checked("positional_encoding", TF_PE.replace(r"\cos", r"\sin"), "")
    assert not result.ok


def test_a_swapped_sine_in_the_aligned_style_is_caught() -> None:
    swapped = D2L_PE.replace(r"\sin", "SIN").replace(r"\cos", r"\sin").replace("SIN", r"\cos")
    assert not _checked("positional_encoding", swapped, D2L_PE_SYMBOLS).ok


# Size commands ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "latex",
    [
        r"\Large{O = \mathrm{softmax}(QK^\top / \sqrt{d_k}) V}",
        r"{\large O = \mathrm{softmax}(QK^\top / \sqrt{d_k}) V}",
        r"\small O = \mathrm{softmax}(QK^\top / \sqrt{d_k}) \huge V",
    ],
)
def test_a_size_command_is_ignored_with_its_group(latex: str) -> None:
    assert _checked("attention", latex, "").ok


def test_a_sized_group_keeps_its_meaning() -> None:
    # \Large{QK^\top} is a group: the scale still divides the whole product
    assert not _checked("attention", r"\mathrm{softmax}(\Large{QK^\top}) V", "").ok


# Statements side by side ----------------------------------------------------------------------


@pytest.mark.parametrize("space", [r"\quad", r"\qquad", "\n", r",\quad"])
def test_two_equations_side_by_side_are_two_statements(space: str) -> None:
    latex = rf"A = QK^\top / \sqrt{{d_k}} {space} O = \mathrm{{softmax}}(A) V"
    result = _checked("attention", latex, "")
    assert result.ok, result.message
    assert "where A = " in result.compiled


@pytest.mark.parametrize("space", [r"\quad", "\n"])
def test_a_wide_space_inside_one_equation_is_space(space: str) -> None:
    latex = rf"O = \mathrm{{softmax}}\left(\frac{{QK^\top}}{{\sqrt{{d_k}}}}\right) {space} V"
    result = _checked("attention", latex, "")
    assert result.ok, result.message


def test_side_by_side_equations_are_each_checked() -> None:
    latex = r"A = QK^\top \qquad O = \mathrm{softmax}(A) V"
    assert not _checked("attention", latex, "").ok


# Decorated names ------------------------------------------------------------------------------


def test_a_decorated_name_is_a_name_of_its_own() -> None:
    result = _checked("ffn", r"\hat{y} = \max(0, xW_1 + b_1)W_2 + b_2", "")
    assert result.ok, result.message
    with pytest.raises(LatexError) as caught:
        _checked("ffn", r"\max(0, \hat{x}W_1 + b_1)W_2 + b_2", "")
    assert caught.value.message.startswith("undeclared name '\\hat{x}'; declare it: ")


def test_a_decorated_name_may_be_declared_as_another_name() -> None:
    latex = r"\mathrm{softmax}(\tilde{Q}K^\top / \sqrt{d_k}) V"
    assert _checked("attention", latex, r"\tilde{Q} = Q").ok
    wrong = _checked("attention", latex, r"\tilde{Q} = K")  # rows of K: m, not n
    assert not wrong.ok


# Shapes ---------------------------------------------------------------------------------------


def test_a_shape_declaration_names_a_dim() -> None:
    latex = (
        r"\mathbf{V} \in \mathbb{R}^{m \times e} \qquad \mathrm{softmax}(QK^\top / \sqrt{d_k}) V"
    )
    result = _checked("attention", latex, "")
    assert result.ok, result.message


def test_a_shape_that_contradicts_the_symbol_is_an_error() -> None:
    latex = r"\mathbf{K} \in \mathbb{R}^{n \times d} \qquad \mathrm{softmax}(QK^\top) V"
    with pytest.raises(LatexError) as caught:
        _checked("attention", latex, "")
    assert caught.value.message == "K is (b, m, d_k): its axis m is not n"
    assert caught.value.column == latex.index("n \\times")


def test_a_result_shape_that_contradicts_the_result_is_an_error() -> None:
    latex = r"\mathrm{softmax}(QK^\top / \sqrt{d_k}) V \in \mathbb{R}^{n \times d_k}"
    with pytest.raises(LatexError) as caught:
        _checked("attention", latex, "")
    assert caught.value.message == "the result is (b, n, d_v): its axis d_v is not d_k"


def test_one_letter_for_two_dims_is_an_error() -> None:
    latex = (
        r"\mathbf{Q} \in \mathbb{R}^{n \times d}, \mathbf{V} \in \mathbb{R}^{m \times d}"
        r" \qquad \mathrm{softmax}(QK^\top / \sqrt{d}) V"
    )
    with pytest.raises(LatexError) as caught:
        _checked("attention", latex, "")
    assert caught.value.message == "V is (b, m, d_v): its axis d_v is not d"


def test_only_shapes_is_an_error() -> None:
    with pytest.raises(LatexError) as caught:
        _checked("attention", r"\mathbf{Q} \in \mathbb{R}^{n \times d_k}", "")
    assert caught.value.message == "the formula only states shapes: add what it computes"


@pytest.mark.parametrize(
    ("latex", "reason"),
    [
        (
            r"Q \in \mathbb{Z}^{n}, \mathrm{softmax}(QK^\top) V",
            r"membership of a set other than \mathbb{R} is not a shape",
        ),
        (r"Q \in S, \mathrm{softmax}(QK^\top) V", r"\in is outside the executable subset"),
    ],
)
def test_membership_of_another_set_is_not_executable(latex: str, reason: str) -> None:
    with pytest.raises(NotExecutable) as caught:
        _checked("attention", latex, "")
    assert caught.value.reason == reason


# A function's subscript -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("latex", "compiled"),
    [
        (r"\mathrm{softmax}_k(QK^\top / \sqrt{d_k}) V", "softmax_m("),  # the rows of K
        (r"\mathrm{softmax}_m(QK^\top / \sqrt{d_k}) V", "softmax_m("),  # a dim
        (r"\mathrm{softmax}_e(QK^\top / \sqrt{d_k}) V", "softmax_m("),  # e = m declared
        (
            r"O_{il} = \sum_j \mathrm{softmax}_j\left(\frac{\sum_c Q_{ic} K_{jc}}{\sqrt{d_k}}"
            r"\right) V_{jl}",
            "softmax_j(",
        ),
    ],
)
def test_a_softmax_subscript_names_its_axis(latex: str, compiled: str) -> None:
    result = _checked("attention", latex, "e = m")
    assert result.ok, result.message
    assert compiled in result.compiled


@pytest.mark.parametrize(
    "latex",
    [
        r"\mathrm{softmax}_q(QK^\top / \sqrt{d_k}) V",
        r"\mathrm{softmax}_n(QK^\top / \sqrt{d_k}) V",
        r"O_{il} = \sum_j \mathrm{softmax}_i\left(\frac{\sum_c Q_{ic} K_{jc}}{\sqrt{d_k}}"
        r"\right) V_{jl}",
    ],
)
def test_a_softmax_along_the_wrong_axis_is_caught(latex: str) -> None:
    assert not _checked("attention", latex, "").ok


def test_a_softmax_subscript_that_names_nothing_is_not_executable() -> None:
    with pytest.raises(NotExecutable) as caught:
        _checked("attention", r"\mathrm{softmax}_z(QK^\top) V", "")
    assert caught.value.reason == (
        "softmax_z: the subscript names no index or axis of matrix (b, n, m); "
        'declare which dim it is, e.g. symbols="z = m"'
    )


# Other names ------------------------------------------------------------------------------------


def test_an_alias_of_a_dim_lies_over_the_oracles_table() -> None:
    latex = r"\mathrm{softmax}(QK^\top / \sqrt{d}) V"
    assert _checked("attention", latex, "d = d_k").ok
    assert not _checked("attention", latex, "d = d_v").ok


def test_an_undeclared_short_name_suggests_an_alias() -> None:
    with pytest.raises(LatexError) as caught:
        _checked("attention", r"\mathrm{softmax}(QK^\top / \sqrt{d}) V", "")
    assert caught.value.message == (
        "undeclared name 'd'; if it is d_k or d_v, declare it: symbols=\"d = d_k\""
    )


@pytest.mark.parametrize(
    ("symbols", "message"),
    [
        ("d = q", "q is neither a declared symbol nor a dim, so d cannot name it"),
        ("d = d_k; d = d_v", "d is declared twice"),
    ],
)
def test_a_bad_alias_is_an_error(symbols: str, message: str) -> None:
    with pytest.raises(LatexError) as caught:
        _checked("attention", r"\mathrm{softmax}(QK^\top / \sqrt{d}) V", symbols)
    assert caught.value.message == message


def test_an_alias_names_a_dim_in_later_declarations() -> None:
    table = parse_symbols("d = d_k; A: [b, n, d] = q")
    assert table.symbols["A"].dims == ("b", "n", "d_k")


# An oracle of one's own declares its formula's names ----------------------------------------


@dataclasses.dataclass(frozen=True)
class _DeclaringOracle(Oracle):
    """An oracle carrying ``symbols``, as :func:`oracle_symbols` reads them."""

    symbols: str = ""


def _scaled_rows(arrays: Mapping[str, Array], params: Mapping[str, Any]) -> dict[str, Array]:
    return {"output": arrays["x"] / math.sqrt(arrays["x"].shape[-1])}


SCALED = _DeclaringOracle(
    name="scaled_rows",
    title="Rows scaled by the root of their width",
    latex=r"y = x / \sqrt{d}",
    compute=_scaled_rows,
    inputs=(TensorSpec("x", ("b", "width")),),
    outputs=(TensorSpec("output", ("b", "width")),),
    dims={"b": 2, "width": 5},
    symbols=r"\mathbf{x}: [b, width] = x; d = width",
)


def test_an_oracle_of_ones_own_declares_its_formulas_names() -> None:
    table = oracle_symbols(SCALED, {})
    assert table is not None
    arrays = {"x": np.arange(10.0).reshape(2, 5)}
    right = compile_formula(r"\mathbf{y} = \mathbf{x} / \sqrt{d}", table)
    assert compare_with_oracle(right, SCALED, arrays, {"b": 2, "width": 5}).ok
    wrong = compile_formula(r"\mathbf{y} = \mathbf{x} / d", table)
    assert not compare_with_oracle(wrong, SCALED, arrays, {"b": 2, "width": 5}).ok


def test_an_oracle_without_symbols_has_none() -> None:
    plain = dataclasses.replace(SCALED, symbols="")
    assert oracle_symbols(plain, {}) is None


# Upright names that are not builtins ---------------------------------------------------------


@pytest.mark.parametrize(
    ("latex", "compiled"),
    [
        (r"LayerNorm(x + Sublayer(x))", "LayerNorm(x + Sublayer(x))"),
        (r"\mathrm{LayerNorm}(x + \mathrm{FFN}(x))", "LayerNorm(x + Sublayer(x))"),
        (r"\operatorname{Layernorm}(x + \operatorname{FFN}(x))", "LayerNorm(x + Sublayer(x))"),
    ],
)
def test_layer_norm_in_other_spellings(latex: str, compiled: str) -> None:
    result = agreement("sublayer", latex)
    assert result.ok, result.message
    assert result.compiled == compiled


@pytest.mark.parametrize("latex", [r"LN(x + FFN(x))", r"\mathrm{L}\mathrm{N}(x + \mathrm{FFN}(x))"])
def test_letters_ln_are_never_the_logarithm(latex: str) -> None:
    try:
        result = agreement("sublayer", latex)
    except (LatexError, NotExecutable):
        return
    assert "log" not in result.compiled


# Published styles that stay outside the subset, each with its reason -------------------------


@pytest.mark.parametrize(
    ("latex", "reason"),
    [
        (
            r"\alpha(\mathbf{q}, \mathbf{k}_i) = \frac{\exp(\mathbf{q}^\top \mathbf{k}_i)}"
            r"{\sum_j \exp(\mathbf{q}^\top \mathbf{k}_j)}",
            r"\alpha of one element at a time (k_i) is outside the executable subset: "
            "write it over whole tensors",
        ),
        (
            r"\mathbf{W}_o \begin{bmatrix}\mathbf{h}_1\\ \vdots\\ \mathbf{h}_h\end{bmatrix}",
            r"\begin{bmatrix} is outside the executable subset",
        ),
        (
            r"\textrm{GELU}(QK^\top) V",
            "unknown function GELU: the GELU activation, which this oracle's symbols do not define",
        ),
    ],
)
def test_a_published_style_outside_the_subset_says_why(latex: str, reason: str) -> None:
    with pytest.raises(NotExecutable) as caught:
        _checked("attention", latex, "")
    assert caught.value.reason == reason


def test_a_size_command_inside_an_argument_keeps_the_arguments_braces() -> None:
    latex = r"\mathrm{softmax}(QK^\top / \sqrt{\large d_k + d_k}) V"
    result = _checked("attention", latex, "")
    assert "sqrt(d_k + d_k)" in result.compiled
    assert not result.ok


def test_a_chain_of_equalities_is_not_executable_rather_than_a_difference() -> None:
    """A textbook's ``alpha = softmax(a) = ...``: which side the code computes is not the
    compiler's guess to make, so the formula is set aside with the reason (never a drift)."""
    from test_latex import agreement

    with pytest.raises(NotExecutable, match="chain of equalities"):
        agreement("softmax", r"\alpha = \mathrm{softmax}(x) = \frac{\exp(x_i)}{\sum_j \exp(x_j)}")
