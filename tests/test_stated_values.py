"""A value a block states against the page's defaults and the block's preset.

The rule: a value the block states takes effect exactly as written or is an error at its
``page:LINE``; a page's default applies to the blocks it can apply to, and where it cannot
(or the block's preset sets the same option) it is left out and the card says so. Each test
builds a real page (front matter and one block, whose fence opens at line 3 of the page's
Markdown) and looks at the spec, the plan, the worker's request or the judged result. Pure:
no TensorFlow runs.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from formula_check.checking.judge import evaluate
from formula_check.errors import FormulaCheckError, SpecError
from formula_check.messages import CheckReply
from formula_check.model import CheckSpec, Location, Status
from formula_check.pages.blocks import PageBlock, Settings, page_blocks
from formula_check.planning.plan import Plan, plan_check
from formula_check.results import CheckResult, Environment

PAGE = "docs/p.md"
WHERE = Location(PAGE, 3)
ATTENTION = 'oracle="attention" dims="b=2 n=3 m=4 d_k=5 d_v=6"'
FUNCTION = "def attend(q, k, v, mask=None):\n    return q"
LAYER = "class Layer:\n    def __init__(self, units=1):\n        pass"


def block(
    root: Path, header: str, page: dict[str, Any] | None = None, code: str = FUNCTION
) -> PageBlock:
    """The one block of a page whose formula fence opens at line 3; ``page``: the
    ``formula_check:`` defaults of its front matter."""
    text = f"# Page\n\n```formula {header}\nx\n```\n\n```python\n{code}\n```\n"
    meta = {"formula_check": page} if page else None
    (found,) = page_blocks(text.split("\n"), page=PAGE, meta=meta, settings=Settings(root))
    return found


def spec(
    root: Path, header: str, page: dict[str, Any] | None = None, code: str = FUNCTION
) -> CheckSpec:
    found = block(root, header, page, code)
    assert found.spec is not None, found.error
    return found.spec


def plan(root: Path, header: str, page: dict[str, Any] | None = None, code: str = FUNCTION) -> Plan:
    return plan_check(spec(root, header, page, code), str(root))


def refused(
    root: Path, header: str, page: dict[str, Any] | None = None, code: str = FUNCTION
) -> str:
    """The error the block gets, at its own page:line, when read or planned."""
    found = block(root, header, page, code)
    try:
        if found.error is not None:
            raise found.error
        assert found.spec is not None
        plan_check(found.spec, str(root))
    except FormulaCheckError as error:
        assert error.location == WHERE, f"{error.location}: {error.message}"
        return error.message
    raise AssertionError(f"{header!r} under {page!r} was accepted")


def judged_as_function(planned: Plan) -> CheckResult:
    """The result for a function that returns the oracle's own outputs, on the standard
    inputs alone: the input regimes say they were not run."""
    arrays = {**planned.inputs, **planned.weights}
    if planned.keep is not None:
        arrays["mask"] = planned.keep
    expected = planned.oracle.compute(arrays, planned.params)
    outputs = [np.asarray(expected[t.name], np.float32) for t in planned.oracle.outputs]
    reply = CheckReply(
        kind="function",
        outputs=len(outputs),
        output_dtypes=("float32",) * 2,
        regimes_skipped=tuple((regime.name, "not run here") for regime in planned.regimes),
    )
    got = {f"out/{i}": value for i, value in enumerate(outputs)}
    return evaluate(planned, reply, got, Environment())


# -- which values the block states ------------------------------------------------------------


def test_the_spec_records_the_options_the_block_states_itself(tmp_path: Path) -> None:
    found = spec(tmp_path, f'{ATTENTION} seed=3 mask_dims="b n m" mask="causal"', {"atol": 1e-3})
    assert found.stated == ("dims", "mask", "mask_dims", "oracle", "seed")
    assert found.atol == 1e-3 and not found.states("atol")
    assert found.states("mask_dims") and found.params["mask_dims"] == "b n m"


def test_a_spec_made_in_code_states_every_value() -> None:
    made = CheckSpec("b", WHERE, "softmax", spec_snippet())
    assert made.stated is None and made.states("weights") and made.states("anything")


def spec_snippet() -> Any:
    from formula_check.snippets import inline_snippet

    return inline_snippet("def f(x):\n    return x\n", WHERE, None)


# -- a function block: weights, init, perturb ---------------------------------------------------

FUNCTION_HEADER = f'{ATTENTION} kind="function"'


@pytest.mark.parametrize(
    ("option", "page_value", "header_value"),
    [
        ("weights", {"W_q": "wq.kernel"}, 'weights="W_q=wq.kernel"'),
        ("init", "units=d_k", 'init="units=d_k"'),
        ("perturb", False, 'perturb="false"'),
    ],
)
def test_a_function_block_stating_what_only_a_layer_takes_is_an_error(
    tmp_path: Path, option: str, page_value: object, header_value: str
) -> None:
    oracle = 'oracle="multihead"' if option == "weights" else ATTENTION
    message = refused(tmp_path, f'{oracle} kind="function" {header_value}')
    assert message.startswith(
        f'{option}= cannot take effect: this block is a function (kind="function")'
    )


def test_perturb_true_on_a_function_block_is_an_error_too(tmp_path: Path) -> None:
    """``perturb="true"`` is the default's value, and still cannot act on a function."""
    assert refused(tmp_path, f'{FUNCTION_HEADER} perturb="true"').startswith("perturb= cannot")


