"""``kind="builder"``: a Keras functional block, which creates its layers every time it is
called, is built once on symbolic inputs and checked as the model it makes (TensorFlow)."""

from __future__ import annotations

from typing import Any

import pytest

from formula_check.errors import SpecError
from formula_check.model import Status
from formula_check.planning.option_values import call_words
from support import run

pytestmark = pytest.mark.tf

PRE_NORM = """
from keras import layers


def encoder(inputs, head_size, num_heads, ff_dim, dropout=0):
    normed = layers.LayerNormalization(epsilon=1e-6)(inputs)
    attention = layers.MultiHeadAttention(num_heads=num_heads, key_dim=head_size, dropout=dropout)
    res = inputs + layers.Dropout(dropout)(attention(normed, normed))
    normed = layers.LayerNormalization(epsilon=1e-6)(res)
    hidden = layers.Dropout(dropout)(layers.Conv1D(ff_dim, 1, activation="relu")(normed))
    return res + layers.Conv1D(inputs.shape[-1], 1)(hidden)
"""

DRIFTS = {
    "post-norm": (
        "    normed = layers.LayerNormalization(epsilon=1e-6)(inputs)\n"
        "    attention = layers.MultiHeadAttention(num_heads=num_heads, key_dim=head_size, "
        "dropout=dropout)\n"
        "    res = inputs + layers.Dropout(dropout)(attention(normed, normed))\n",
        "    normed = inputs\n"
        "    attention = layers.MultiHeadAttention(num_heads=num_heads, key_dim=head_size, "
        "dropout=dropout)\n"
        "    res = layers.LayerNormalization(epsilon=1e-6)(inputs + attention(normed, normed))\n",
    ),
    "each output normed before its sum": (  # Keras' example as printed today
        "    normed = layers.LayerNormalization(epsilon=1e-6)(inputs)\n"
        "    attention = layers.MultiHeadAttention(num_heads=num_heads, key_dim=head_size, "
        "dropout=dropout)\n"
        "    res = inputs + layers.Dropout(dropout)(attention(normed, normed))\n",
        "    attention = layers.MultiHeadAttention(num_heads=num_heads, key_dim=head_size, "
        "dropout=dropout)\n"
        "    res = inputs + layers.LayerNormalization(epsilon=1e-6)(attention(inputs, inputs))\n",
    ),
    "no residual": (
        "    return res + layers.Conv1D(inputs.shape[-1], 1)(hidden)",
        "    return layers.Conv1D(inputs.shape[-1], 1)(hidden)",
    ),
    "gelu": ('activation="relu"', 'activation="gelu"'),
}

ATTENTION = {
    f"attn.{weight}_{part}": f"MultiHeadAttention[0].{dense}_dense.{variable}"
    for part, dense in (("q", "query"), ("k", "key"), ("v", "value"), ("o", "output"))
    for weight, variable in (("W", "kernel"), ("b", "bias"))
}
WEIGHTS = {
    **ATTENTION,
    "norm1.gamma": "LayerNormalization[0].gamma",
    "norm1.beta": "LayerNormalization[0].beta",
    "ffn.W_1": "Conv1D[0].kernel",
    "ffn.b_1": "Conv1D[0].bias",
    "ffn.W_2": "Conv1D[1].kernel",
    "ffn.b_2": "Conv1D[1].bias",
    "norm2.gamma": "LayerNormalization[1].gamma",
    "norm2.beta": "LayerNormalization[1].beta",
}
OPTIONS: dict[str, Any] = {
    "kind": "builder",
    "dims": {"b": 2, "n": 5, "d_model": 12, "h": 3, "depth": 6, "d_ff": 20},
    "init": {"head_size": "depth", "num_heads": "h", "ff_dim": "d_ff"},
    "params": {"norm": "pre"},
    "weights": WEIGHTS,
}


def _check(source: str = PRE_NORM, **changed: Any) -> Any:
    return run("encoder_layer", source, **{**OPTIONS, **changed})


