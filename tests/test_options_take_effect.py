"""The rule, for every block option: a value a block states takes effect exactly as written,
or is an error at the block's ``page:LINE``; never silently ignored or overridden.

Each option of :data:`formula_check.pages.fences.BLOCK_OPTIONS` has an entry in ``EFFECTS`` (a
header, and what it must change in the spec, the plan, the request or the judged result) and
in ``REFUSED`` (headers whose value could not take effect, with the error each must raise at
``docs/p.md:3``). A new option without both fails ``test_every_option_is_covered``. Pure: the
worker's reply is made here from the oracle's own outputs, so no TensorFlow runs. How a
block's own value meets the page's defaults and its preset: ``test_stated_values.py``.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from formula_check.checking.judge import evaluate
from formula_check.errors import FormulaCheckError
from formula_check.messages import CheckReply
from formula_check.model import CheckSpec, Location, Status
from formula_check.pages.blocks import PageBlock, Settings, page_blocks
from formula_check.pages.fences import BLOCK_OPTIONS
from formula_check.planning.plan import Plan, plan_check
from formula_check.render import labels_for, render_card
from formula_check.results import CheckResult, Environment

PAGE = "docs/p.md"
WHERE = Location(PAGE, 3)
ATTENTION = 'oracle="attention" dims="b=2 n=3 m=4 d_k=5 d_v=6"'
LATEX = r"\text{Attention}(Q, K, V) = \text{softmax}\left(\frac{QK^T}{\sqrt{d_k}}\right)V"
FUNCTION = "def attend(q, k, v, mask=None):\n    return q"
LAYER = "class Layer:\n    def __init__(self, units=1):\n        pass"


def blocks(root: Path, header: str, code: str = FUNCTION, timing: bool = True) -> PageBlock:
    """The one block of a page whose fence opens at line 3."""
    text = f"# Page\n\n```formula {header}\n{LATEX}\n```\n\n```python\n{code}\n```\n"
    (block,) = page_blocks(
        text.split("\n"), page=PAGE, settings=Settings(root, timing=timing, timeout=60.0)
    )
    return block


def spec_of(root: Path, header: str, code: str = FUNCTION) -> CheckSpec:
    block = blocks(root, header, code)
    assert block.spec is not None, block.error
    return block.spec


def plan_of(root: Path, header: str, code: str = FUNCTION) -> Plan:
    return plan_check(spec_of(root, header, code), str(root))


def judged(
    plan: Plan, kind: str = "function", outputs: list[np.ndarray] | None = None
) -> CheckResult:
    """The result for code that returns the oracle's own outputs (or ``outputs``), on the
    standard inputs alone: the input regimes say they were not run."""
    arrays = {**plan.inputs, **plan.weights}
    if plan.keep is not None:
        arrays["mask"] = plan.keep
    if outputs is None:
        expected = plan.oracle.compute(arrays, plan.params)
        outputs = [np.asarray(expected[t.name], np.float32) for t in plan.oracle.outputs]
    reply = CheckReply(
        kind=kind,
        outputs=len(outputs),
        output_dtypes=("float32",) * len(outputs),
        regimes_skipped=tuple((regime.name, "not run here") for regime in plan.regimes),
    )
    got = {f"out/{i}": value for i, value in enumerate(outputs)}
    if kind != "function":
        got.update({f"w/{k}": v.astype(np.float32) for k, v in plan.weights.items()})
    return evaluate(plan, reply, got, Environment())


def refusal(root: Path, header: str, code: str = FUNCTION, kind: str = "function") -> str:
    """The error the block gets, wherever it is found (header, plan or judging); it must be
    said at the block's page:line."""
    block = blocks(root, header, code)
    try:
        if block.error is not None:
            raise block.error
        assert block.spec is not None
        judged(plan_check(block.spec, str(root)), kind)
    except FormulaCheckError as error:
        assert error.location == WHERE, f"{error.location}: {error.message}"
        return error.message
    raise AssertionError(f"{header!r} was accepted")