def test_a_page_s_layer_options_leave_its_function_blocks_alone_and_say_so(
    tmp_path: Path,
) -> None:
    page = {"weights": {"W_q": "wq.kernel"}, "init": "units=d_k", "perturb": False}
    planned = plan(tmp_path, 'oracle="multihead" kind="function" formula="off"', page)
    request = planned.request
    assert dict(request.weights) == {} and dict(request.init) == {} and request.perturb
    assert planned.notes[:3] == (
        "the page's default weights= does not apply to this block: this block is a function "
        '(kind="function"), given its weights as arguments',
        "the page's default init= does not apply to this block: this block is a function "
        '(kind="function"), called, never constructed',
        "the page's default perturb= does not apply to this block: this block is a function "
        '(kind="function"); only a layer\'s own weights are moved',
    )
    result = judged_as_function(planned)
    assert result.status is Status.VERIFIED, result.headline()
    assert set(planned.notes) <= set(result.notes)


def test_the_same_page_options_reach_its_layer_blocks(tmp_path: Path) -> None:
    page = {"weights": {"W_q": "wq.kernel"}, "init": "units=d_model", "perturb": False}
    request = plan(tmp_path, 'oracle="multihead" kind="layer"', page, LAYER).request
    assert dict(request.weights) == {"W_q": "wq.kernel"}
    assert dict(request.init) == {"units": 12} and not request.perturb
    assert request.init_sources["units"] == {
        "origin": "init",
        "said": "the page's init=; d_model from dims",
    }


def test_a_page_weight_map_reaching_a_function_of_kind_auto_is_not_used(tmp_path: Path) -> None:
    """The code turns out a function only when it runs: the page's map serves layers."""
    planned = plan(tmp_path, 'oracle="ffn" formula="off"', {"weights": {"W_1": "inner.kernel"}})
    assert judged_as_function(planned).status is Status.VERIFIED


def test_a_block_s_own_weight_map_on_a_function_of_kind_auto_is_an_error(tmp_path: Path) -> None:
    planned = plan(tmp_path, 'oracle="ffn" weights="W_1=inner.kernel" formula="off"')
    with pytest.raises(SpecError) as caught:
        judged_as_function(planned)
    assert caught.value.location == WHERE
    assert "this code is a function" in caught.value.message
    assert "drop weights=" in caught.value.message


def test_a_page_weight_map_gives_each_block_the_names_its_oracle_has(tmp_path: Path) -> None:
    """A page of layer norms and linear maps: each block takes its oracle's weights."""
    page = {"weights": {"gamma": "norm.gamma", "beta": "norm.beta", "W": "kernel"}}
    norm = plan(tmp_path, 'oracle="layer_norm" kind="layer"', page, LAYER)
    assert dict(norm.request.weights) == {"gamma": "norm.gamma", "beta": "norm.beta"}
    assert norm.notes[0] == (
        "the page's default weights W does not apply: this block's oracle has no such weight or "
        "parameter"
    )
    linear = plan(tmp_path, 'oracle="linear" kind="layer"', page, LAYER)
    assert dict(linear.request.weights) == {"W": "kernel"}


# -- what the block's oracle has: a page mixing oracles -----------------------------------------

FFN = 'oracle="ffn" dims="d_model=6 d_ff=10"'
FFN_CODE = "def ffn(x, w1, b1, w2, b2):\n    return x"


