r"""Presentation-only LaTeX is read as a reader sees it: colour, phantoms, spacing, labels,
trailing side conditions and the formula's own macros never switch the formula check off.

Each wrong formula (the scaling's square root dropped, or hidden from the reader) must differ
from the oracle with its decoration, and its correct twin with the same decoration must agree.
"""

from __future__ import annotations

import pytest

from formula_check.checking.formula import judge_formula
from formula_check.latex import (
    LatexError,
    NotExecutable,
    compile_formula,
    default_symbols,
    parse_symbols,
)
from support import spec_for
from test_latex import agreement, oracle_case

HEAD = r"\text{Attention}(Q, K, V) = "
RIGHT = r"\text{softmax}\left(\frac{QK^T}{\sqrt{d_k}}\right)V"
WRONG = r"\text{softmax}\left(\frac{QK^T}{d_k}\right)V"

# (decorated right formula, decorated wrong twin)
TWINS = {
    "forall": (HEAD + RIGHT + r" \quad \forall Q", HEAD + WRONG + r" \quad \forall Q"),
    "for-all-text": (
        HEAD + RIGHT + r", \quad \text{for all } Q",
        HEAD + WRONG + r", \quad \text{for all } Q",
    ),
    "phantom": (
        HEAD + r"\text{softmax}\left(\frac{QK^T}{\sqrt{d_k}}\phantom{\cdot 2}\right)V",
        HEAD + r"\text{softmax}\left(QK^T \phantom{/\sqrt{d_k}}\right)V",
    ),
    "color-switch": (
        HEAD + r"\text{softmax}\left(\frac{QK^T}{{\color{red} \sqrt{d_k}}}\right)V",
        HEAD + r"\text{softmax}\left(\frac{QK^T}{{\color{red} d_k}}\right)V",
    ),
    "color-group": (
        HEAD + r"\text{softmax}\left(\frac{QK^T}{\color{red}{\sqrt{d_k}}}\right)V",
        HEAD + r"\text{softmax}\left(\frac{QK^T}{\color{red}{d_k}}\right)V",
    ),
    "textcolor": (
        HEAD + r"\text{softmax}\left(\frac{QK^T}{\textcolor[rgb]{1,0,0}{\sqrt{d_k}}}\right)V",
        HEAD + r"\text{softmax}\left(\frac{QK^T}{\textcolor{red}{d_k}}\right)V",
    ),
    "spacing-label-tag": (
        r"\displaystyle " + HEAD + RIGHT + r" \hspace{2em} \label{eq:att} \tag{1}",
        r"\displaystyle " + HEAD + WRONG + r" \hspace*{2em} \label{eq:att} \tag*{1}",
    ),
    "boxed": (
        HEAD + r"\boxed{\text{softmax}\left(\frac{QK^T}{\sqrt{d_k}}\right)}V",
        HEAD + r"\boxed{\text{softmax}\left(\frac{QK^T}{d_k}\right)}V",
    ),
    "bbox-smash-colorbox": (
        HEAD
        + r"\text{softmax}\left(\frac{\bbox[yellow]{QK^T}}{\colorbox{red}{$\smash[b]{\sqrt{d_k}}$}}"
        + r"\right)V",
        HEAD
        + r"\text{softmax}\left(\frac{\bbox[yellow]{QK^T}}{\fcolorbox{red}{blue}{$d_k$}}\right)V",
    ),
    "kern": (
        HEAD + r"\text{softmax}\left(\frac{QK^T}{\sqrt{d_k}}\right)\mkern2mu V\kern-1.5em",
        HEAD + r"\text{softmax}\left(\frac{QK^T}{d_k}\right)\mkern2mu V\kern-1.5em",
    ),
    "root-degree": (
        HEAD + r"\text{softmax}\left(\frac{QK^T}{\sqrt[2]{d_k}}\right)V",
        HEAD + r"\text{softmax}\left(\frac{QK^T}{\sqrt[3]{d_k}}\right)V",
    ),
    "trailing-note": (
        HEAD + RIGHT + r" \quad \text{(row-wise)}.",
        HEAD + WRONG + r" \quad \text{(row-wise)}.",
    ),
    "trailing-range": (
        HEAD + RIGHT + r" \qquad (i = 1, \dots, n)",
        HEAD + WRONG + r" \qquad (i \le n)",
    ),
    "over": (
        HEAD + r"\text{softmax}\left({QK^T \over \sqrt{d_k}}\right)V",
        HEAD + r"\text{softmax}\left({QK^T \over d_k}\right)V",
    ),
    "unicode": (
        HEAD + "\\text{softmax}\\left(\\frac{Q·K^⊤}{√{d_k}}\\right)V",
        HEAD + "\\text{softmax}\\left(\\frac{Q·K^⊤}{d_k}\\right)V",
    ),
    "newcommand": (
        r"\newcommand{\sm}{\text{softmax}} " + HEAD + r"\sm\left(\frac{QK^T}{\sqrt{d_k}}\right)V",
        r"\newcommand{\sm}{\text{softmax}} " + HEAD + r"\sm\left(\frac{QK^T}{d_k}\right)V",
    ),
    "newcommand-args": (
        r"\newcommand*{\scaled}[2]{\frac{#1}{\sqrt{#2}}}"
        + "\n"
        + HEAD
        + r"\text{softmax}\left(\scaled{QK^T}{d_k}\right)V",
        r"\newcommand*{\scaled}[2]{\frac{#1}{#2}}"
        + "\n"
        + HEAD
        + r"\text{softmax}\left(\scaled{QK^T}{d_k}\right)V",
    ),
    "def-and-operator": (
        r"\def\dk{d_k} \DeclareMathOperator*{\sm}{softmax} "
        + HEAD
        + r"\sm\left(\frac{QK^T}{\sqrt{\dk}}\right)V",
        r"\def\dk{d_k} \DeclareMathOperator*{\sm}{softmax} "
        + HEAD
        + r"\sm\left(\frac{QK^T}{\dk}\right)V",
    ),
    "def-with-parameter": (
        r"\def\over#1#2{\frac{#1}{#2}} " + HEAD + r"\text{softmax}(\over{QK^T}{\sqrt{d_k}})V",
        r"\def\over#1#2{\frac{#1}{#2}} " + HEAD + r"\text{softmax}(\over{QK^T}{d_k})V",
    ),
}


