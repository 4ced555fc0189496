r"""Formulas in the styles the public texts print them, written for these tests.

*Dive into Deep Learning* writes bold upright names (``\mathbf{Q}``, ``\textrm{LN}``), shape
declarations (``\mathbf{Q} \in \mathbb{R}^{n \times d}``), ``d`` for the key width and
``\begin{aligned}`` blocks; the TensorFlow tutorial wraps whole equations in ``\Large{…}``
and writes ``d_{model}`` in italics; Keras examples name layers (``LayerNorm``). Every
formula here is also checked when it is wrong: a formula that differs from the oracle must
still be caught.
"""

from __future__ import annotations

import pytest

from formula_check.latex import LatexError, NotExecutable, check_against_oracle
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
