"""Correct implementations, written the ways users write them, are verified."""

from __future__ import annotations

import pytest

from formula_check.errors import SpecError
from formula_check.model import Status
from implementations import CORRECT
from support import run

pytestmark = pytest.mark.tf


@pytest.mark.parametrize("case", sorted(CORRECT))
def test_correct_code_is_verified(case: str) -> None:
    oracle, source, options = CORRECT[case]
    result = run(oracle, source, **options)
    assert result.status is Status.VERIFIED, result.headline()
    assert result.verdicts, "something must have been compared"
    assert all(v.max_abs <= v.atol for v in result.verdicts)


def test_a_parameter_read_from_the_layer_is_checked_and_said() -> None:
    oracle, source, options = CORRECT["layer_norm-keras-epsilon-read"]
    result = run(oracle, source, **options)
    assert result.status is Status.VERIFIED, result.headline()
    assert "epsilon read from the layer: 1e-06, as the formula says (the oracle's default)" in (
        result.notes
    )
    stated = run(oracle, source.replace("1e-6", "1e-3"), params={"epsilon": 1e-3}, **options)
    assert stated.status is Status.VERIFIED, "the page says the formula's epsilon is 1e-3"


def test_a_layer_whose_own_gain_and_bias_no_map_names_cannot_be_verified() -> None:
    """With no map, the oracle takes gamma = 1 and beta = 0: a layer that ignores its own
    would match that as well as one that applies them, so neither is called verified."""
    oracle, source, _ = CORRECT["layer_norm-own-weights"]
    ignoring = source.replace("self.gamma * (x - mean)", "(x - mean)").replace(" + self.beta", "")
    for code in (source, ignoring):
        with pytest.raises(SpecError) as raised:
            run(oracle, code)
        assert raised.value.message.startswith(
            "weights: the layer has trainable weights the weight map does not name "
            "(gamma (6,), beta (6,)), and oracle 'layer_norm' took its own gamma = 1, beta = 0"
        ), raised.value.message


def test_trainable_weights_outside_the_formula_are_noted_and_moved() -> None:
    """A weight the formula has no place for is listed; moved by the perturbation, it
    fails a check when the code uses it."""
    oracle, source, options = CORRECT["ffn-tf-variables"]
    extra = source.replace(
        "        self.b2 = tf.Variable(tf.zeros((d_model,)))\n",
        "        self.b2 = tf.Variable(tf.zeros((d_model,)))\n"
        "        self.shift = tf.Variable(tf.zeros((d_model,)))\n",
    )
    unused = run(oracle, extra, **options)
    assert unused.status is Status.VERIFIED, unused.headline()
    assert "trainable weights outside the weight map: shift (6,) (moved by noise before the " in (
        " ".join(unused.notes)
    )
    used = run(
        oracle,
        extra.replace("), self.w2) + self.b2", "), self.w2) + self.b2 + self.shift"),
        **options,
    )
    assert used.status is Status.MISMATCH, used.headline()


def test_a_returned_dict_is_compared_by_its_keys() -> None:
    oracle, source, options = CORRECT["attention"]
    by_key = source.replace(
        "return output, attention_weights",
        'return {"weights": attention_weights, "output": output}',
    )
    result = run(oracle, by_key, **options)
    assert result.status is Status.VERIFIED, result.headline()
    assert [v.name for v in result.verdicts if not v.regime] == ["weights", "output"]
    other_keys = source.replace(
        "return output, attention_weights",
        'return {"out": output, "attn": attention_weights}',
    )
    ordered = run(oracle, other_keys, **options)
    assert ordered.status is Status.VERIFIED, ordered.headline()
    assert (
        "the code returned a dict whose keys (out, attn) are not all among the outputs "
        "compared: compared in order, as output, weights"
    ) in ordered.notes


def test_only_a_number_is_read_from_the_layer_for_a_parameter() -> None:
    oracle, source, options = CORRECT["sublayer-post"]
    weights = {**options["weights"], "norm": "pre_norm"}
    with pytest.raises(SpecError) as raised:
        run(oracle, source, **{**options, "weights": weights})
    assert raised.value.message == (
        "weights: 'norm' is a parameter of oracle 'sublayer'; only a number can be read from "
        "the layer and checked against the formula's (the layer's is a bool value, the "
        "formula's 'post')"
    )


def test_only_floating_point_variables_are_moved() -> None:
    """An index or a mask kept in a tf.Variable is no weight: moving it would break correct
    code (here the reversed order would no longer reverse)."""
    source = (
        "import tensorflow as tf\n\n"
        "class Softmax(tf.keras.layers.Layer):\n"
        "    def __init__(self):\n"
        "        super().__init__()\n"
        "        self.order = tf.Variable(tf.range(6, -1, -1))\n"
        "    def call(self, x):\n"
        "        flipped = tf.gather(x, self.order, axis=-1)\n"
        "        return tf.gather(tf.nn.softmax(flipped, axis=-1), self.order, axis=-1)\n"
    )
    result = run("softmax", source, kind="layer")
    assert result.status is Status.VERIFIED, result.headline()
    assert not any("outside the weight map" in note for note in result.notes)


def test_a_returned_dict_is_matched_by_key_to_the_names_returns_gives() -> None:
    oracle, source, options = CORRECT["attention"]
    by_key = source.replace(
        "return output, attention_weights",
        'return {"weights": attention_weights, "output": output}',
    )
    result = run(oracle, by_key, returns=("output", "weights"), **options)
    assert result.status is Status.VERIFIED, result.headline()
    assert not result.notes or not any("dict" in note for note in result.notes)