def test_a_functional_pre_norm_encoder_verifies_as_the_model_it_builds() -> None:
    # the second norm by its index among the model's layers too: after the input and the
    # first norm, the attention and its dropout
    by_index = {"norm2.beta": "layers[4].beta", "epsilon": "LayerNormalization[1].epsilon"}
    result = _check(weights={**WEIGHTS, **by_index})
    assert result.status is Status.VERIFIED, result.headline()
    # the model it builds is judged on its first call and as a tf.function graph too, on
    # every regime
    graphs = {"tf.function", "tf.function, large logits", "tf.function, large weights"}
    regimes = {"", "large logits", "large weights", "first call", *graphs}
    assert {v.regime for v in result.verdicts} == regimes
    assert "epsilon read from the layer: 1e-06, as the formula says" in " ".join(result.notes)


@pytest.mark.parametrize("drift", sorted(DRIFTS))
def test_a_drifted_builder_is_a_mismatch(drift: str) -> None:
    old, new = DRIFTS[drift]
    assert old in PRE_NORM
    result = _check(PRE_NORM.replace(old, new))
    assert result.status is Status.MISMATCH, result.headline()


def test_a_weight_path_the_model_does_not_have_is_an_error_at_the_block() -> None:
    result = _check(weights={**WEIGHTS, "ffn.W_2": "Dense[0].kernel"})
    assert result.status is Status.ERROR
    assert result.headline().startswith("docs/page.md:6 [encoder_layer]"), result.headline()
    assert "no layer named 'Dense', nor a layer of that class" in result.headline()


def test_an_oracle_weight_the_map_never_reaches_is_an_error_at_the_block() -> None:
    unmapped = {k: v for k, v in WEIGHTS.items() if k != "ffn.W_1"}
    with pytest.raises(SpecError) as raised:
        _check(weights=unmapped)
    assert str(raised.value).startswith("docs/page.md:6: weights: the layer's 'ffn.W_1'")


def test_a_layer_of_the_model_the_map_leaves_out_is_an_error_at_the_block() -> None:
    unmapped = {k: v for k, v in WEIGHTS.items() if not k.startswith("norm2.")}
    with pytest.raises(SpecError) as raised:
        _check(weights=unmapped)
    assert str(raised.value).startswith("docs/page.md:6: weights: the layer has trainable")
    assert "gamma (12,)" in raised.value.message


def test_a_builder_is_given_the_mask_as_a_layer_is() -> None:
    source = """
    from keras import layers


    def attend(query, value, key, attention_mask, num_heads, key_dim):
        attention = layers.MultiHeadAttention(num_heads=num_heads, key_dim=key_dim)
        return attention(query, value, key=key, attention_mask=attention_mask)
    """
    weights = {key.removeprefix("attn."): path for key, path in ATTENTION.items()}
    result = run(
        "multihead",
        source,
        kind="builder",
        dims={"b": 2, "n": 5, "m": 7, "d_model": 12, "h": 3, "depth": 4},
        mask="padding",
        mask_convention="keep",
        params={"mask_dims": "b n m"},
        call=("q", "v", "key=k", "attention_mask=mask"),
        init={"num_heads": "h", "key_dim": "depth"},
        weights=weights,
    )
    assert result.status is Status.VERIFIED, result.headline()


def test_a_class_called_as_a_builder_is_an_error_that_says_to_use_layer() -> None:
    source = """
    from keras import layers


    class Encoder(layers.Layer):
        def call(self, x):
            return x
    """
    result = _check(source)
    assert result.status is Status.ERROR
    assert 'kind="builder": Encoder is a class' in result.headline(), result.headline()
    assert 'kind="layer"' in result.headline()


def test_a_builder_that_computes_on_arrays_is_an_error_that_says_what_it_needs() -> None:
    source = """
    import tensorflow as tf


    def encoder(inputs, head_size, num_heads, ff_dim):
        return tf.nn.relu(inputs)
    """
    result = _check(source)
    assert result.status is Status.ERROR
    assert "called once on symbolic Keras inputs (argument 1: (None, 5, 12) float32)" in (
        result.headline()
    ), result.headline()