@pytest.mark.parametrize(
    ("page", "notes"),
    [
        (
            {"sweep": "8 64 512", "sweep_dim": "m"},
            (
                "the page's default sweep_dim= does not apply to this block: oracle 'ffn' has "
                "no dim 'm' to sweep",
                "the page's default sweep= does not apply to this block: its sizes are for m, "
                "a dim oracle 'ffn' lacks",
            ),
        ),
        (
            {"timing_dims": "m=64"},
            (
                "the page's default timing_dims m does not apply: this block's oracle has no "
                "such dim",
            ),
        ),
    ],
    ids=["sweep_dim", "timing_dims"],
)
def test_a_page_s_timed_dim_a_block_s_oracle_lacks_is_left_out_with_a_note(
    tmp_path: Path, page: dict[str, Any], notes: tuple[str, ...]
) -> None:
    """A page about attention sweeping m also holds an FFN block: timed at "sweep m=8", ...
    every run would be at the same sizes."""
    planned = plan(tmp_path, FFN, page, FFN_CODE)
    assert planned.request.timing is not None
    assert [run.label for run in planned.request.timing.runs] == ["check"]
    assert planned.notes == notes


def test_a_page_s_regimes_apply_where_the_block_s_oracle_has_them(tmp_path: Path) -> None:
    """A page of softmax blocks checked on their large values only also holds an FFN block:
    the FFN has no such regime, so it keeps its own, and its card says why; a block naming
    a regime its oracle lacks is an error at the block."""
    page = {"regimes": "large values"}
    assert spec(tmp_path, 'oracle="softmax"', page, "def f(x):\n    return x").regimes == (
        "large values",
    )
    ffn = spec(tmp_path, FFN, page, FFN_CODE)
    assert ffn.regimes is None
    assert ffn.notes == (
        "the page's default regimes= does not apply to this block: oracle 'ffn' has no regime "
        "large values",
    )
    assert spec(tmp_path, FFN, {"regimes": "none"}, FFN_CODE).regimes == ()
    said = refused(tmp_path, f'{FFN} regimes="large values"', None, FFN_CODE)
    assert said.startswith("regimes: oracle 'ffn' has no regime 'large values'")


def test_a_page_s_timing_dims_keep_the_dims_the_block_s_oracle_has(tmp_path: Path) -> None:
    planned = plan(tmp_path, FFN, {"timing_dims": "m=64 n=7"}, FFN_CODE)
    assert dict(planned.spec.timing.dims) == {"n": 7}
    assert planned.request.timing is not None
    assert [run.label for run in planned.request.timing.runs] == ["timing"]


@pytest.mark.parametrize(
    ("header", "said"),
    [
        ('sweep="8 64" sweep_dim="m"', "sweep_dim: 'm' is not a dim of oracle 'ffn'"),
        ('timing_dims="m=64"', "timing_dims: 'm' is not a dim of oracle 'ffn'"),
        ('mask="padding"', "oracle 'ffn' takes no mask (mask='padding')"),
    ],
)
def test_the_same_value_in_the_block_s_own_header_is_an_error(
    tmp_path: Path, header: str, said: str
) -> None:
    assert refused(tmp_path, f"{FFN} {header}", None, FFN_CODE).startswith(said)


def test_a_timed_dim_the_oracle_lacks_is_an_error_in_a_spec_built_without_a_page(
    tmp_path: Path,
) -> None:
    """resolve_dims keeps a dim the oracle lacks among its sizes: it once timed the FFN at
    "sweep m=8", "m=64" at the same sizes."""
    written = spec(tmp_path, FFN, None, FFN_CODE)
    swept = dataclasses.replace(written, sweep=(8, 64), sweep_dim="m")
    with pytest.raises(SpecError) as caught:
        plan_check(swept, str(tmp_path))
    assert caught.value.message.startswith("sweep: oracle 'ffn' has no dim 'm' to time at 8")


def test_a_page_s_mask_is_left_out_of_a_block_whose_oracle_takes_none(tmp_path: Path) -> None:
    """The page's attention blocks take its mask; its FFN block was an error: "oracle 'ffn'
    takes no mask (mask='padding')"."""
    page = {"mask": "padding", "mask_convention": "keep", "mask_dims": "b 1 m"}
    planned = plan(tmp_path, FFN, page, FFN_CODE)
    assert planned.keep is None and "in/mask" not in planned.arrays
    assert planned.notes == tuple(
        f"the page's default {option}= does not apply to this block: oracle 'ffn' takes no mask"
        for option in ("mask", "mask_convention", "mask_dims")
    )


