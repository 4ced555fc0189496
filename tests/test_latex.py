"""The LaTeX compiler: formulas as written are compiled to NumPy and compared with the oracles."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from formula_check.latex import (
    CompiledFormula,
    FormulaAgreement,
    LatexError,
    NotExecutable,
    check_against_oracle,
    compile_formula,
    default_symbols,
    parse_symbols,
)
from formula_check.oracles import get_oracle
from formula_check.planning.masks import keep_mask

# Distinct sizes for every named dim, so that a swapped dim cannot pass by accident.
SIZES = {
    "attention": {"b": 2, "n": 3, "m": 5, "d_k": 4, "d_v": 6},
    "multihead": {"b": 2, "n": 5, "m": 7, "d_model": 12, "h": 4},  # depth 3
    "self_attention": {"b": 2, "n": 3, "d_model": 5, "d_k": 4, "d_v": 6},
    "positional_encoding": {"n": 11, "d_model": 8},
    "ffn": {"b": 2, "n": 3, "d_model": 4, "d_ff": 7},
    "linear": {"b": 2, "n": 3, "d_model": 5, "d_k": 4},
    "layer_norm": {"b": 2, "n": 3, "d_model": 5},
    "sublayer": {"b": 2, "n": 3, "d_model": 5, "d_ff": 7},
    "softmax": {"b": 2, "n": 3, "m": 5},
}

ATTENTION = r"\text{Attention}(Q, K, V) = \text{softmax}\left(\frac{QK^T}{\sqrt{d_k}}\right)V"
MASKED = r"\text{Attention}(Q, K, V) = \text{softmax}\left(\frac{QK^T}{\sqrt{d_k}} + M\right)V"
MULTIHEAD = (
    r"\text{MultiHead}(Q, K, V) = \text{Concat}(\text{head}_1, \dots, \text{head}_h)W^O"
    r" \quad \text{where} \quad \text{head}_i = \text{Attention}(QW_i^Q, KW_i^K, VW_i^V)"
)
PE = (
    r"PE_{(pos, 2i)} = \sin(pos/10000^{2i/d_{model}}), \quad "
    r"PE_{(pos, 2i+1)} = \cos(pos/10000^{2i/d_{model}})"
)
FFN = r"\text{FFN}(x) = \max(0, xW_1 + b_1)W_2 + b_2"
QKV = r"Q = XW_Q,\quad K = XW_K,\quad V = XW_V"
SUBLAYER = r"\mathrm{LayerNorm}(x + \mathrm{Sublayer}(x))"


def oracle_case(name: str, *, mask: bool = False) -> tuple[dict[str, Any], dict[str, Any]]:
    """The oracle's own seeded inputs and weights, and params holding every dim size."""
    oracle = get_oracle(name)
    params = dict(oracle.params)
    sizes = oracle.resolve_dims(SIZES[name], params)
    rng = np.random.default_rng(7)
    arrays = {**oracle.make_inputs(sizes, rng, params), **oracle.make_weights(sizes, rng)}
    if mask:
        arrays["mask"] = keep_mask("both", sizes["b"], sizes["n"], sizes["m"], rng)
    return arrays, {**params, **sizes}


def attention_definition(latex: str = ATTENTION) -> dict[str, CompiledFormula]:
    table = default_symbols("attention")
    assert table is not None
    return {"Attention": compile_formula(latex, table)}


def agreement(name: str, latex: str, *, mask: bool = False, **kw: Any) -> FormulaAgreement:
    arrays, params = oracle_case(name, mask=mask)
    return check_against_oracle(latex, name, arrays, params, **kw)


# The formulas of the issue -----------------------------------------------------------------

FORMULAS = [
    ("attention", ATTENTION, False),
    ("attention", MASKED, True),
    ("positional_encoding", PE, False),
    ("ffn", FFN, False),
    ("linear", QKV, False),
    ("sublayer", SUBLAYER, False),
]


@pytest.mark.parametrize(("name", "latex", "mask"), FORMULAS)
def test_formula_as_written_matches_the_oracle(name: str, latex: str, mask: bool) -> None:
    result = agreement(name, latex, mask=mask)
    assert result.ok, result.message
    assert result.max_abs <= 1e-12