# -- what each option changes ---------------------------------------------------------------


def _code(root: Path) -> None:
    (root / "docs").mkdir(exist_ok=True)
    (root / "docs" / "att.py").write_text("def other(q, k, v):\n    return q\n")
    spec = spec_of(root, f'{ATTENTION} code="docs/att.py:other"')
    assert spec.snippet.origin == "file" and spec.snippet.entry == "other"
    assert "def other" in plan_check(spec, str(root)).request.source


def _mask_convention(root: Path) -> None:
    dtypes = {}
    for convention in ("additive", "keep", "keep-float", "neg-inf", "neg-large", "lengths"):
        plan = plan_of(root, f'{ATTENTION} mask="padding" mask_convention="{convention}"')
        mask = plan.arrays["in/mask"]
        dtypes[convention] = (mask.dtype.name, mask.shape)
        assert plan.keep is not None
        hidden = ~plan.keep
        if convention == "neg-inf":
            assert np.all(np.isneginf(mask[hidden])) and np.all(mask[~hidden] == 0)
        if convention == "lengths":
            assert np.array_equal(mask, plan.keep.sum(-1)[:, 0])
    assert dtypes == {
        "additive": ("float32", (2, 3, 4)),
        "keep": ("bool", (2, 3, 4)),
        "keep-float": ("float32", (2, 3, 4)),
        "neg-inf": ("float32", (2, 3, 4)),
        "neg-large": ("float32", (2, 3, 4)),
        "lengths": ("int32", (2,)),
    }


def _returns(root: Path) -> None:
    kept = plan_of(root, f'{ATTENTION} returns="output weights=scores"', LAYER)
    assert dict(kept.request.attribute_outputs) == {"weights": "scores"}
    plan = plan_of(root, f'{ATTENTION} returns="weights output"')
    expected = plan.oracle.compute({**plan.inputs}, plan.params)
    swapped = [np.float32(expected["weights"]), np.float32(expected["output"])]
    result = judged(plan, outputs=swapped)
    assert result.status is Status.VERIFIED, result.headline()
    assert [v.name for v in result.verdicts if not v.regime] == ["weights", "output"]


def _tolerance(option: str) -> Callable[[Path], None]:
    def check(root: Path) -> None:
        result = judged(plan_of(root, f'{ATTENTION} {option}="1e-3"'))
        assert all("stated by the block" in v.tolerance for v in result.verdicts)
        stated = [v.atol if option == "atol" else v.rtol for v in result.verdicts]
        assert stated and all(value == 1e-3 for value in stated)

    return check


def _seed(root: Path) -> None:
    zero, three = plan_of(root, f"{ATTENTION} seed=0"), plan_of(root, f"{ATTENTION} seed=3")
    assert three.request.seed == 3
    assert not np.array_equal(zero.arrays["in/q"], three.arrays["in/q"])


def _regimes(root: Path) -> None:
    chosen = plan_of(root, f'{ATTENTION} mask="padding" regimes="large logits"')
    assert [regime.name for regime in chosen.regimes] == ["large logits"]
    every = plan_of(root, f'{ATTENTION} mask="padding"')
    assert [regime.name for regime in every.regimes] == ["large logits", "masked keys score high"]
    assert np.array_equal(chosen.arrays["r1/in/q"], every.arrays["r1/in/q"])  # the same inputs
    assert plan_of(root, f'{ATTENTION} regimes="none"').regimes == ()


def _expect(root: Path) -> None:
    result = judged(plan_of(root, f'{ATTENTION} expect="mismatch"'))
    assert result.status is Status.VERIFIED and not result.outcome_ok


def _timing(root: Path) -> None:
    timing = plan_of(root, f'{ATTENTION} timing="repeats=7 warmup=2"').request.timing
    assert timing is not None and (timing.repeats, timing.warmup) == (7, 2)
    assert plan_of(root, f'{ATTENTION} timing="off"').request.timing is None


