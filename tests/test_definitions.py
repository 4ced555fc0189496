r"""A block's ``\text{Attention}(...) = ...`` is a definition later blocks of its page call.

Only a block that vouches for it defines anything: one shown wrong on purpose (``expect``),
one not checked (``formula="off"``, ``skip``) and one whose formula differs from its own
oracle do not. A card that uses a definition names it. Pages are read as the plugin reads
them and their blocks checked on the shared engine; one real build asserts the log lines.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from formula_check.checking.formula import judge_formula
from formula_check.model import Array, Status
from formula_check.oracles import get_oracle
from formula_check.pages.blocks import Settings, source_blocks
from formula_check.results import CheckResult
from implementations import MHA_WEIGHTS, SDPA, TUTORIAL_MHA
from support import PROJECT, mkdocs_build, shared_engine, spec_for

pytestmark = pytest.mark.tf

ATTENTION = r"\text{Attention}(Q, K, V) = \text{softmax}\left(\frac{QK^T}{\sqrt{d_k}}\right)V"
MASKED = r"\text{Attention}(Q, K, V) = \text{softmax}\left(\frac{QK^T}{\sqrt{d_k}} + M\right)V"
DIVIDED_BY_DK = ATTENTION.replace(r"\sqrt{d_k}", "d_k")
MULTIHEAD = (
    r"\text{MultiHead}(Q, K, V) = \text{Concat}(\text{head}_1, \dots, \text{head}_h)W^O, "
    r"\quad \text{head}_i = \text{Attention}(QW_i^Q, KW_i^K, VW_i^V)"
)
NO_OUTPUT_PROJECTION = MULTIHEAD.replace("W^O", "")
MHA_HEADER = f'oracle="multihead" init="d_model=d_model num_heads=h" weights="{MHA_WEIGHTS}"'


def block(header: str, latex: str, code: str) -> str:
    """A formula block and its python fence, as a page writes them."""
    return f"```formula {header}\n{latex}\n```\n\n```python\n{code.strip()}\n```\n"


def page(*blocks: str) -> str:
    """A page: front matter that turns timing off, then the blocks (the first at line 6)."""
    return "---\nformula_check:\n  timing: off\n---\n\n" + "\n".join(blocks)


def check_page(text: str, path: str = "docs/page.md") -> list[CheckResult]:
    """Every block of the page, read as the plugin reads it and checked on the engine."""
    blocks = source_blocks(text, page=path, settings=Settings(PROJECT, timing=False))
    specs = []
    for found in blocks:
        assert found.spec is not None, found.error
        specs.append(found.spec)
    return [shared_engine().check(spec) for spec in specs]


def where(text: str, block_id: str, path: str = "docs/page.md") -> str:
    """``docs/page.md:LINE`` of the formula fence of block ``block_id``."""
    header = f'id="{block_id}"'
    lines = text.split("\n")
    number = next(n for n, line in enumerate(lines, 1) if line.startswith("```formula " + header))
    return f"{path}:{number}"


@pytest.mark.parametrize(
    "on_purpose",
    ['expect="mismatch"', 'formula="off"', 'skip="shown for the record"'],
)
def test_a_definition_shown_wrong_on_purpose_defines_nothing(on_purpose: str) -> None:
    wrong_code = SDPA.replace("tf.math.sqrt(dk)", "dk") if "expect" in on_purpose else SDPA
    text = page(
        block(f'id="wrong" oracle="attention" {on_purpose}', DIVIDED_BY_DK, wrong_code),
        block(f'id="mha" {MHA_HEADER}', MULTIHEAD, TUTORIAL_MHA),
    )
    first, mha = check_page(text)
    shown = {"expect": Status.MISMATCH, "formula": Status.VERIFIED, "skip": Status.SKIPPED}
    assert first.status is shown[on_purpose.partition("=")[0]], first.headline()
    assert mha.status is Status.VERIFIED, mha.headline()
    assert mha.formula is not None and mha.formula.state == "agrees"
    assert "docs/page.md" not in mha.formula.compiled, "no page definition was in play"


def test_a_definition_whose_formula_differs_from_its_oracle_is_set_aside_visibly() -> None:
    text = page(
        block('id="wrong" oracle="attention"', DIVIDED_BY_DK, SDPA),
        block(f'id="mha" {MHA_HEADER}', MULTIHEAD, TUTORIAL_MHA),
    )
    wrong, mha = check_page(text)
    assert wrong.status is Status.MISMATCH, "the wrong formula fails its own card"
    assert mha.status is Status.VERIFIED, mha.headline()
    assert mha.formula is not None and mha.formula.state == "agrees"
    wrong_at = where(text, "wrong")
    note = mha.formula.compiled.split("\n")[-1]
    assert note.startswith(
        f"(Attention from {wrong_at} was not used: its formula differs from its oracle "
        "'attention' on this block's arrays (max |Δ| = "
    ), note
    assert note.endswith("; the oracle's own Attention was used instead)")


def test_a_card_names_the_definition_it_used() -> None:
    text = page(
        block('id="sdpa" oracle="attention"', ATTENTION, SDPA),
        block(f'id="mha" {MHA_HEADER}', MULTIHEAD, TUTORIAL_MHA),
    )
    sdpa, mha = check_page(text)
    assert sdpa.status is Status.VERIFIED, sdpa.headline()
    assert mha.status is Status.VERIFIED, mha.headline()
    assert mha.formula is not None and mha.formula.state == "agrees"
    assert mha.formula.compiled.endswith(f"\n(Attention from {where(text, 'sdpa')})")


def test_the_last_usable_definition_wins_and_one_set_aside_later_is_named() -> None:
    text = page(
        block('id="masked" oracle="attention" mask="causal"', MASKED, SDPA),
        block('id="plain" oracle="attention"', ATTENTION, SDPA),
        block(f'id="mha" {MHA_HEADER} mask="causal"', MULTIHEAD, TUTORIAL_MHA),
    )
    *_, mha = check_page(text)
    assert mha.status is Status.VERIFIED, mha.headline()
    assert mha.formula is not None
    masked = where(text, "masked")
    plain = where(text, "plain")
    lines = mha.formula.compiled.split("\n")
    assert lines[-2] == f"(Attention from {masked})"
    assert lines[-1].startswith(f"(Attention from {plain} was not used: ")
    assert "; it has no mask term)" in lines[-1]
    assert lines[-1].endswith(f"; Attention from {masked} was used instead)")


def test_a_wrong_formula_says_which_definition_it_used() -> None:
    text = page(
        block('id="sdpa" oracle="attention"', ATTENTION, SDPA),
        block(f'id="mha" {MHA_HEADER} expect="mismatch"', NO_OUTPUT_PROJECTION, TUTORIAL_MHA),
    )
    _, mha = check_page(text)
    assert mha.status is Status.MISMATCH and all(v.ok for v in mha.verdicts), mha.headline()
    assert mha.formula is not None and mha.formula.state == "differs"
    sdpa = where(text, "sdpa")
    assert (
        f"; it uses Attention from {sdpa}, which agrees with oracle 'attention' here, so the "
        "difference is in this formula; it computes MultiHead(Q, K, V) = concat("
    ) in mha.formula.summary()


def test_a_masked_block_whose_formula_has_no_mask_term_is_told_to_add_one() -> None:
    text = page(block('id="causal" oracle="attention" mask="causal"', ATTENTION, SDPA))
    (result,) = check_page(text)
    assert result.status is Status.MISMATCH, result.headline()
    assert result.formula is not None
    assert (
        "; the formula has no mask term; write `+ M` inside the softmax; it computes "
        in result.formula.message
    )


def test_a_masked_block_with_a_mask_term_gets_no_mask_hint() -> None:
    text = page(
        block(
            'id="causal" oracle="attention" mask="causal"', MASKED.replace("{d_k}", "{d_v}"), SDPA
        )
    )
    (result,) = check_page(text)
    assert result.formula is not None and result.formula.state == "differs"
    assert "mask term" not in result.formula.message


# A definition whose left side carries the output's indices -----------------------------------

SCORES = r"s_{ij} = \frac{1}{\sqrt{d_k}} \sum_l Q_{il} K_{jl}"
WEIGHTS = r"\alpha_{ij} = \frac{e^{s_{ij}}}{\sum_k e^{s_{ik}}}"
BY_ELEMENT = r"\text{Attention}(Q, K, V)_{il} = \sum_j \alpha_{ij} V_{jl}"


def by_element(output: str = BY_ELEMENT, scores: str = SCORES) -> str:
    """Attention written element by element, its output statement last."""
    return f"{scores}, \\quad {WEIGHTS}, \\quad {output}"


def multihead_arrays() -> tuple[dict[str, Array], dict[str, Any]]:
    """The multi-head oracle's arrays and params at its default sizes."""
    oracle = get_oracle("multihead")
    params = dict(oracle.params)
    sizes = oracle.resolve_dims(dict(oracle.dims), params)
    rng = np.random.default_rng(5)
    arrays = {**oracle.make_inputs(sizes, rng, params), **oracle.make_weights(sizes, rng)}
    return arrays, {**params, **sizes}