@pytest.mark.parametrize("name", sorted(TWINS))
def test_a_decorated_formula_is_compared_as_a_reader_sees_it(name: str) -> None:
    right, wrong = TWINS[name]
    assert agreement("attention", right).ok, right
    assert not agreement("attention", wrong).ok, wrong


LN = r"\text{LayerNorm}(x) = "
LN_TWINS = {
    "greek-letters": (
        LN + "γ \\odot \\frac{x − μ}{\\sqrt{σ^2 + ε}} + β",
        LN + "γ \\odot \\frac{x − μ}{\\sqrt{σ^2 + ε}} − β",
    ),
    "definition-after-the-equation": (
        LN
        + r"\gamma \odot \frac{x - \mu}{\sigma} + \beta \quad (\sigma = \sqrt{\sigma^2 + \epsilon})",
        LN + r"\gamma \odot \frac{x - \mu}{\sigma} + \beta \quad (\sigma = \sqrt{\sigma^2})",
    ),
}


@pytest.mark.parametrize("name", sorted(LN_TWINS))
def test_a_layer_norm_as_typed_is_compared_as_a_reader_sees_it(name: str) -> None:
    """Greek letters typed as such, and a definition in parentheses after the equation (a
    statement the formula uses, never a side note to set aside)."""
    right, wrong = LN_TWINS[name]
    assert agreement("layer_norm", right).ok, right
    assert not agreement("layer_norm", wrong).ok, wrong


def test_a_set_aside_condition_is_named_in_the_compiled_form() -> None:
    found = agreement("attention", TWINS["for-all-text"][0])
    assert found.compiled.endswith(
        "\n(side condition set aside, not checked: \\text{for all } Q)"
    ), found.compiled


def test_a_note_inside_the_equation_is_refused_not_set_aside() -> None:
    inside = HEAD + r"\text{softmax}\left(\frac{QK^T}{\sqrt{d_k}}\right) \text{(row-wise)} V"
    with pytest.raises(LatexError, match="upright text must be a plain word"):
        agreement("attention", inside)


def test_a_denominator_hidden_in_a_phantom_is_no_denominator() -> None:
    """A reader sees a fraction bar over nothing: the formula is an error, never the
    denominator the phantom hides."""
    hidden = HEAD + r"\text{softmax}\left(\frac{QK^T}{\phantom{\sqrt{d_k}}}\right)V"
    with pytest.raises(LatexError, match="expected a value"):
        agreement("attention", hidden)


SOFTMAX = default_symbols("softmax")
assert SOFTMAX is not None


