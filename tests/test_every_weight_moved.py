"""Every weight is exercised: the weights a block maps are moved off their initial values
before judging whatever holds them (a frozen layer's, a non-trainable variable, a
``tf.constant``, a NumPy array or a list or tuple of floats kept on an attribute, a
``tf.Module``'s), the wide-weights
regime scales them all as the oracle does, the first call is judged too, and each input
regime is judged on every output the main call returns. Each wrong layer (one that forgets
``b_1``, whose zero start hides it) is caught, and its correct twin verifies."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from formula_check.checking.judge import evaluate
from formula_check.errors import SpecError
from formula_check.messages import CheckReply
from formula_check.model import Status
from formula_check.planning.plan import plan_check
from formula_check.results import CheckResult, Environment
from support import PROJECT, shared_engine, spec_for

FFN = """
import numpy as np
import tensorflow as tf


class FeedForward({base}):
    def __init__(self, d_model, d_ff):
        super().__init__()
        rng = np.random.default_rng(3)
        self.w1 = {kernel}(rng.standard_normal((d_model, d_ff)).astype(np.float32) * 0.3)
        self.b1 = {bias}(np.zeros((d_ff,), np.float32))
        self.w2 = {kernel}(rng.standard_normal((d_ff, d_model)).astype(np.float32) * 0.3)
        self.b2 = {bias}(np.ones((d_model,), np.float32))

    def {call}(self, x):
        return tf.matmul(tf.nn.relu(tf.matmul(x, self.w1){b_1}), self.w2) + self.b2
"""

FROZEN = """
import tensorflow as tf


class FeedForward(tf.keras.layers.Layer):
    def __init__(self, d_model, d_ff):
        super().__init__()
        self.expand = tf.keras.layers.Dense(d_ff)
        self.project = tf.keras.layers.Dense(d_model)
        self.expand.build((None, d_model))
        self.project.build((None, d_ff))
        self.trainable = False  # frozen, as a pretrained block is for fine-tuning

    def call(self, x):
        hidden = tf.nn.relu({first})
        return self.project(hidden)
"""

HOLDERS = {
    "a NumPy array": ("tf.keras.layers.Layer", "call", "np.asarray", "np.asarray"),
    "a tf.constant": ("tf.keras.layers.Layer", "call", "tf.Variable", "tf.constant"),
    "a non-trainable variable": (
        "tf.keras.layers.Layer",
        "call",
        "tf.Variable",
        "(lambda v: tf.Variable(v, trainable=False))",
    ),
    "a tf.Module's tf.constant": ("tf.Module", "__call__", "tf.constant", "tf.constant"),
    "a non-trainable Keras weight": (
        "tf.keras.layers.Layer",
        "call",
        "tf.Variable",
        "(lambda v: self.add_weight(shape=v.shape, initializer=tf.constant_initializer(v), "
        "trainable=False))",
    ),
    "a read-only NumPy array": (
        "tf.keras.layers.Layer",
        "call",
        "np.asarray",
        "(lambda v: np.lib.stride_tricks.as_strided(v, writeable=False))",
    ),
    "a list of floats": ("tf.keras.layers.Layer", "call", "tf.Variable", "(lambda v: v.tolist())"),
    "a tuple of floats": (
        "tf.keras.layers.Layer",
        "call",
        "tf.Variable",
        "(lambda v: tuple(v.tolist()))",
    ),
    "a tf.Module's list of floats": ("tf.Module", "__call__", "tf.constant", "list"),
}

OPTIONS: dict[str, Any] = {
    "kind": "layer",
    "init": {"d_model": "d_model", "d_ff": "d_ff"},
    "weights": {"W_1": "w1", "b_1": "b1", "W_2": "w2", "b_2": "b2"},
}

FROZEN_OPTIONS: dict[str, Any] = {
    **OPTIONS,
    "weights": {
        "W_1": "expand.kernel",
        "b_1": "expand.bias",
        "W_2": "project.kernel",
        "b_2": "project.bias",
    },
}


def _checked(blocks: dict[str, tuple[str, str, dict[str, Any]]]) -> dict[str, CheckResult]:
    """Each block's result, all checked in one go on the shared engine."""
    specs = [
        spec_for(oracle, source, block_id=f"b{index}", **options)
        for index, (oracle, source, options) in enumerate(blocks.values())
    ]
    return dict(zip(blocks, shared_engine().check_many(specs), strict=True))


def _ffn_blocks(with_b_1: bool) -> dict[str, tuple[str, str, dict[str, Any]]]:
    plus = " + self.b1" if with_b_1 else ""
    blocks = {
        holder: (
            "ffn",
            FFN.format(base=base, call=call, kernel=kernel, bias=bias, b_1=plus),
            OPTIONS,
        )
        for holder, (base, call, kernel, bias) in HOLDERS.items()
    }
    first = "self.expand(x)" if with_b_1 else "tf.matmul(x, self.expand.kernel)"
    blocks["a frozen layer"] = ("ffn", FROZEN.format(first=first), FROZEN_OPTIONS)
    return blocks