def _timing_dims(root: Path) -> None:
    timing = plan_of(root, f'{ATTENTION} timing_dims="n=9"').request.timing
    assert timing is not None and [run.label for run in timing.runs] == ["timing"]
    assert plan_of(root, f'{ATTENTION} timing_dims="n=9"').arrays["t0/in/q"].shape[1] == 9


def _sweep(root: Path) -> None:
    timing = plan_of(root, f'{ATTENTION} sweep="8 16"').request.timing
    assert timing is not None and [run.size for run in timing.runs][1:] == [8, 16]


def _sweep_dim(root: Path) -> None:
    plan = plan_of(root, f'{ATTENTION} sweep="8" sweep_dim="m"')
    assert plan.arrays["t0/in/k"].shape[1] == 8 and plan.arrays["t0/in/q"].shape[1] == 3


def _heatmaps(root: Path) -> None:
    plan = plan_of(root, f'{ATTENTION} heatmaps="output"')
    assert set(judged(plan).arrays) == {"output"}
    assert not judged(plan_of(root, f'{ATTENTION} heatmaps="none"')).arrays


def _open(root: Path) -> None:
    spec = spec_of(root, f'{ATTENTION} open="heatmaps timings"')
    assert spec.open_sections == ("heatmaps", "timings")
    card = render_card(
        judged(plan_of(root, f'{ATTENTION} open="heatmaps timings"')),
        labels=labels_for("en"),
        image_url=lambda figure: "x.svg",
        open_sections=spec.open_sections,
    )
    assert '<details class="fc-section fc-figures" open>' in card
    assert '<details class="fc-section fc-shapes">' in card, "a section not named stays closed"
    shapes = render_card(
        judged(plan_of(root, ATTENTION)),
        labels=labels_for("en"),
        image_url=lambda figure: "x.svg",
        open_sections=("shapes",),
    )
    assert '<details class="fc-section fc-shapes" open>' in shapes
    assert '<details class="fc-section fc-figures">' in shapes


def _preset(root: Path) -> None:
    plan = plan_of(
        root, 'oracle="multihead" preset="keras-mha" mask="causal"', "class Mha:\n    pass"
    )
    assert plan.request.kind == "layer" and "attention_mask" in plan.request.calls.layer.kwargs
    assert plan.arrays["in/mask"].dtype == bool
    assert plan.request.weights["W_q"] == "query_dense.kernel"
    assert "W_q" in plan.request.preset_weights  # found under the one sub-layer holding it
    header = 'oracle="multihead" preset="keras-mha@block.mha" weights="W_o=out.kernel"'
    placed = plan_of(root, header, "class Mha:\n    pass").request
    assert placed.weights["W_q"] == "block.mha.query_dense.kernel"
    assert placed.weights["W_o"] == "out.kernel" and not placed.preset_weights


def _mask_dims(root: Path) -> None:
    shapes = {
        dims: plan_of(root, f'{ATTENTION} mask="padding" mask_dims="{dims}"')
        .arrays["in/mask"]
        .shape
        for dims in ("b n m", "b 1 m", "b 1 1 m", "b m n")
    }
    assert shapes == {
        "b n m": (2, 3, 4),
        "b 1 m": (2, 1, 4),
        "b 1 1 m": (2, 1, 1, 4),
        "b m n": (2, 4, 3),
    }
    causal = plan_of(root, f'{ATTENTION} mask="causal" mask_dims="n m"')
    assert causal.keep is not None
    assert np.array_equal(causal.arrays["in/mask"], (~causal.keep[0]).astype(np.float32))


def _formula(root: Path) -> None:
    assert judged(plan_of(root, f'{ATTENTION} formula="off"')).formula is None
    checked = judged(plan_of(root, ATTENTION)).formula
    assert checked is not None and not checked.required
    required = judged(plan_of(root, f'{ATTENTION} formula="required"')).formula
    assert required is not None and required.required