def test_a_page_s_preset_for_another_oracle_is_left_out_with_a_note(tmp_path: Path) -> None:
    """It once reached the FFN block as call='q v key=k ...', which the author never wrote."""
    planned = plan(tmp_path, f'{FFN} kind="layer"', {"preset": "keras-mha"}, LAYER)
    assert planned.spec.preset is None and planned.spec.call is None
    assert not planned.request.weights
    assert planned.notes == (
        "the page's default preset= does not apply to this block: preset keras-mha is for "
        "blocks of oracle 'multihead', and this block's oracle is 'ffn'",
    )


def test_a_block_s_own_preset_for_another_oracle_is_an_error_naming_it(tmp_path: Path) -> None:
    assert refused(tmp_path, f'{FFN} preset="keras-mha"', None, LAYER) == (
        "preset= cannot take effect: preset keras-mha is for blocks of oracle 'multihead', and "
        "this block's oracle is 'ffn'"
    )


def test_a_spec_built_without_a_page_with_another_oracle_s_preset_is_an_error(
    tmp_path: Path,
) -> None:
    written = dataclasses.replace(spec(tmp_path, FFN, None, LAYER), preset="keras-layer-norm")
    with pytest.raises(SpecError) as caught:
        plan_check(written, str(tmp_path))
    assert "preset keras-layer-norm is for blocks of oracle 'layer_norm'" in caught.value.message


@pytest.mark.parametrize(
    ("page", "note"),
    [
        (
            {"call": "q k v mask=mask training=false"},
            "the page's default call= does not apply to this block: oracle 'ffn' has no q, k, v",
        ),
        (
            {"returns": "output weights"},
            "the page's default returns= does not apply to this block: oracle 'ffn' has no "
            "output weights",
        ),
        (
            {"heatmaps": "weights"},
            "the page's default heatmaps weights does not apply: this block's oracle has no "
            "such output or intermediate to draw",
        ),
    ],
    ids=["call", "returns", "heatmaps"],
)
def test_a_page_s_names_of_another_oracle_are_left_out_with_a_note(
    tmp_path: Path, page: dict[str, Any], note: str
) -> None:
    planned = plan(tmp_path, FFN, page, FFN_CODE)
    assert (planned.spec.call, planned.spec.returns, planned.spec.heatmaps) == (None,) * 3
    assert planned.notes == (note,)


def test_a_page_s_heatmaps_keep_those_the_block_s_oracle_draws(tmp_path: Path) -> None:
    planned = plan(tmp_path, FFN, {"heatmaps": "weights hidden"}, FFN_CODE)
    assert planned.spec.heatmaps == ("hidden",)


def test_a_page_s_call_of_the_block_s_own_names_applies(tmp_path: Path) -> None:
    planned = plan(tmp_path, FFN, {"call": "x training=false"}, FFN_CODE)
    assert planned.spec.call == ("x", "training=false") and not planned.notes


# -- options that act on another: a mask, timing, a sweep, the formula -------------------------


@pytest.mark.parametrize(
    ("header", "said"),
    [
        (
            'mask_convention="additive"',
            "mask_convention= cannot take effect: the block passes no mask",
        ),
        ('mask_convention="keep"', "mask_convention= cannot take effect: the block passes no mask"),
        ('mask_dims="b 1 m"', "mask_dims= cannot take effect: the block passes no mask"),
    ],
)
def test_a_stated_mask_option_without_a_mask_is_an_error(
    tmp_path: Path, header: str, said: str
) -> None:
    """``mask_convention="additive"`` is the default's value: stated, it is still a value."""
    assert refused(tmp_path, f"{ATTENTION} {header}").startswith(said)


def test_a_stated_mask_option_under_a_page_without_a_mask_is_an_error(tmp_path: Path) -> None:
    assert refused(tmp_path, f'{ATTENTION} mask_convention="keep"', {"mask": "none"}).startswith(
        "mask_convention= cannot take effect: the block passes no mask"
    )


def test_a_page_s_mask_options_apply_to_its_blocks_with_a_mask_only(tmp_path: Path) -> None:
    page = {"mask_convention": "keep", "mask_dims": "b 1 m"}
    masked = plan(tmp_path, f'{ATTENTION} mask="padding"', page)
    assert masked.arrays["in/mask"].dtype == bool and masked.arrays["in/mask"].shape == (2, 1, 4)
    bare = plan(tmp_path, ATTENTION, page)
    assert "in/mask" not in bare.arrays
    assert bare.notes[:2] == (
        "the page's default mask_convention= does not apply to this block: the block passes no "
        'mask (add mask="padding", "causal" or "both")',
        "the page's default mask_dims= does not apply to this block: the block passes no mask "
        '(add mask="padding", "causal" or "both")',
    )