@pytest.mark.parametrize(
    ("latex", "reason"),
    [
        (r"\def\a{\a} \a", "the macro \\a expands more than 1,000 times"),
        (
            r"\def\a#1{" + "#1" * 3000 + r"}\a{\a{\a{x}}}",
            "too long: its macros expand the formula past 20,000 tokens",
        ),
        (r"\def\a{" + "x" * 4000 + "}" + r"\a" * 1500, "too long: its macros expand"),
        (r"\newcommand{\f}[1][x]{#1} \f", "an optional parameter is not expanded"),
        (r"\newcommand{x}{y} x", "the name it defines is not a command"),
        (r"\newcommand{\f}{x", "its braces are never closed"),
        (r"x' + x", "primes (x') name no executable operation"),
        (r"\sum_{j \le i} x_j", r"\sum under a condition (\le) is outside the executable subset"),
        (r"\forall i \; x_i", r"\forall is outside the executable subset"),
    ],
)
def test_what_still_cannot_be_read_is_not_executable(latex: str, reason: str) -> None:
    with pytest.raises(NotExecutable) as caught:
        compile_formula(latex, SOFTMAX)
    assert reason in caught.value.reason


def test_a_macro_used_with_too_few_arguments_is_the_formulas_error() -> None:
    with pytest.raises(LatexError, match=r"\\f needs more arguments"):
        compile_formula(r"\newcommand{\f}[2]{#1 + #2} \f{x}", SOFTMAX)


# The verdict of a formula that cannot be checked ---------------------------------------------

LONG_CORRECT = r"\text{softmax}(x" + " + 0" * 250 + ")"
"""A correct formula of more than 200 terms: beyond the checker, not wrong."""


@pytest.mark.parametrize(
    ("latex", "reason"),
    [
        (r"\text{softmax}(x')", "primes (x') name no executable operation"),
        (LONG_CORRECT, "too long: more than 200 operations"),
    ],
    ids=["prime", "too-long"],
)
def test_a_formula_not_checked_fails_its_block_only_where_it_is_required(
    latex: str, reason: str
) -> None:
    arrays, params = oracle_case("softmax")
    code = "def softmax(x):\n    return x\n"
    free = judge_formula(spec_for("softmax", code, latex=latex), arrays, params)
    assert free is not None and free.state == "not_executable" and free.unchecked
    assert not free.failed, "not checked leaves the block to its code"
    assert free.summary().startswith(f"formula not checked: {reason}")
    spec = spec_for("softmax", code, latex=latex, formula_required=True)
    required = judge_formula(spec, arrays, params)
    assert required is not None and required.failed
    assert required.summary().startswith(f"formula not checked (formula: required): {reason}")


def test_a_formula_that_agrees_passes_where_it_is_required() -> None:
    arrays, params = oracle_case("softmax")
    spec = spec_for(
        "softmax", "def softmax(x):\n    return x\n", latex=TWINS_SOFTMAX, formula_required=True
    )
    verdict = judge_formula(spec, arrays, params)
    assert verdict is not None and verdict.state == "agrees" and not verdict.failed


TWINS_SOFTMAX = (
    r"{\color{teal} \text{softmax}(x)_i} = \frac{e^{x_i}}{\sum_j e^{x_j}} \quad \forall i"
)


# An undeclared name, as written ----------------------------------------------------------------


def test_an_undeclared_indexed_name_is_shown_as_written_with_the_declaration_that_fixes_it() -> (
    None
):
    latex = r"\text{softmax}(x)_i = \frac{e^{\alpha_{i}}}{\sum_j e^{\alpha_{j}}}"
    with pytest.raises(LatexError) as caught:
        agreement("softmax", latex)
    assert caught.value.message == (
        "undeclared name '\\alpha_i'; declare it: symbols=\"\\alpha: [axes] = array\" if i "
        'indexes it, else symbols="\\alpha_i: [axes] = array" (its axes, and the oracle\'s '
        "array it reads)"
    )
    assert agreement("softmax", latex, symbols=parse_symbols(r"\alpha: [b, n, m] = x")).ok
    with pytest.raises(LatexError) as two:
        compile_formula(r"\text{Attention}(Q, K, V) = \alpha_{ij} V", ATTENTION)
    assert two.value.message.startswith(
        "undeclared name '\\alpha_{ij}'; declare it: symbols=\"\\alpha: [axes] = array\" if "
        "i, j index it"
    )


ATTENTION = default_symbols("attention")
assert ATTENTION is not None