EFFECTS: dict[str, Callable[[Path], None]] = {
    "id": lambda root: assert_equal(spec_of(root, f'id="mine" {ATTENTION}').block_id, "mine"),
    "oracle": lambda root: assert_equal(plan_of(root, 'oracle="softmax"').oracle.name, "softmax"),
    "code": _code,
    "entry": lambda root: assert_equal(
        plan_of(
            root, f'{ATTENTION} entry="attend"', f"{FUNCTION}\n\ndef g():\n    pass"
        ).request.entry,
        "attend",
    ),
    "kind": lambda root: assert_equal(
        plan_of(root, f'{ATTENTION} kind="layer"').request.kind, "layer"
    ),
    "dims": lambda root: assert_equal(plan_of(root, 'oracle="attention" dims="n=7"').sizes["n"], 7),
    "mask": lambda root: assert_equal(
        plan_of(root, f'{ATTENTION} mask="causal"').request.calls.function.kwargs["mask"].array,
        "in/mask",
    ),
    "mask_convention": _mask_convention,
    "init": lambda root: assert_equal(
        dict(
            plan_of(
                root,
                f'{ATTENTION} init="units=d_k widths=[d_v, 2] axes=(-1,) center=false name=none"',
                LAYER,
            ).request.init
        ),
        {"units": 5, "widths": [6, 2], "axes": (-1,), "center": False, "name": None},
    ),
    "weights": lambda root: assert_equal(
        dict(plan_of(root, 'oracle="linear" weights="W=kernel"', LAYER).request.weights),
        {"W": "kernel"},
    ),
    "call": lambda root: assert_equal(
        [a.array for a in plan_of(root, f'{ATTENTION} call="v k q"').request.calls.function.args],
        ["in/v", "in/k", "in/q"],
    ),
    "returns": _returns,
    "params": lambda root: assert_equal(
        plan_of(root, 'oracle="layer_norm" params="epsilon=1e-3"').params["epsilon"], 1e-3
    ),
    "atol": _tolerance("atol"),
    "rtol": _tolerance("rtol"),
    "seed": _seed,
    "timeout": lambda root: assert_equal(spec_of(root, f'{ATTENTION} timeout="5"').timeout, 5.0),
    "expect": _expect,
    "perturb": lambda root: assert_equal(
        plan_of(root, f'{ATTENTION} perturb="false"', LAYER).request.perturb, False
    ),
    "timing": _timing,
    "timing_dims": _timing_dims,
    "heatmaps": _heatmaps,
    "open": _open,
    "sweep": _sweep,
    "sweep_dim": _sweep_dim,
    "regimes": _regimes,
    "preset": _preset,
    "mask_dims": _mask_dims,
    "symbols": lambda root: assert_equal(
        spec_of(root, f'{ATTENTION} symbols="A: [b, n, d_k] = q"').symbols, "A: [b, n, d_k] = q"
    ),
    "formula": _formula,
    "skip": lambda root: assert_equal(spec_of(root, f'{ATTENTION} skip="later"').skip, "later"),
}


def assert_equal(actual: object, expected: object) -> None:
    assert actual == expected, f"{actual!r} != {expected!r}"


# -- what could not take effect, and must say so --------------------------------------------

