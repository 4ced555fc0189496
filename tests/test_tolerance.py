"""The tolerance derived from float32 rounding, and the input regimes that reveal.

Correct code at the sizes users write verifies with no tolerance option; code that is wrong
only where standard-normal inputs never reach (a ReLU6, a weak mask constant, an ε out of
place) is caught on the regime that reaches it, and the verdict says which.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
import pytest

from formula_check.model import Status
from formula_check.oracles import Oracle, TensorSpec, register
from formula_check.oracles.tolerance import derive, rounding_samples
from implementations import CORRECT, FFN, LAYER_NORM, PE, SDPA
from support import compare, run

TUTORIAL_MHA = {"b": 1, "n": 60, "m": 60, "d_model": 512, "h": 8}


@pytest.mark.tf
@pytest.mark.parametrize("case", ["multihead-tutorial", "multihead-keras"])
def test_tutorial_sized_multihead_attention_verifies_with_no_tolerance_option(case: str) -> None:
    oracle, source, options = CORRECT[case]
    result = run(oracle, source, **{**options, "dims": TUTORIAL_MHA})
    assert result.status is Status.VERIFIED, result.headline()
    standard = [v for v in result.verdicts if not v.regime]
    assert all(v.tolerance.startswith("derived") for v in standard)
    # the derived tolerance is not a loose one: correct code uses a real share of it
    assert max(v.used for v in result.verdicts) > 0.01
    # each tolerance line says how it came about ("tolerance of output: derived: ..." where
    # the outputs' tolerances differ, since each line names its outputs)
    lines = [note for note in result.notes if note.startswith("tolerance")]
    assert lines and all(": derived: " in note for note in lines)
    # judged against the one-draw bound, the share it reports is an upper one, and says so
    assert "within tolerance (at most " in result.headline()


@pytest.mark.tf
@pytest.mark.parametrize(
    ("case", "dims"),
    [
        ("attention-causal", {"b": 1, "n": 2048, "m": 2048, "d_k": 64, "d_v": 48}),
        ("ffn", {"b": 1, "n": 32, "d_model": 1024, "d_ff": 4096}),
        ("multihead-tutorial", {"b": 1, "n": 96, "m": 80, "d_model": 1024, "h": 8}),
        ("positional_encoding", {"n": 2048, "d_model": 1024}),
    ],
)
def test_correct_code_at_large_sizes_verifies(case: str, dims: dict[str, int]) -> None:
    oracle, source, options = CORRECT[case]
    result = run(oracle, source, **{**options, "dims": dims})
    assert result.status is Status.VERIFIED, result.headline()


LARGE_DRIFTS = {
    "attention: sqrt(d_k) replaced by d_k": (
        "attention-causal",
        "tf.math.sqrt(dk)",
        "dk",
        {"b": 1, "n": 1024, "m": 1024, "d_k": 64, "d_v": 48},
    ),
    "ffn: missing second bias": (
        "ffn",
        "tf.matmul(hidden, W_2) + b_2",
        "tf.matmul(hidden, W_2)",
        {"b": 1, "n": 32, "d_model": 1024, "d_ff": 4096},
    ),
    "positional encoding: sin and cos swapped": (
        "positional_encoding",
        "tf.sin(angles) * even + tf.cos(angles) * (1 - even)",
        "tf.cos(angles) * even + tf.sin(angles) * (1 - even)",
        {"n": 2048, "d_model": 1024},
    ),
}


@pytest.mark.tf
@pytest.mark.parametrize("name", sorted(LARGE_DRIFTS))
def test_drifts_are_still_caught_at_large_sizes(name: str) -> None:
    case, old, new, dims = LARGE_DRIFTS[name]
    oracle, source, options = CORRECT[case]
    assert old in source
    result = run(oracle, source.replace(old, new), **{**options, "dims": dims})
    assert result.status is Status.MISMATCH, result.headline()


def _only_on(result: Any, regime: str) -> None:
    """The code differs on ``regime`` (eagerly, and as a graph where it traces) and agrees
    on the standard inputs."""
    assert result.status is Status.MISMATCH, result.headline()
    standard = [v for v in result.verdicts if not v.regime]
    assert standard and all(v.ok for v in standard), result.headline()
    failed = {v.regime for v in result.verdicts if not v.ok}
    traced = any(v.regime == "tf.function" for v in result.verdicts)
    assert failed == {regime, *([f"tf.function, {regime}"] if traced else [])}, result.headline()
    assert f"({regime}): max |Δ|" in result.headline()


@pytest.mark.tf
def test_relu6_is_caught_on_wide_inputs() -> None:
    result = run("ffn", FFN.replace("tf.nn.relu(", "tf.nn.relu6("))
    _only_on(result, "wide")


@pytest.mark.tf
@pytest.mark.parametrize("mask", ["causal", "padding"])
def test_a_weak_mask_constant_is_caught_where_masked_keys_score_high(mask: str) -> None:
    result = run("attention", SDPA.replace("mask * -1e9", "mask * -100.0"), mask=mask)
    _only_on(result, "masked keys score high")


@pytest.mark.tf
def test_a_weak_replacement_constant_is_caught_too() -> None:
    oracle, source, options = CORRECT["attention-keep-mask"]
    weak = source.replace("tf.fill(tf.shape(scores), -1e9)", "tf.fill(tf.shape(scores), -100.0)")
    assert weak != source
    result = run(oracle, weak, **options)
    assert result.status is Status.MISMATCH, result.headline()


@pytest.mark.tf
def test_a_weak_mask_constant_is_caught_through_projections() -> None:
    oracle, source, options = CORRECT["multihead-tutorial-masked-self"]
    weak = source.replace("mask * -1e9", "mask * -100.0")
    assert weak != source
    result = run(oracle, weak, **options)
    assert result.status is Status.MISMATCH, result.headline()
    assert any(v.regime == "large logits" and not v.ok for v in result.verdicts)


@pytest.mark.tf
def test_a_tf_function_entry_is_checked() -> None:
    decorated = SDPA.replace(
        "def scaled_dot_product_attention", "@tf.function\ndef scaled_dot_product_attention"
    )
    assert run("attention", decorated, mask="causal").status is Status.VERIFIED


@pytest.mark.tf
def test_a_table_shorter_than_the_far_positions_is_noted_not_failed() -> None:
    capped = """
