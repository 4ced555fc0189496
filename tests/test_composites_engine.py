"""Composite layers as published code writes them, through the engine (TensorFlow)."""

from __future__ import annotations

import pytest

from formula_check.errors import SpecError
from formula_check.model import Status
from implementations import CORRECT
from support import run

pytestmark = pytest.mark.tf


def test_a_preset_reads_the_tutorials_epsilon_and_names_it_when_the_formula_differs() -> None:
    oracle, source, options = CORRECT["encoder_layer-tutorial-preset"]
    verified = run(oracle, source, **options)
    assert verified.status is Status.VERIFIED, verified.headline()
    assert "epsilon read from the layer: 0.001, as the formula says (params=)" in verified.notes
    unstated = run(oracle, source, **{**options, "params": {}})
    assert unstated.status is Status.MISMATCH
    assert "the layer's epsilon is 0.001, the formula's 1e-06 (the oracle's default)" in (
        unstated.headline()
    )


def test_a_tutorial_layer_with_its_head_width_unstated_is_an_error_naming_both_shapes() -> None:
    oracle, source, options = CORRECT["encoder_layer-tutorial-preset"]
    with pytest.raises(SpecError) as raised:
        run(oracle, source, **{**options, "dims": {}})
    assert str(raised.value).startswith("docs/page.md:6: weights: attn.W_q has shape (12, 3, 12)")
    assert "the oracle expects (12, 12)" in raised.value.message


def test_the_decoder_layers_attention_weights_are_causal_on_the_card() -> None:
    oracle, source, options = CORRECT["decoder_layer-tutorial-preset"]
    result = run(oracle, source, **options)
    assert result.status is Status.VERIFIED, result.headline()
    # judged on its first call and as a tf.function graph too, on every regime
    graphs = {"tf.function", "tf.function, large logits", "tf.function, large weights"}
    regimes = {"", "large logits", "large weights", "first call", *graphs}
    assert {v.regime for v in result.verdicts} == regimes