REFUSED: dict[str, list[tuple[str, str, str]]] = {
    # option: [(header, code, a part of the error's message)]
    "id": [(f'id="_x" {ATTENTION}', FUNCTION, "expected letters")],
    "oracle": [('oracle="atention"', FUNCTION, "did you mean 'attention'")],
    "code": [(f'{ATTENTION} code="docs/none.py:f"', FUNCTION, "docs/none.py")],
    "entry": [(f'{ATTENTION} entry="no-such"', FUNCTION, "expected a name")],
    "kind": [(f'{ATTENTION} kind="module"', FUNCTION, "expected one of auto")],
    "dims": [
        ('oracle="multihead" params="variant=self" dims="n=4 m=6"', FUNCTION, "m=6 cannot"),
        ('oracle="attention" dims="dk=5"', FUNCTION, "did you mean 'd_k'"),
    ],
    "mask": [('oracle="softmax" mask="causal"', FUNCTION, "takes no mask")],
    "mask_convention": [
        (f'{ATTENTION} mask_convention="keep"', FUNCTION, "the block passes no mask"),
        (f'{ATTENTION} mask="none" mask_convention="keep"', FUNCTION, "mask is none"),
        (f'{ATTENTION} mask_convention="additive"', FUNCTION, "the block passes no mask"),
        (
            f'{ATTENTION} mask="both" mask_convention="lengths" mask_dims="b"',
            FUNCTION,
            "name the query axis too",
        ),
    ],
    "init": [
        (f'{ATTENTION} init="units=2"', FUNCTION, "init: units cannot take effect"),
        (f'{ATTENTION} init="widths=[1, 2"', LAYER, "unclosed ["),
        (f'{ATTENTION} kind="function" init="units=2"', LAYER, "this block is a function"),
    ],
    "weights": [
        (f'{ATTENTION} weights="W_q=wq.kernel"', FUNCTION, "not a weight"),
        ('oracle="multihead" kind="function" weights="W_q=wq"', FUNCTION, "is a function"),
    ],
    "call": [
        (f'{ATTENTION} call="q k"', FUNCTION, "never passes 'v'"),
        (f'{ATTENTION} mask="padding" call="q k v"', FUNCTION, "never passes the block's mask"),
        ('oracle="linear" call="x"', FUNCTION, "never passes W"),
    ],
    "returns": [
        (f'{ATTENTION} returns="out"', FUNCTION, "has no output 'out'"),
        (f'{ATTENTION} returns="weights=scores output"', LAYER, "returned values first"),
        (f'{ATTENTION} returns="output weights=scores"', FUNCTION, "reads an attribute"),
    ],
    "params": [(f'{ATTENTION} params="epsilon=1e-3"', FUNCTION, "not a parameter")],
    "atol": [(f'{ATTENTION} atol="-1"', FUNCTION, "expected a number >= 0")],
    "rtol": [(f'{ATTENTION} rtol="x"', FUNCTION, "expected a number")],
    "seed": [(f'{ATTENTION} seed="-1"', FUNCTION, "whole number")],
    "timeout": [(f'{ATTENTION} timeout="0"', FUNCTION, "positive")],
    "expect": [(f'{ATTENTION} expect="pass"', FUNCTION, "expected one of verified")],
    "perturb": [
        (f'{ATTENTION} perturb="false"', FUNCTION, "perturb=false cannot take effect"),
        (f'{ATTENTION} kind="function" perturb="true"', FUNCTION, "this block is a function"),
    ],
    "timing": [(f'{ATTENTION} timing="repeats=0"', FUNCTION, ">= 1")],
    "timing_dims": [
        (f'{ATTENTION} timing="off" timing_dims="n=9"', FUNCTION, "timing is off"),
        ('oracle="multihead" params="variant=self" timing_dims="m=9"', FUNCTION, "makes m 5"),
    ],
    "heatmaps": [(f'{ATTENTION} heatmaps="hidden"', FUNCTION, "has no 'hidden' to draw")],
    "open": [
        (f'{ATTENTION} open="heatmap"', FUNCTION, "did you mean 'heatmaps'"),
        (f'{ATTENTION} open="scaling"', FUNCTION, "the card has no scaling section"),
        (f'{ATTENTION} timing="off" open="timings"', FUNCTION, "the card has no timings"),
        (f'{ATTENTION} heatmaps="none" open="heatmaps"', FUNCTION, "the card has no heatmaps"),
    ],
    "sweep": [(f'{ATTENTION} timing="off" sweep="8 16"', FUNCTION, "timing is off")],
    "sweep_dim": [
        (f'{ATTENTION} sweep_dim="m"', FUNCTION, "without sweep="),
        (f'{ATTENTION} sweep_dim="n"', FUNCTION, "without sweep="),
        ('oracle="multihead" params="variant=self" sweep="8" sweep_dim="m"', FUNCTION, "makes m 5"),
    ],
    "regimes": [
        (f'{ATTENTION} regimes="large logit"', FUNCTION, "did you mean 'large logits'"),
        (f'{ATTENTION} regimes="large logits,"', FUNCTION, "names separated by commas"),
    ],
    "preset": [
        (f'{ATTENTION} preset="keras-mhaa"', FUNCTION, "did you mean 'keras-mha'"),
        (f'{ATTENTION} preset="keras-mha@2mha"', FUNCTION, "must be an attribute path"),
        (f'{ATTENTION} preset="keras-mha" kind="auto"', FUNCTION, "preset keras-mha sets kind"),
        (f'{ATTENTION} preset="keras-mha" kind="function"', FUNCTION, "sets up a layer"),
        (
            f'{ATTENTION} preset="keras-mha" mask="padding" mask_convention="additive"',
            FUNCTION,
            "preset keras-mha sets mask_convention='keep'",
        ),
    ],
    "mask_dims": [
        (f'{ATTENTION} mask_dims="b 1 m"', FUNCTION, "the block passes no mask"),
        (f'{ATTENTION} mask="causal" mask_dims="b 1 m"', FUNCTION, "leaves out the query axis"),
        (f'{ATTENTION} mask="padding" mask_dims="b n k"', FUNCTION, "'k' is not an axis"),
        (f'{ATTENTION} mask="padding" mask_dims="b n n"', FUNCTION, "'n' is named twice"),
    ],
    "symbols": [
        (
            f'{ATTENTION} formula="off" symbols="A: [b, n, d_k] = q"',
            FUNCTION,
            "formula check is off",
        )
    ],
    "formula": [(f'{ATTENTION} formula="maybe"', FUNCTION, "expected one of on, off, required")],
    "skip": [(f'{ATTENTION} skip=""', FUNCTION, "expected a value")],
}