def test_multihead_uses_the_attention_defined_by_an_earlier_block() -> None:
    result = agreement("multihead", MULTIHEAD, definitions=attention_definition())
    assert result.ok, result.message
    assert result.compiled == (
        "MultiHead(Q, K, V) = matmul(concat(head_i for each i), W^O)\n"
        "where head_i = Attention(matmul(Q, W_i^Q), matmul(K, W_i^K), matmul(V, W_i^V))"
    )


def test_multihead_with_a_mask_uses_the_masked_attention() -> None:
    result = agreement("multihead", MULTIHEAD, mask=True, definitions=attention_definition(MASKED))
    assert result.ok, result.message


@pytest.mark.parametrize("name", sorted(SIZES))
def test_every_canonical_catalog_formula_compiles_and_matches(name: str) -> None:
    result = agreement(name, get_oracle(name).latex)
    assert result.ok, result.message


def test_the_catalog_attention_formula_holds_with_a_mask_too() -> None:
    """What ``formula-check oracles`` prints can be pasted under a masked block as is."""
    result = agreement("attention", get_oracle("attention").latex, mask=True)
    assert result.ok, result.message


def test_the_compiled_form_reads_as_text() -> None:
    table = default_symbols("attention")
    assert table is not None
    compiled = compile_formula(ATTENTION, table)
    assert compiled.describe() == (
        "Attention(Q, K, V) = matmul(softmax(matmul(Q, transpose(K)) / sqrt(d_k)), V)"
    )
    table = default_symbols("positional_encoding")
    assert table is not None
    assert compile_formula(PE, table).describe().splitlines()[1] == (
        "PE[pos, 2 * i + 1] = cos(pos / 10000 ^ (2 * i / d_model))"
    )


def test_several_outputs_come_back_by_name() -> None:
    table = parse_symbols(
        "X: [b, n, d_model]; W_Q: [d_model, d_k]; W_K: [d_model, d_k]; W_V: [d_model, d_v]"
    )
    rng = np.random.default_rng(0)
    arrays = {
        "X": rng.standard_normal((2, 3, 5)),
        "W_Q": rng.standard_normal((5, 4)),
        "W_K": rng.standard_normal((5, 4)),
        "W_V": rng.standard_normal((5, 6)),
    }
    result = compile_formula(QKV, table).evaluate(arrays, {})
    assert isinstance(result, dict)
    assert sorted(result) == ["K", "Q", "V"]
    np.testing.assert_allclose(result["K"], arrays["X"] @ arrays["W_K"], rtol=1e-12)
    swapped = compile_formula(QKV.replace("K = XW_K", "K = XW_Q"), table).evaluate(arrays, {})
    assert isinstance(swapped, dict)
    assert not np.allclose(swapped["K"], arrays["X"] @ arrays["W_K"])


def test_self_attention_with_a_mask_primes_the_repeated_dim() -> None:
    oracle = get_oracle("self_attention")
    arrays, params = oracle_case("self_attention")
    arrays["mask"] = keep_mask(
        "causal", params["b"], params["n"], params["n"], np.random.default_rng(3)
    )
    latex = r"\text{softmax}\left(\frac{(XW_Q)(XW_K)^T}{\sqrt{d_k}} + M\right)(XW_V)W_O"
    assert check_against_oracle(latex, "self_attention", arrays, params).ok
    assert not check_against_oracle(oracle.latex, "self_attention", arrays, params).ok


def test_multihead_self_variant_with_a_causal_mask() -> None:
    oracle = get_oracle("multihead")
    params = {**oracle.params, "variant": "self"}
    sizes = oracle.resolve_dims(SIZES["multihead"], params)
    rng = np.random.default_rng(5)
    arrays = {**oracle.make_inputs(sizes, rng, params), **oracle.make_weights(sizes, rng)}
    arrays["mask"] = keep_mask("causal", sizes["b"], sizes["n"], sizes["n"], rng)
    assert check_against_oracle(oracle.latex, "multihead", arrays, {**params, **sizes}).ok


# Correct alternative spellings -------------------------------------------------------------