@pytest.mark.tf
def test_a_forgotten_bias_is_caught_whatever_holds_the_weights() -> None:
    wrong = _checked(_ffn_blocks(with_b_1=False))
    right = _checked(_ffn_blocks(with_b_1=True))
    for holder, result in wrong.items():
        assert result.status is Status.MISMATCH, (holder, result.headline())
    for holder, result in right.items():
        assert result.status is Status.VERIFIED, (holder, result.headline())


FROZEN_SUBLAYER = """
import tensorflow as tf


class ResidualFFN(tf.keras.layers.Layer):
    def __init__(self, d_model, d_ff):
        super().__init__()
        self.ffn = tf.keras.Sequential([
            tf.keras.layers.Dense(d_ff, activation="relu"),
            tf.keras.layers.Dense(d_model),
        ])
        self.norm = tf.keras.layers.LayerNormalization(epsilon=1e-6)
        self.ffn.build((None, None, d_model))
        self.norm.build((None, None, d_model))
        self.trainable = False

    def call(self, x):
        return self.norm(x + self.ffn(x))
"""

SUBLAYER_MAP = {
    "W_1": "ffn.layers[0].kernel",
    "b_1": "ffn.layers[0].bias",
    "W_2": "ffn.layers[1].kernel",
    "b_2": "ffn.layers[1].bias",
    "gamma": "norm.gamma",
    "beta": "norm.beta",
}

FIRST_CALL = """
import tensorflow as tf


class FeedForward(tf.keras.layers.Layer):
    def __init__(self, d_model, d_ff):
        super().__init__()
        self.expand = tf.keras.layers.Dense(d_ff, activation="relu")
        self.project = tf.keras.layers.Dense(d_model)
        self.calls = 0

    def build(self, shape):  # its own: Keras would otherwise run call() once to build
        self.expand.build(shape)
        self.project.build((*shape[:-1], self.expand.units))

    def call(self, x):
        self.calls += 1
        y = self.project(self.expand(x))
        return tf.zeros_like(y) if self.calls == {zero_at} else y
"""

FIRST_CALL_OPTIONS = {**FROZEN_OPTIONS}

SOFTMAX_ON_LARGE = """
import tensorflow as tf


def softmax(x):
    y = tf.nn.softmax(x, axis=-1)
    if float(tf.reduce_max(tf.abs(x))) > 20.0:
        return {large}
    return {usual}
"""


def _softmax(large: str, usual: str) -> str:
    """A softmax that returns ``large`` on large inputs, ``usual`` on the others."""
    return SOFTMAX_ON_LARGE.format(large=large, usual=usual)


@pytest.mark.tf
def test_regimes_and_the_first_call_are_judged_on_every_output() -> None:
    """A frozen sublayer's weights are scaled for the wide-weights regime as the oracle's
    are; a layer wrong on its first call only, a softmax that returns nothing or two values
    on large values, are caught, each naming where."""
    results = _checked(
        {
            "frozen sublayer": (
                "sublayer",
                FROZEN_SUBLAYER,
                {**OPTIONS, "weights": SUBLAYER_MAP},
            ),
            "zeros on the first call": ("ffn", FIRST_CALL.format(zero_at=1), FIRST_CALL_OPTIONS),
            "never zeros": ("ffn", FIRST_CALL.format(zero_at=0), FIRST_CALL_OPTIONS),
            "nothing on large values": ("softmax", _softmax("()", "y"), {}),
            "two values on large values": ("softmax", _softmax("y, y", "y"), {}),
            "the softmax on large values": ("softmax", _softmax("y", "y"), {}),
            "other keys on large values": ("softmax", _softmax('{"p": y}', '{"output": y}'), {}),
            "the same keys": ("softmax", _softmax('{"output": y}', '{"output": y}'), {}),
        }
    )
    for name in ("frozen sublayer", "never zeros", "the softmax on large values", "the same keys"):
        assert results[name].status is Status.VERIFIED, (name, results[name].headline())
    first = results["zeros on the first call"]
    assert first.status is Status.MISMATCH, first.headline()
    assert "output (first call): max |Δ|" in first.headline()
    assert "first call" in first.regimes() and "first call" in results["never zeros"].regimes()
    nothing = results["nothing on large values"]
    assert nothing.status is Status.MISMATCH, nothing.headline()
    assert "the code returned no value for it on the large values inputs" in nothing.headline()
    assert "large values" in nothing.regimes()
    two = results["two values on large values"]
    assert two.status is Status.MISMATCH, two.headline()
    assert "returned 2 values on the large values inputs, 1 on the others" in two.headline()
    keys = results["other keys on large values"]
    assert keys.status is Status.MISMATCH, keys.headline()
    assert "a dict of p on the large values inputs, a dict of output on the others" in (
        keys.headline()
    )


BEHIND_A_PROPERTY = """
import numpy as np
import tensorflow as tf


class FeedForward(tf.keras.layers.Layer):
    def __init__(self, d_model, d_ff):
        super().__init__()
        rng = np.random.default_rng(5)
        self.w1 = tf.Variable(rng.standard_normal((d_model, d_ff)).astype(np.float32))
        self._b1 = tf.constant({b_1}, dtype=tf.float32)
        self.w2 = tf.Variable(rng.standard_normal((d_ff, d_model)).astype(np.float32))
        self.b2 = tf.Variable(rng.standard_normal((d_model,)).astype(np.float32))

    @property
    def b1(self):
        return self._b1

    def call(self, x):
        return tf.matmul(tf.nn.relu(tf.matmul(x, self.w1) + self.b1), self.w2) + self.b2
"""