@pytest.mark.parametrize("subscript", ["_{il}", "_{i,l}", " _ {il} "])
def test_a_definition_with_an_output_subscript_is_the_one_called(subscript: str) -> None:
    r"""``\text{Attention}(Q, K, V)_{il} = ...`` defines Attention, as ``(Q, K, V) =`` does."""
    written = by_element(BY_ELEMENT.replace("_{il}", subscript, 1))
    definitions = (("attention", written, "docs/page.md:6"),)
    spec = spec_for("multihead", TUTORIAL_MHA, latex=MULTIHEAD, definitions=definitions)
    verdict = judge_formula(spec, *multihead_arrays())
    assert verdict is not None and verdict.state == "agrees", verdict
    assert verdict.compiled.endswith("\n(Attention from docs/page.md:6)")


def test_a_wrong_definition_with_an_output_subscript_is_set_aside_visibly() -> None:
    unscaled = by_element(scores=SCORES.replace(r"\frac{1}{\sqrt{d_k}} ", ""))
    definitions = (("attention", unscaled, "docs/page.md:6"),)
    spec = spec_for("multihead", TUTORIAL_MHA, latex=MULTIHEAD, definitions=definitions)
    verdict = judge_formula(spec, *multihead_arrays())
    assert verdict is not None and verdict.state == "agrees", verdict
    note = verdict.compiled.split("\n")[-1]
    assert note.startswith(
        "(Attention from docs/page.md:6 was not used: its formula differs from its oracle "
        "'attention' on this block's arrays (max |Δ| = "
    ), note
    assert note.endswith("; the oracle's own Attention was used instead)")