@pytest.mark.parametrize("header", ['timing_dims="n=9"', 'sweep="8 16"'])
def test_a_stated_timing_option_under_a_page_with_timing_off_is_an_error(
    tmp_path: Path, header: str
) -> None:
    option = header.partition("=")[0]
    assert refused(tmp_path, f"{ATTENTION} {header}", {"timing": False}) == (
        f"{option}= cannot take effect: timing is off"
    )


def test_a_page_s_sweep_leaves_a_block_that_turns_timing_off_alone(tmp_path: Path) -> None:
    planned = plan(tmp_path, f'{ATTENTION} timing="off"', {"sweep": "8 16", "sweep_dim": "m"})
    assert planned.request.timing is None
    assert planned.notes[:2] == (
        "the page's default sweep= does not apply to this block: timing is off",
        "the page's default sweep_dim= does not apply to this block: nothing is swept without "
        "sweep= (the sizes to time at)",
    )


def test_a_page_s_timing_turned_back_on_by_a_block_times_it(tmp_path: Path) -> None:
    timing = plan(tmp_path, f'{ATTENTION} timing="repeats=7"', {"timing": False}).request.timing
    assert timing is not None and timing.repeats == 7


def test_a_stated_sweep_dim_without_a_sweep_is_an_error_even_at_its_default(tmp_path: Path) -> None:
    assert refused(tmp_path, f'{ATTENTION} sweep_dim="n"').startswith(
        "sweep_dim= cannot take effect: nothing is swept without sweep="
    )


@pytest.mark.parametrize(
    ("header", "said"),
    [
        (
            'oracle="multihead" params="variant=self" sweep="8 16" sweep_dim="m"',
            "sweep: m=8 cannot take effect: oracle 'multihead' makes m 5",
        ),
        (
            'oracle="multihead" params="variant=self" timing_dims="m=9"',
            "timing_dims: m=9 cannot take effect: oracle 'multihead' makes m 5",
        ),
    ],
)
def test_a_timed_size_the_oracle_derives_is_an_error(
    tmp_path: Path, header: str, said: str
) -> None:
    """Self-attention's m is n: a sweep of m would time every run at the same size."""
    assert refused(tmp_path, header).startswith(said)


def test_a_page_s_symbols_leave_a_block_without_its_formula_check_alone(tmp_path: Path) -> None:
    found = spec(tmp_path, f'{ATTENTION} formula="off"', {"symbols": "A: [b, n, d_k] = q"})
    assert found.symbols == "" and found.notes == (
        "the page's default symbols= does not apply to this block: the formula check is off "
        "(formula=off), so no formula is compiled",
    )
    assert refused(
        tmp_path, f'{ATTENTION} symbols="A: [b, n, d_k] = q"', {"formula": False}
    ).startswith("symbols= cannot take effect: the formula check is off")


@pytest.mark.parametrize(
    ("header", "page", "said"),
    [
        (
            'open="scaling"',
            None,
            "open=scaling cannot take effect: the card has no scaling section",
        ),
        (
            'open="timings"',
            {"timing": False},
            "open=timings cannot take effect: the card has no timings",
        ),
        (
            'open="heatmaps"',
            {"heatmaps": "none"},
            "open=heatmaps cannot take effect: the card has no",
        ),
    ],
)
def test_a_section_the_card_will_not_have_cannot_be_opened(
    tmp_path: Path, header: str, page: dict[str, Any] | None, said: str
) -> None:
    assert refused(tmp_path, f"{ATTENTION} {header}", page).startswith(said)


def test_open_all_opens_whatever_the_card_has(tmp_path: Path) -> None:
    assert spec(tmp_path, f'{ATTENTION} open="all"', {"timing": False}).open_sections


def test_a_skipped_block_s_options_are_still_checked(tmp_path: Path) -> None:
    """Nothing runs, but the header is kept for when the block runs again: a value that
    could never take effect says so now."""
    assert refused(tmp_path, f'{ATTENTION} skip="later" mask_convention="keep"').startswith(
        "mask_convention= cannot take effect"
    )


# -- a preset against the page's defaults --------------------------------------------------------

MHA = 'oracle="multihead" preset="keras-mha" mask="causal"'
MHA_CODE = "class Mha:\n    pass"