SPELLINGS = [
    (
        "attention",
        r"\text{Attention}(Q, K, V) = \mathrm{softmax}\left(\frac{QK^T}{\sqrt{d_k}}\right)V",
    ),
    ("attention", r"\operatorname{softmax}\left(\frac{QK^T}{\sqrt{d_k}}\right)V"),
    ("attention", r"\mathrm{Softmax}\left(\frac{QK^T}{\sqrt{d_k}}\right)V"),
    ("attention", r"\text{softmax}\left(\frac{QK^\top}{\sqrt{d_k}}\right)V"),
    ("attention", r"\text{softmax}\left(\frac{QK^{T}}{\sqrt{d_k}}\right)V"),
    ("attention", r"\text{softmax}\left(\frac{QK^{\intercal}}{\sqrt{d_k}}\right)V"),
    ("attention", r"\text{softmax}\Big(\frac{QK^T}{\sqrt{d_k}}\Big)V"),
    ("attention", r"\text{softmax}\left[\frac{QK^T}{\sqrt{d_k}}\right]V"),
    ("attention", r"\text{softmax}\left(\frac{Q \cdot K^T}{\sqrt{d_k}}\right) \cdot V"),
    ("attention", r"\text{softmax}(QK^T/\sqrt{d_k})V"),
    ("attention", r"\text{softmax}\left(\frac{{QK^T}}{\sqrt{d_k}}\right){V}"),
    ("attention", r"\text{softmax}\!\left(\frac{Q\,K^T}{\sqrt{d_k}}\right)\;V"),
    (
        "attention",
        r"\operatorname{Attention}(Q,K,V)=\operatorname{softmax}\big(QK^{\top}/\sqrt{d_k}\big)\,V",
    ),
    ("attention", r"\text{softmax}\left(\frac{1}{\sqrt{d_k}} Q K^T\right) V"),
    ("ffn", r"\max\{0, xW_1 + b_1\}W_2 + b_2"),
    ("ffn", r"\mathrm{FFN}(x) = \max\left(0,\, x W_1 + b_1\right) W_2 + b_2"),
    ("ffn", r"\text{FFN}(x)=\max(0, x \cdot W_1 + b_1) \cdot W_2 + b_2"),
    ("ffn", r"\max\left\{0, xW_{1} + b_{1}\right\}W_{2} + b_{2}"),
    (
        "positional_encoding",
        PE.replace(r"\quad", r"\qquad").replace(r"d_{model}", r"d_{\text{model}}"),
    ),
    (
        "positional_encoding",
        PE.replace("pos/10000^{2i/d_{model}}", r"\frac{pos}{10000^{2i/d_{model}}}"),
    ),
    ("linear", r"Q = XW_Q;\; K = XW_K;\; V = XW_V"),
    ("linear", r"Q = X W_Q"),
    ("sublayer", r"\text{LayerNorm}\big(x + \text{Sublayer}(x)\big)"),
    ("layer_norm", r"\gamma \odot \frac{x - \mu}{\sqrt{\sigma^2 + \varepsilon}} + \beta"),
]


@pytest.mark.parametrize(("name", "latex"), SPELLINGS)
def test_a_correct_alternative_spelling_is_accepted(name: str, latex: str) -> None:
    result = agreement(name, latex)
    assert result.ok, result.message


def test_multihead_spelled_with_a_comma_and_dots_variant() -> None:
    latex = MULTIHEAD.replace(r"\quad \text{where} \quad", r",\quad").replace(r"\dots", r"\ldots")
    assert agreement("multihead", latex, definitions=attention_definition()).ok


# Edits to the LaTeX alone are caught -------------------------------------------------------

EDITS = [
    ("attention", ATTENTION.replace(r"\sqrt{d_k}", "d_k"), {}),  # drop \sqrt
    ("attention", ATTENTION.replace("QK^T", "QK"), {}),  # drop ^T
    ("attention", ATTENTION.replace("QK^T", "KQ^T"), {}),
    ("attention", ATTENTION.replace("d_k", "d_v"), {}),  # d_v is declared, and 6 != 4
    ("attention", r"\frac{QK^T}{\sqrt{d_k}}V", {}),  # softmax removed
    ("attention", r"\text{softmax}(QK^T/d_k)V", {}),
    ("attention", r"\text{softmax}(QK^T)V", {}),
    ("attention", MASKED.replace("+ M", "- M"), {"mask": True}),
    ("attention", ATTENTION, {"mask": True}),  # the mask dropped from a masked block
    (
        "positional_encoding",
        PE.replace(r"\sin", "SIN").replace(r"\cos", r"\sin").replace("SIN", r"\cos"),
        {},
    ),
    ("positional_encoding", PE.replace("10000", "1000"), {}),
    ("positional_encoding", PE.replace("^{2i/", "^{i/"), {}),
    ("positional_encoding", PE.replace("2i+1", "2i"), {}),  # a cell covered twice
    ("positional_encoding", PE.split(", \\quad", maxsplit=1)[0], {}),  # odd cells never covered
    ("ffn", FFN.replace(" + b_1", ""), {}),
    ("ffn", r"\text{FFN}(x) = (xW_1 + b_1)W_2 + b_2", {}),  # drop \max
    ("ffn", r"\text{FFN}(x) = \max(0, xW_2 + b_1)W_1 + b_2", {}),  # W_1 and W_2 swapped
    ("multihead", MULTIHEAD.replace("W^O", ""), {}),
    ("multihead", MULTIHEAD.replace("QW_i^Q, KW_i^K", "QW_i^K, KW_i^Q"), {}),
    ("multihead", MULTIHEAD.replace("VW_i^V", "VW_i^K"), {}),
    ("self_attention", get_oracle("self_attention").latex.replace("W_O", ""), {}),
    ("linear", r"Q = W_QX", {}),
    ("layer_norm", get_oracle("layer_norm").latex.replace(r" + \epsilon", ""), {}),
    ("sublayer", r"\mathrm{LayerNorm}(\mathrm{Sublayer}(x))", {}),  # residual dropped
    ("sublayer", r"x + \mathrm{Sublayer}(\mathrm{LayerNorm}(x))", {}),  # pre-LN vs post-LN
]


