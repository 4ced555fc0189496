"""Three-way checking: the LaTeX as written must match the oracle too, not only the code."""

from __future__ import annotations

import pytest

from formula_check.model import Status
from formula_check.project.ci_formats import formula_notes
from formula_check.render import labels_for, render_card
from implementations import CORRECT, FFN, PE, SDPA
from support import run

pytestmark = pytest.mark.tf

ATTENTION = r"\text{Attention}(Q, K, V) = \text{softmax}\left(\frac{QK^T}{\sqrt{d_k}}\right)V"
MASKED = r"\text{Attention}(Q, K, V) = \text{softmax}\left(\frac{QK^T}{\sqrt{d_k}} + M\right)V"
FFN_TEX = r"\text{FFN}(x) = \max(0, xW_1 + b_1)W_2 + b_2"
PE_TEX = (
    r"PE_{(pos, 2i)} = \sin\left(pos / 10000^{2i/d_{model}}\right), \quad "
    r"PE_{(pos, 2i+1)} = \cos\left(pos / 10000^{2i/d_{model}}\right)"
)


def test_right_code_and_right_formula_agree_three_ways() -> None:
    result = run("attention", SDPA, latex=ATTENTION)
    assert result.status is Status.VERIFIED, result.headline()
    assert result.formula is not None and result.formula.state == "agrees"
    assert result.formula.max_abs < 1e-9
    assert "sqrt(d_k)" in result.formula.compiled


@pytest.mark.parametrize(
    ("oracle", "code", "latex", "options"),
    [
        ("attention", SDPA, MASKED, {"mask": "causal"}),
        ("ffn", FFN, FFN_TEX, {}),
        ("positional_encoding", PE, PE_TEX, {}),
    ],
)
def test_canonical_formulas_agree(oracle: str, code: str, latex: str, options: dict) -> None:
    result = run(oracle, code, latex=latex, **options)
    assert result.status is Status.VERIFIED, result.headline()
    assert result.formula is not None and result.formula.state == "agrees"


@pytest.mark.parametrize(
    ("edit", "latex"),
    [
        ("sqrt dropped", ATTENTION.replace(r"\sqrt{d_k}", "d_k")),
        ("softmax dropped", r"\text{Attention}(Q, K, V) = \frac{QK^T}{\sqrt{d_k}}V"),
        (
            "sin and cos swapped",
            PE_TEX.replace(r"\sin", "TMP").replace(r"\cos", r"\sin").replace("TMP", r"\cos"),
        ),
        ("base 1000", PE_TEX.replace("10000", "1000")),
        ("bias dropped", FFN_TEX.replace(" + b_1", "")),
    ],
)
def test_a_latex_only_edit_fails_even_with_correct_code(edit: str, latex: str) -> None:
    oracle = "ffn" if "FFN" in latex else "positional_encoding" if "PE" in latex else "attention"
    code = {"ffn": FFN, "positional_encoding": PE, "attention": SDPA}[oracle]
    result = run(oracle, code, latex=latex)
    assert all(v.ok for v in result.verdicts), "the code itself is right"
    assert result.status is Status.MISMATCH, f"{edit}: {result.headline()}"
    assert result.formula is not None and result.formula.failed
    assert "formula:" in result.headline()


def test_undeclared_name_is_an_error_with_a_caret() -> None:
    result = run("attention", SDPA, latex=r"\text{softmax}\left(\frac{QZ^T}{\sqrt{d_k}}\right)V")
    assert result.status is Status.MISMATCH
    assert result.formula is not None and result.formula.state == "invalid"
    assert "^" in result.formula.message


def test_formula_outside_the_subset_is_said_not_checked_and_never_passes_silently() -> None:
    latex = r"\text{softmax}(x)_i = \frac{e^{x_i}}{\sum_{j \in S} e^{x_j}}"
    result = run("softmax", CORRECT["softmax"][1], latex=latex)
    assert result.status is Status.VERIFIED
    assert result.formula is not None and result.formula.state == "not_executable"
    assert result.formula.summary().startswith("formula not checked: \\sum under a condition")
    required = run("softmax", CORRECT["softmax"][1], latex=latex, formula_required=True)
    assert required.status is Status.MISMATCH, "formula: required fails it"
    assert required.headline().startswith(
        "docs/page.md:6 [softmax]: mismatch: formula not checked (formula: required): \\sum"
    )


@pytest.mark.parametrize(
    "latex",
    [
        r"\text{FFN}(x) = \max(0, xW_1)W_2 + b_2 \quad \text{(bias } b_1 \text{ omitted)}",
        FFN_TEX + r", \quad b_1 := 0",
    ],
)
def test_latex_the_compiler_cannot_read_is_not_checked_unless_required(latex: str) -> None:
    r"""Math inside ``\text``, or ``:=``: the formula is not checked (the code still is), and
    the card says why; under ``formula: required`` the block fails."""
    result = run("ffn", FFN, latex=latex)
    assert result.status is Status.VERIFIED, result.headline()
    assert result.formula is not None and result.formula.unchecked
    said = "formula not checked: the compiler cannot read this LaTeX: "
    assert result.formula.summary().startswith(said), result.formula.summary()
    assert "^" in result.formula.message, "the caret marks where"
    card = render_card(result, labels=labels_for("en"), image_url=str)
    assert "formula not checked" in card and "the compiler cannot read this LaTeX" in card
    assert "the compiler cannot read this LaTeX" in formula_notes([result])[1]
    required = run("ffn", FFN, latex=latex, formula_required=True)
    assert required.status is Status.MISMATCH, required.headline()
    assert "formula not checked (formula: required): the compiler cannot read" in (
        required.headline()
    )