@pytest.mark.parametrize(
    ("page", "field", "preset_value"),
    [
        ({"kind": "function"}, "kind", "layer"),
        ({"mask_convention": "neg-inf"}, "mask_convention", "keep"),
        (
            {"call": "q k v mask=mask"},
            "call",
            ("q", "v", "key=k", "attention_mask=mask", "return_attention_scores=true"),
        ),
    ],
)
def test_a_preset_fills_an_option_over_the_page_s_default(
    tmp_path: Path, page: dict[str, Any], field: str, preset_value: object
) -> None:
    """Once the page's default kept the preset out (a page of functions made keras-mha a
    function, and its weight map an error); the preset now wins, and the card says so."""
    planned = plan(tmp_path, MHA, page, MHA_CODE)
    assert getattr(planned.spec, field) == preset_value
    assert planned.notes[0] == (
        f"the page's default {field}= does not apply: preset keras-mha sets it"
    )


def test_a_preset_s_weight_map_and_keywords_replace_the_page_s(tmp_path: Path) -> None:
    page = {"weights": {"W_q": "wq.kernel", "W": "kernel"}, "init": "units=d_model"}
    request = plan(tmp_path, MHA, page, MHA_CODE).request
    assert request.weights["W_q"] == "query_dense.kernel" and "W" not in request.weights
    assert set(request.init) == {"num_heads", "key_dim"}
    assert "W_q" in request.preset_weights


def test_a_page_s_params_apply_under_a_preset_except_those_it_sets(tmp_path: Path) -> None:
    page = {"params": "variant=self", "mask_dims": "b m"}
    planned = plan(tmp_path, MHA, page, MHA_CODE)
    assert planned.spec.params["variant"] == "self"
    assert planned.spec.params["mask_dims"] == "b n m"
    assert planned.arrays["in/mask"].shape == (2, 5, 5)


def test_a_block_s_own_value_wins_over_its_preset(tmp_path: Path) -> None:
    header = f'{MHA} mask_convention="neg-inf" weights="W_o=out.kernel" mask_dims="b 1 n m"'
    planned = plan(tmp_path, header, None, MHA_CODE)
    assert planned.spec.mask_convention == "neg-inf"
    assert planned.request.weights["W_o"] == "out.kernel"
    assert planned.request.weights["W_q"] == "query_dense.kernel"
    assert planned.arrays["in/mask"].shape == (2, 1, 5, 7)


@pytest.mark.parametrize(
    ("header", "said"),
    [
        ('kind="auto"', "kind= cannot take effect: preset keras-mha sets kind='layer'"),
        (
            'mask_convention="additive"',
            "mask_convention= cannot take effect: preset keras-mha sets mask_convention='keep'",
        ),
    ],
)
def test_a_page_s_preset_never_overrides_a_block_s_own_value(
    tmp_path: Path, header: str, said: str
) -> None:
    """The same values in the block's own header were already errors; from the page's
    preset they were overridden without a word."""
    message = refused(
        tmp_path, f'oracle="multihead" mask="causal" {header}', {"preset": "keras-mha"}
    )
    assert message.startswith(said)


def test_a_page_s_preset_leaves_a_function_block_alone(tmp_path: Path) -> None:
    planned = plan(tmp_path, 'oracle="multihead" kind="function"', {"preset": "keras-mha"})
    assert planned.spec.preset is None and planned.request.kind == "function"
    assert not planned.request.weights
    assert planned.notes[0] == (
        "the page's default preset= does not apply to this block: preset keras-mha sets up a "
        "layer, and this block is a function"
    )


def test_a_block_s_own_preset_on_a_function_block_is_an_error(tmp_path: Path) -> None:
    assert refused(tmp_path, 'oracle="multihead" kind="function" preset="keras-mha"') == (
        "preset= cannot take effect: preset keras-mha sets up a layer, and this block is a function"
    )


def test_perturb_as_a_page_default_leaves_a_function_found_by_auto_alone(tmp_path: Path) -> None:
    """``kind="auto"`` code that turns out to be a function: the page's ``perturb:`` does not
    apply to it; the block's own ``perturb=`` is an error at its line, whichever its value."""
    header = f'{ATTENTION} formula="off"'
    result = judged_as_function(plan(tmp_path, header, {"perturb": False}))
    assert result.status is Status.VERIFIED, result.headline()
    for value in ("true", "false"):
        with pytest.raises(SpecError) as caught:
            judged_as_function(plan(tmp_path, f'{header} perturb="{value}"'))
        assert caught.value.location == WHERE
        assert caught.value.message.startswith(f"perturb={value} cannot take effect")