@pytest.mark.parametrize(("name", "latex", "options"), EDITS)
def test_an_edit_to_the_latex_alone_is_caught(
    name: str, latex: str, options: dict[str, Any]
) -> None:
    definitions = attention_definition() if name == "multihead" else {}
    try:
        result = agreement(name, latex, mask=options.get("mask", False), definitions=definitions)
    except LatexError as error:
        assert error.caret().splitlines()[1].strip() == "^"
        return
    assert not result.ok
    assert result.max_abs > 1e-9
    assert "differs from the oracle, max |Δ| = " in result.message or "dims" in result.message


def test_a_cell_covered_twice_is_an_error_under_the_second_statement() -> None:
    with pytest.raises(LatexError) as caught:
        agreement("positional_encoding", PE.replace("2i+1", "2i"))
    assert caught.value.message == (
        "the formula gives PE at (0, 0) more than one value: its statements together must give "
        "each element exactly one (for instance one for even columns, 2i, and one for odd ones, "
        "2i+1)"
    )
    assert caught.value.caret().splitlines()[1] == " " * PE.index("PE_{(pos, 2i+1)}") + "^"


def test_a_cell_never_given_a_value_is_said_plainly() -> None:
    only_even = PE.split(r", \quad", maxsplit=1)[0]
    assert only_even != PE
    with pytest.raises(LatexError) as caught:
        agreement("positional_encoding", only_even)
    assert caught.value.message.startswith("the formula gives PE no value at (0, 1): ")


def test_a_mismatch_reports_its_size_and_place() -> None:
    result = agreement("attention", ATTENTION.replace(r"\sqrt{d_k}", "d_k"))
    assert not result.ok
    assert result.message.startswith("Attention: the formula differs from the oracle, max |Δ| = ")
    assert len(result.worst) == 3


# Names: undeclared and ambiguous are errors with a caret -----------------------------------


def _error(latex: str, table_text: str | None = None) -> LatexError:
    table = parse_symbols(table_text) if table_text else default_symbols("attention")
    assert table is not None
    with pytest.raises(LatexError) as caught:
        compile_formula(latex, table)
    return caught.value


def test_an_undeclared_name_is_an_error_under_its_letter() -> None:
    error = _error(r"\text{softmax}(QX^T)V")
    assert error.message == (
        "undeclared name 'X' in 'QX^T'; declare it: symbols=\"X: [axes] = array\" (its axes, "
        "and the oracle's array it reads)"
    )
    assert error.caret() == "\\text{softmax}(QX^T)V\n                ^"


def test_an_undeclared_subscripted_name_is_an_error() -> None:
    latex = r"\text{softmax}(QK^T/\sqrt{d_q})V"
    error = _error(latex)
    assert error.message.startswith("undeclared name 'd_q'; declare it: ")
    assert error.caret() == latex + "\n" + " " * latex.index("d_q") + "^"


def test_an_ambiguous_split_is_an_error() -> None:
    error = _error(
        r"\text{softmax}(QK^T)V", "Q: [b, n, d]; K: [b, m, d]; V: [b, m, e]; QK: [b, n, d]"
    )
    assert error.message == "ambiguous name 'QK^T': it reads as QK or Q K"
    assert error.caret() == "\\text{softmax}(QK^T)V\n               ^"