ADDITIVE = """
from keras import layers, ops


def additive(q, k, v, num_hiddens):
    keys = layers.Dense(num_hiddens, use_bias=False)(k)
    queries = layers.Dense(num_hiddens, use_bias=False)(q)
    features = ops.tanh(ops.expand_dims(queries, 2) + ops.expand_dims(keys, 1))
    scores = ops.squeeze(layers.Dense(1, use_bias=False)(features), -1)
    weights = ops.softmax(scores, axis=-1)
    return ops.matmul(weights, v), weights
"""
"""Additive attention that projects the keys first: Keras' model.layers puts the queries'
projection first (the graph's order: the first operand of the sum)."""
BY_CALLS = {"W_k": "Dense[0].kernel", "W_q": "Dense[1].kernel", "w_v": "Dense[2].kernel"}


def _additive(source: str = ADDITIVE, *, weights: dict[str, str], **dims: int) -> Any:
    return run(
        "additive_attention",
        source,
        kind="builder",
        dims=dims,
        init={"num_hiddens": "h"},
        weights=weights,
    )


@pytest.mark.parametrize("dims", [{"d_q": 6, "d_k": 6}, {"d_q": 6, "d_k": 4}], ids=str)
def test_a_builder_s_class_rank_counts_layers_in_the_order_it_calls_them(
    dims: dict[str, int],
) -> None:
    result = _additive(weights=BY_CALLS, **dims)
    assert result.status is Status.VERIFIED, result.headline()


def test_layers_i_counts_as_keras_model_layers_does() -> None:
    # Keras' order is the graph's: the inputs of q and k, the queries' projection before the
    # keys' (the first operand of the sum), the scoring layer, and last the input of v
    by_keras = {"W_q": "layers[2].kernel", "W_k": "layers[3].kernel", "w_v": "layers[4].kernel"}
    result = _additive(weights=by_keras, d_q=6, d_k=4)
    assert result.status is Status.VERIFIED, result.headline()


def test_a_class_path_without_its_rank_says_which_ranks_there_are() -> None:
    result = _additive(weights={**BY_CALLS, "W_q": "Dense.kernel"}, d_q=6, d_k=4)
    assert result.status is Status.ERROR
    assert result.headline().startswith("docs/page.md:6 [additive_attention]")
    assert (
        "Dense names the model's 3 Dense layers, counted in the order the builder calls them: "
        "write Dense[0].kernel for the first (to Dense[2].kernel for the last)"
    ) in result.headline(), result.headline()


def test_a_builder_s_weight_outside_the_map_is_noted_as_a_layer_s_is() -> None:
    # the scoring Dense's bias shifts every score alike: the softmax takes it away
    source = ADDITIVE.replace(
        "layers.Dense(1, use_bias=False)(features)", "layers.Dense(1)(features)"
    )
    result = _additive(source, weights=BY_CALLS, d_q=6, d_k=4)
    assert result.status is Status.VERIFIED, result.headline()
    assert any(
        note.startswith("trainable weights outside the weight map: dense") and "(1,)" in note
        for note in result.notes
    ), result.notes


MEMORY = """
from keras import layers


def attend(query, memory, num_heads, key_dim):
    key, value = memory
    attention = layers.MultiHeadAttention(num_heads=num_heads, key_dim=key_dim)
    return attention(query, value, key=key)
"""


def test_arrays_inside_a_call_list_reach_a_builder_as_inputs() -> None:
    # were k and v constants of the model, the large-logits regime's k would never reach it
    weights = {key.removeprefix("attn."): path for key, path in ATTENTION.items()}
    result = run(
        "multihead",
        MEMORY,
        kind="builder",
        dims={"b": 2, "n": 5, "m": 7, "d_model": 12, "h": 3, "depth": 4},
        call=call_words("q [k v]"),
        init={"num_heads": "h", "key_dim": "depth"},
        weights=weights,
    )
    assert result.status is Status.VERIFIED, result.headline()
    assert "large logits" in {v.regime for v in result.verdicts}


def test_keras_layer_call_is_wrapped_only_while_the_builder_runs() -> None:
    import tensorflow as tf

    from formula_check.execution import builder

    original = tf.keras.layers.Layer.__call__

    def failing(x: Any) -> Any:
        assert tf.keras.layers.Layer.__call__ is not original  # recording meanwhile
        return tf.keras.layers.Dense(2)(x) + int("x")

    with pytest.raises(TypeError, match="invalid literal"):
        builder.build(failing, [tf.zeros((2, 3))], {}, lambda bound: bound())
    assert tf.keras.layers.Layer.__call__ is original