def test_every_option_is_covered() -> None:
    names = {option.name for option in BLOCK_OPTIONS}
    assert set(EFFECTS) == names, names ^ set(EFFECTS)
    assert set(REFUSED) == names, names ^ set(REFUSED)


@pytest.mark.parametrize("option", [option.name for option in BLOCK_OPTIONS])
def test_a_stated_value_takes_effect(option: str, tmp_path: Path) -> None:
    EFFECTS[option](tmp_path)


@pytest.mark.parametrize(
    ("option", "header", "code", "said"),
    [(option, *case) for option, cases in REFUSED.items() for case in cases],
)
def test_a_value_that_cannot_take_effect_is_an_error_at_the_block(
    option: str, header: str, code: str, said: str, tmp_path: Path
) -> None:
    assert option in header
    assert said in refusal(tmp_path, header, code)


def test_an_input_passed_as_another_with_the_same_numbers_is_a_note(tmp_path: Path) -> None:
    """A self-attention's q, k and v are one array: ``call="q mask=mask"`` passes them all."""
    header = 'oracle="multihead" params="variant=self" mask="causal" call="q mask=mask"'
    plan = plan_of(tmp_path, header)
    assert plan.notes == (
        "call= passes no k: its values are q's in this check, which the code receives",
        "call= passes no v: its values are q's in this check, which the code receives",
    )
    assert set(plan.notes) <= set(judged(plan, kind="layer").notes)


def test_returns_naming_more_values_than_the_code_returns_fails(tmp_path: Path) -> None:
    plan = plan_of(tmp_path, f'{ATTENTION} returns="output weights"')
    expected = plan.oracle.compute(dict(plan.inputs), plan.params)
    result = judged(plan, outputs=[np.float32(expected["output"])])
    assert result.status is Status.MISMATCH
    assert "weights: returns= names it as value 2, but the code returned only 1" in (
        result.headline()
    )