def test_a_shape_mismatch_is_an_error_at_the_product() -> None:
    error = _error(r"\text{softmax}(KQ^T)V")
    assert error.message == (
        "cannot multiply matrix (b, m, n) by matrix (b, m, d_v): n does not match m"
    )
    assert error.caret() == "\\text{softmax}(KQ^T)V\n                    ^"


def test_an_unknown_function_is_an_error() -> None:
    error = _error(
        r"\text{Attention}(QW, K, V)", "Q: [b, n, d]; W: [d, d]; K: [b, m, d]; V: [b, m, d]"
    )
    assert error.message == "unknown function 'Attention': define it in an earlier block"
    assert error.column == 0


def test_a_family_index_must_run_to_its_count() -> None:
    table = default_symbols("multihead")
    assert table is not None
    with pytest.raises(LatexError) as caught:
        compile_formula(
            MULTIHEAD.replace(r"\text{head}_h", r"\text{head}_n"),
            table,
            definitions=attention_definition(),
        )
    assert caught.value.message == "the last member must be head_h"


def test_a_superscript_digit_is_an_unexpected_character() -> None:
    error = _error("x^²", "x: [n]")
    assert error.message == "unexpected character '²'"
    assert error.column == 2


# Outside the subset: NotExecutable, never a silent pass ------------------------------------


@pytest.mark.parametrize(
    ("latex", "reason"),
    [
        (r"\int_0^1 x\,dx", r"\int is outside the executable subset"),
        (
            r"\frac{e^{x_i}}{\sum_{j \in S} e^{x_j}}",
            r"\sum under a condition (\in) is outside the executable subset",
        ),
        (r"\sqrt[3]{x}", "a power of a matrix (b, n, m) is outside the executable subset"),
        (r"\max(x)", r"\max over a set; \max(a, b) and \max_j over an index are executable"),
        (r"\text{Concat}(x, x)", r"Concat is executable as Concat(head_1, \dots, head_h)"),
    ],
)
def test_outside_the_subset_is_not_executable(latex: str, reason: str) -> None:
    table = default_symbols("softmax")
    assert table is not None
    with pytest.raises(NotExecutable) as caught:
        compile_formula(latex, table)
    assert caught.value.reason == reason
    assert str(caught.value) == f"formula not checked: {reason}"


# Declarations ------------------------------------------------------------------------------


def test_declarations_cover_tensors_families_grids_outputs_and_products() -> None:
    table = parse_symbols(
        "Q: [b, n, d_k] = q\n"
        "W_i^Q: [d_model, depth] for i < h = W_q; W^O: [d_model, d_model] = W_o\n"
        "pos: range(n); j: range(d_model / 2); PE: output [n, d_model]\n"
        "d_model = h * depth; c: scalar = 0.5; M: [b, n, m] = additive(mask)"
    )
    assert table.symbols["W_i^Q"].dims == ("i", "d_model", "depth")
    assert table.symbols["W^O"].dims == ("d_model", "d_model'")
    assert table.indices == {"i": "h"}
    assert table.products == {"h*depth": "d_model"}
    assert table.outputs == {"PE": ("n", "d_model")}
    assert {"d_k", "h", "depth", "n", "m", "b"} <= table.dims
    rng = np.random.default_rng(1)
    w_q = rng.standard_normal((6, 6))
    family = table.symbols["W_i^Q"].load({"W_q": w_q}, {"h": 3})
    np.testing.assert_array_equal(family[1], w_q[:, 2:4])
    mask = table.symbols["M"].load({"mask": np.array([[[True, False]]])}, {"b": 1, "n": 1, "m": 2})
    np.testing.assert_array_equal(mask, [[[0.0, -1e9]]])


def test_a_name_in_latex_spelling_is_canonical() -> None:
    table = parse_symbols(r"d_{\text{model}}: scalar = 2; W_{1}: [a, c]")
    assert set(table.symbols) == {"d_model", "W_1"}


def test_a_bad_declaration_points_at_its_line() -> None:
    text = "Q: [b, n, d_k]; K: b, m"
    with pytest.raises(LatexError) as caught:
        parse_symbols(text)
    assert caught.value.column == text.index("K")
    assert "cannot read declaration 'K: b, m'" in caught.value.message


def test_no_default_symbols_for_an_unknown_oracle() -> None:
    assert default_symbols("no_such_oracle") is None