@pytest.mark.tf
def test_a_weight_that_cannot_be_moved_is_named_and_refused_when_it_would_hide_a_term() -> None:
    """A bias read through a property cannot be set: the card names it, and where it holds
    only zeros (a term that left it out would not show) the block is an error saying what
    to do; with values of its own it verifies."""
    zeros = BEHIND_A_PROPERTY.format(b_1="np.zeros((d_ff,))")
    own = BEHIND_A_PROPERTY.format(b_1="rng.standard_normal((d_ff,))")
    results = _checked({"zeros": ("ffn", zeros, OPTIONS), "own": ("ffn", own, OPTIONS)})
    refused = results["zeros"]
    assert refused.status is Status.ERROR, refused.headline()
    assert "b_1 could not be moved before the check (b_1 (b1: " in refused.headline()
    assert "hold only zeros or only ones" in refused.headline()
    assert "keep each in a tf.Variable" in refused.headline()
    kept = results["own"]
    assert kept.status is Status.VERIFIED, kept.headline()
    said = "weights at their stored values, not moved: b_1"
    assert any(note.startswith(said) for note in kept.notes), kept.notes


def _artifact_judged(perturb: bool) -> CheckResult:
    """A SavedModel's reply whose exported b_1 is all zeros, its outputs the oracle's own."""
    spec = spec_for("ffn", "def f(x):\n    return x\n", kind="layer", perturb_weights=perturb)
    plan = plan_check(spec, str(PROJECT))
    weights = {**plan.weights, "b_1": np.zeros_like(plan.weights["b_1"])}
    expected = plan.oracle.compute({**plan.inputs, **weights}, plan.params)
    arrays = {"out/0": np.asarray(expected["output"], np.float32)}
    arrays.update({f"w/{name}": value.astype(np.float32) for name, value in weights.items()})
    reply = CheckReply(
        kind="layer",
        outputs=1,
        output_dtypes=("float32",),
        regimes_skipped=tuple((regime.name, "not run here") for regime in plan.regimes),
        artifact={"format": "saved_model", "path": "artifacts/block", "dtype": "float32"},
    )
    return evaluate(plan, reply, arrays, Environment())


def test_an_artifact_whose_weights_cannot_move_and_hold_only_zeros_is_not_verified() -> None:
    """A SavedModel is checked with the weights it was exported with: where one of them holds
    only zeros, a forgotten term would not show, so the block is an error saying what to do;
    with ``perturb="false"`` it is the block's choice, and a note says what it hides."""
    with pytest.raises(SpecError, match="b_1 hold only zeros or only ones there"):
        _artifact_judged(perturb=True)
    chosen = _artifact_judged(perturb=False)
    assert chosen.status is Status.VERIFIED, chosen.headline()
    assert any("b_1 hold only zeros or ones there" in note for note in chosen.notes)


@pytest.mark.tf
def test_a_weight_a_traced_graph_keeps_is_put_back_and_named() -> None:
    """A layer whose call is a ``tf.function`` over NumPy or constant weights keeps the
    values it was traced with (run eagerly, it would not): they are put back, named on the
    card, and judged at the values the code computed with. A correct layer verifies, but not
    with a zero ``b_1`` so kept, which would hide a forgotten term; a layer that forgets
    ``b_1`` (so moving it changes nothing, even eagerly) is a mismatch."""

    def traced(bias: str, b_1: str, zero_b_1: bool) -> str:
        source = FFN.format(
            base="tf.keras.layers.Layer", call="call", kernel=bias, bias=bias, b_1=b_1
        )
        source = source.replace("    def call", "    @tf.function\n    def call")
        source = source.replace("np.ones((d_model,)", "rng.standard_normal((d_model,)")
        if zero_b_1:
            return source
        return source.replace("np.zeros((d_ff,)", "rng.standard_normal((d_ff,)")

    cases = {"right": (" + self.b1", False), "zero b_1": (" + self.b1", True), "no b_1": ("", True)}
    results = _checked(
        {
            f"{holder} {case}": ("ffn", traced(bias, *cases[case]), OPTIONS)
            for holder, bias in (("arrays", "np.asarray"), ("constants", "tf.constant"))
            for case in cases
        }
    )
    for holder in ("arrays", "constants"):
        right = results[f"{holder} right"]
        assert right.status is Status.VERIFIED, (holder, right.headline())
        said = "a tf.function traced before it moved keeps its value"
        assert any(said in note for note in right.notes), right.notes
        zero = results[f"{holder} zero b_1"]
        assert zero.status is Status.ERROR, (holder, zero.headline())
        assert "weights: b_1 could not be moved before the check" in zero.headline()
        forgotten = results[f"{holder} no b_1"]
        assert forgotten.status is Status.MISMATCH, (holder, forgotten.headline())