SITE = """\
site_name: Definitions
plugins:
  - formula-check:
      timing: false
      cache: false
markdown_extensions:
  - pymdownx.superfences
"""


@pytest.mark.site
def test_a_build_logs_the_definition_a_wrong_formula_used(tmp_path: Path) -> None:
    text = page(
        block('id="sdpa" oracle="attention"', ATTENTION, SDPA),
        block('id="drift" oracle="attention" expect="mismatch"', DIVIDED_BY_DK, SDPA),
        block(f'id="mha" {MHA_HEADER}', MULTIHEAD, TUTORIAL_MHA),
        block(f'id="no-wo" {MHA_HEADER} expect="mismatch"', NO_OUTPUT_PROJECTION, TUTORIAL_MHA),
    )
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "index.md").write_text(text, encoding="utf-8")
    (tmp_path / "mkdocs.yml").write_text(SITE, encoding="utf-8")
    done = mkdocs_build(tmp_path, strict=True)
    assert done.returncode == 0, done.stdout + done.stderr
    sdpa = where(text, "sdpa", "docs/index.md")
    log = done.stderr
    assert "[mha]" not in log, "a verified block is not logged"
    html = (tmp_path / "site" / "index.html").read_text(encoding="utf-8")
    assert html.count(f"(Attention from {sdpa})") == 2, "the cards of both multi-head blocks"
    no_wo = next(line for line in log.split("\n") if "[no-wo]" in line)
    assert "expected failure (mismatch): formula: the formula as written differs" in no_wo
    assert f"; it uses Attention from {sdpa}, which agrees with oracle 'attention' here" in no_wo