import numpy as np
import tensorflow as tf

TABLE_LENGTH = 1000

def positional_encoding(position, d_model):
    pos = np.arange(TABLE_LENGTH)[:, np.newaxis]
    i = np.arange(d_model)[np.newaxis, :]
    angles = pos / np.power(10000, (2 * (i // 2)) / np.float32(d_model))
    angles[:, 0::2] = np.sin(angles[:, 0::2])
    angles[:, 1::2] = np.cos(angles[:, 1::2])
    return tf.cast(angles[np.newaxis, :position, :], tf.float32)
"""
    result = run("positional_encoding", capped)
    assert result.status is Status.VERIFIED, result.headline()
    assert any(note.startswith("not checked on the far positions inputs") for note in result.notes)


@pytest.mark.tf
@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("tf.sqrt(variance + eps)", "(tf.sqrt(variance) + eps)"),  # ε outside the root
        ("tf.sqrt(variance + eps)", "tf.sqrt(variance)"),  # ε dropped
        ("tf.sqrt(variance + eps)", "tf.sqrt(tf.abs(variance - eps))"),  # ε subtracted
        ("eps=1e-6", "eps=1e-9"),  # another ε
    ],
)
def test_epsilon_mistakes_are_caught_on_rows_of_variance_near_epsilon(old: str, new: str) -> None:
    assert old in LAYER_NORM
    result = run("layer_norm", LAYER_NORM.replace(old, new))
    assert result.status is Status.MISMATCH, result.headline()
    assert any(v.regime == "variance near ε" and not v.ok for v in result.verdicts)


@pytest.mark.tf
def test_positions_far_along_a_sequence_are_checked() -> None:
    narrow = PE.replace(
        "pos = tf.range(position, dtype=tf.float32)",
        "pos = tf.cast(tf.range(position, dtype=tf.bfloat16), tf.float32)",
    )
    assert narrow != PE
    result = run("positional_encoding", narrow)
    _only_on(result, "far positions")
    assert any("far positions (positions 0 to 4095)" in note for note in result.notes)


@pytest.mark.tf
def test_a_card_says_which_regimes_ran() -> None:
    oracle, source, options = CORRECT["attention-causal"]
    result = run(oracle, source, **options)
    assert result.status is Status.VERIFIED
    eager = ("large logits", "masked keys score high")
    assert result.regimes() == (*eager, "tf.function", *(f"tf.function, {r}" for r in eager))
    assert any(
        note.startswith("also checked on other inputs: large logits") for note in result.notes
    )
    assert "also within tolerance on large logits, masked keys score high inputs" in result.detail()


@pytest.mark.tf
def test_a_stated_tolerance_wins() -> None:
    wrong = SDPA.replace("tf.math.sqrt(dk)", "dk")
    loose = run("attention", wrong, atol=10.0)
    assert loose.status is Status.VERIFIED
    assert all("stated by the block" in v.tolerance for v in loose.verdicts)
    assert run("attention", wrong).status is Status.MISMATCH


def _upcasting(arrays: Any, params: Any) -> dict[str, Any]:
    return {"output": np.asarray(arrays["x"], dtype=np.float64) * 2.0}


@pytest.mark.tf
def test_an_oracle_that_upcasts_is_judged_with_the_fixed_tolerance_and_says_so() -> None:
    register(
        Oracle(
            name="doubled_upcasting",
            title="Doubled",
            latex=r"y = 2x",
            compute=_upcasting,
            inputs=(TensorSpec("x", ("n", "d")),),
            outputs=(TensorSpec("output", ("n", "d")),),
            dims={"n": 3, "d": 5},
            source="test",
        ),
        replace=True,
    )
    source = "import tensorflow as tf\n\ndef double(x):\n    return 2.0 * x\n"
    result = run("doubled_upcasting", source, check_formula=False)
    assert result.status is Status.VERIFIED, result.headline()
    assert all("could not be measured" in v.tolerance for v in result.verdicts)
    assert any("could not be measured" in note for note in result.notes)


def test_the_headline_names_the_largest_difference_and_the_worst_element() -> None:
    expected = np.array([100.0, 0.0, 1.0])
    actual = np.array([100.0005, 2e-4, 1.0])
    verdict = compare("y", actual, expected, ("n",), 1e-4, 1e-5)
    assert not verdict.ok
    assert verdict.max_index == (0,) and verdict.worst_index == (1,)
    line = verdict.summary()
    assert line.startswith("y: max |Δ| = 0.0005 at (0); furthest beyond its tolerance: (1)")
    assert "tolerance 0.0001" in line and "1 of 3 elements out of tolerance" in line
    passing = compare("y", np.array([1.0 + 5e-6]), np.array([1.0]), ("n",), 1e-5, 0.0)
    assert passing.summary() == "y: max |Δ| = 5e-06, within tolerance (50% of it used)"


def test_the_derived_tolerance_follows_each_element() -> None:
    """Attention weights: an element's rounding is its weight times its logit's, so a large
    weight gets a larger tolerance than a negligible one in the same row."""
    rng = np.random.default_rng(0)
    q, k, v = (rng.standard_normal((1, 64, 32)).astype(np.float32).astype(float) for _ in range(3))
    arrays = {"q": q * 5.5, "k": k * 5.5, "v": v}
    from formula_check.oracles import get_oracle

    attention = get_oracle("attention")
    params = {"b": 1, "n": 64, "m": 64, "d_k": 32, "d_v": 32}
    expected = dict(attention.compute(arrays, params))
    samples = rounding_samples(attention.compute, arrays, params, expected, seed=0)
    assert len(samples) == 4
    tolerance = derive("weights", expected["weights"], samples)
    assert tolerance is not None and tolerance.derived
    allowed = np.broadcast_to(tolerance.allowed, expected["weights"].shape)
    row = expected["weights"][0, 0]
    assert allowed[0, 0, np.argmax(row)] > 10 * allowed[0, 0, np.argmin(row)]
    # and it is tight: far below the old fixed 1e-5 where the weights are small
    assert np.median(allowed) < 1e-6


def test_regimes_are_part_of_the_request_and_deterministic() -> None:
    from formula_check.model import Location
    from formula_check.planning.plan import plan_check
    from support import spec_for

    spec = spec_for("attention", SDPA, mask="causal")
    first, second = plan_check(spec, "."), plan_check(spec, ".")
    assert [r.name for r in first.request.regimes] == [
        "large logits",
        "masked keys score high",
    ]
    assert np.array_equal(first.arrays["r1/in/q"], second.arrays["r1/in/q"])
    assert np.allclose(first.arrays["r1/in/q"], first.arrays["in/q"] * 8.0, rtol=1e-6)
    assert np.array_equal(first.arrays["r1/in/v"], first.arrays["in/v"])
    other = plan_check(dataclasses.replace(spec, seed=1, location=Location("docs/x.md", 3)), ".")
    assert not np.array_equal(other.arrays["r1/in/q"], first.arrays["r1/in/q"])


@pytest.mark.tf
def test_positional_encoding_in_halves_is_told_so() -> None:
    halves = PE.replace(
        "pe = tf.sin(angles) * even + tf.cos(angles) * (1 - even)",
        "pe = tf.concat([tf.sin(angles[:, 0::2]), tf.cos(angles[:, 1::2])], axis=-1)",
    )
    assert halves != PE
    result = run("positional_encoding", halves)
    assert result.status is Status.MISMATCH
    assert "the halves layout" in result.headline()
    wrong_base = run("positional_encoding", PE.replace("10000.0", "1000.0"))
    assert wrong_base.status is Status.MISMATCH
    assert "halves" not in wrong_base.headline()


@pytest.mark.tf
@pytest.mark.parametrize("case", ["sublayer-pre", "sublayer-post"])
def test_a_relu6_behind_a_norm_is_caught_with_wide_weights(case: str) -> None:
    oracle, source, options = CORRECT[case]
    capped = source.replace('activation="relu"', 'activation="relu6"')
    assert capped != source
    result = run(oracle, capped, **options)
    assert result.status is Status.MISMATCH, result.headline()
    assert any(v.regime == "wide weights" and not v.ok for v in result.verdicts)
    # and the correct layer, its weights scaled in place and restored, verifies
    right = run(oracle, source, **options)
    assert right.status is Status.VERIFIED, right.headline()
    assert "wide weights" in right.regimes()


def test_wide_weights_reach_a_function_too() -> None:
    """A function is given its weights: the wide-weights regime sends them scaled, exactly."""
    from formula_check.planning.plan import plan_check
    from support import spec_for

    plan = plan_check(spec_for("sublayer", "def f(x, *w):\n    return x\n"), ".")
    assert np.array_equal(plan.arrays["r3/wt/W_1"], plan.arrays["wt/W_1"] * 8)


@pytest.mark.tf
def test_a_softmax_that_never_subtracts_the_maximum_is_caught_on_large_values() -> None:
    naive = (
        "import tensorflow as tf\n\n"
        "def softmax(x):\n"
        "    e = tf.exp(x)\n"
        "    return e / tf.reduce_sum(e, axis=-1, keepdims=True)\n"
    )
    result = run("softmax", naive)
    assert result.status is Status.MISMATCH, result.headline()
    failed = [v.regime for v in result.verdicts if not v.ok]
    assert failed == ["large values", "tf.function, large values"]
    assert "output (large values): " in result.headline()
    assert "NaN/Inf values in the result" in result.headline()


@pytest.mark.tf
def test_positions_built_in_float16_are_caught_far_along() -> None:
    half = PE.replace(
        "pos = tf.range(position, dtype=tf.float32)",
        "pos = tf.cast(tf.range(position, dtype=tf.float16), tf.float32)",
    )
    assert half != PE
    _only_on(run("positional_encoding", half), "far positions")


def test_a_numpy_or_keras_upgrade_re_checks_every_block(monkeypatch: pytest.MonkeyPatch) -> None:
    from formula_check.store import cache
    from support import spec_for

    spec = spec_for("attention", SDPA)
    before = cache.cache_key(spec, "tensorflow==2.21.0")
    monkeypatch.setattr(cache, "numerics_versions", lambda: "numpy==9.0 keras==9.0")
    assert cache.cache_key(spec, "tensorflow==2.21.0") != before