LN_TEX = r"\mathrm{LN}(x) = \gamma \odot \frac{x-\mu}{\sqrt{\sigma^2+\epsilon}} + \beta"
KERAS_LN = ("tf.keras.layers.LayerNormalization(epsilon=1e-6)", {"preset": "keras-layer-norm"})
PLAIN_LN = (
    "tf.keras.layers.LayerNormalization(epsilon=1e-6, center=False, scale=False)",
    {"kind": "factory"},
)


@pytest.mark.parametrize(
    ("left_out", "code", "latex", "state"),
    [
        ("nothing", KERAS_LN, LN_TEX, "agrees"),
        ("gamma", KERAS_LN, LN_TEX.replace(r"\gamma \odot", ""), "differs"),
        ("beta", KERAS_LN, LN_TEX.replace(r"+ \beta", ""), "differs"),
        (
            "both, as the code does",
            PLAIN_LN,
            r"\mathrm{LN}(x) = \frac{x-\mu}{\sqrt{\sigma^2+\epsilon}}",
            "agrees",
        ),
    ],
)
def test_a_formula_is_judged_on_the_weights_the_code_ran_with(
    left_out: str, code: tuple[str, dict[str, str]], latex: str, state: str
) -> None:
    """A gain or shift the oracle's own formula names is no paper's leniency: a formula that
    leaves it out, next to code that has it, differs (the code's weights are moved off 1 and
    0); where the code has none, the formula needs none."""
    layer, options = code
    source = f"import tensorflow as tf\n\ndef make():\n    return {layer}\n"
    result = run("layer_norm", source, latex=latex, **options)
    assert result.formula is not None, left_out
    assert result.formula.state == state, (left_out, result.headline())
    assert result.status is (Status.VERIFIED if state == "agrees" else Status.MISMATCH)


def test_formula_check_can_be_turned_off() -> None:
    result = run(
        "attention", SDPA, latex=ATTENTION.replace(r"\sqrt{d_k}", "d_k"), check_formula=False
    )
    assert result.status is Status.VERIFIED and result.formula is None


MULTIHEAD = (
    r"\text{MultiHead}(Q, K, V) = \text{Concat}(\text{head}_1, \dots, \text{head}_h)W^O "
    r"\quad \text{where} \quad \text{head}_i = \text{Attention}(QW_i^Q, KW_i^K, VW_i^V)"
)


def test_multihead_uses_the_attention_an_earlier_block_defined_and_names_it() -> None:
    oracle, code, options = CORRECT["multihead-tutorial"]
    defined = (("attention", ATTENTION, "docs/page.md:3"),)
    right = run(oracle, code, latex=MULTIHEAD, definitions=defined, **options)
    assert right.status is Status.VERIFIED, right.headline()
    assert right.formula is not None and right.formula.state == "agrees"
    assert right.formula.compiled.endswith("\n(Attention from docs/page.md:3)")


def test_a_definition_that_disagrees_with_its_own_oracle_is_not_used() -> None:
    oracle, code, options = CORRECT["multihead-tutorial"]
    wrong_attention = ATTENTION.replace(r"\sqrt{d_k}", "d_k")
    wrong = run(
        oracle,
        code,
        latex=MULTIHEAD,
        definitions=(("attention", wrong_attention, "docs/page.md:3"),),
        **options,
    )
    assert wrong.status is Status.VERIFIED, "a wrong definition fails its own card, not this one"
    assert wrong.formula is not None and wrong.formula.state == "agrees"
    assert (
        "(Attention from docs/page.md:3 was not used: its formula differs from its oracle "
        "'attention' on this block's arrays (max |Δ| = "
    ) in wrong.formula.compiled
    assert wrong.formula.compiled.endswith("; the oracle's own Attention was used instead)")


def test_a_page_definition_that_cannot_live_here_falls_back_visibly() -> None:
    oracle, code, options = CORRECT["sublayer-post"]
    layer_norm = (
        r"\text{LayerNorm}(x) = \gamma \odot \frac{x - \mu}{\sqrt{\sigma^2 + \epsilon}} + \beta"
    )
    result = run(
        oracle,
        code,
        latex=r"\text{LayerNorm}(x + \text{FFN}(x))",
        definitions=(("layer_norm", layer_norm, "page.md:3"),),
        **options,
    )
    assert result.formula is not None and result.formula.state == "agrees", result.headline()
    assert (
        "the page's LayerNorm from page.md:3 could not be used here; the oracle's own "
        "definition was"
    ) in result.formula.compiled
