"""Layers as published Transformer code builds and calls them: constructor arguments that are
lists, tuples, booleans or None; ``training=False`` passed by keyword; Keras' own
MultiHeadAttention held in an attribute by a wrapper; a two-input AddNorm; a model built with
the functional API, its weights found by layer name; attention weights kept on an attribute
instead of returned; and a function that builds layers of its own, which the oracle's weights
never reach. Each correct version verifies; each wrong one is caught or refused at the block.
The fixtures are our own code, written in each style."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import pytest

from formula_check.errors import SpecError
from formula_check.model import Status
from formula_check.oracles import Oracle, TensorSpec, register
from formula_check.results import CheckResult
from implementations import CORRECT
from support import run

pytestmark = pytest.mark.tf


def _add_norm(arrays: Mapping[str, np.ndarray], params: Mapping[str, Any]) -> dict[str, Any]:
    summed = arrays["x"] + arrays["y"]
    mean = summed.mean(axis=-1, keepdims=True)
    variance = ((summed - mean) ** 2).mean(axis=-1, keepdims=True)
    normed = (summed - mean) / np.sqrt(variance + params["epsilon"])
    return {"output": arrays["gamma"] * normed + arrays["beta"]}


ADD_NORM = register(
    Oracle(
        name="test_add_norm",
        title="Residual connection and layer normalisation of two inputs",
        latex=r"\text{LayerNorm}(X + Y)",
        compute=_add_norm,
        inputs=(TensorSpec("x", ("b", "n", "d_model")), TensorSpec("y", ("b", "n", "d_model"))),
        weights=(
            TensorSpec("gamma", ("d_model",), optional=True, default=1.0),
            TensorSpec("beta", ("d_model",), optional=True, default=0.0),
        ),
        outputs=(TensorSpec("output", ("b", "n", "d_model")),),
        dims={"b": 2, "n": 3, "d_model": 6},
        params={"epsilon": 1e-3},
        regimes=(),
    ),
    replace=True,
)


def _check(oracle: str, source: str, **options: Any) -> CheckResult:
    return run(oracle, source, **options)


# -- init= values: lists, tuples, booleans, None ---------------------------------------------

FFN_BY_LISTS = """
import tensorflow as tf


class FeedForward(tf.keras.layers.Layer):
    def __init__(self, widths, activations, use_bias, name=None):
        super().__init__(name=name)
        assert isinstance(widths, list) and isinstance(activations, tuple), (widths, activations)
        assert use_bias is True and name is None
        self.expand = tf.keras.layers.Dense(widths[0], activation=activations[0], use_bias=use_bias)
        self.project = tf.keras.layers.Dense(widths[1], activation=activations[1], use_bias=use_bias)

    def call(self, x):
        return self.project(self.expand(x))
"""

FFN_OPTIONS: dict[str, Any] = {
    "kind": "layer",
    "dims": {"d_model": 6, "d_ff": 9},
    "init": {
        "widths": ["d_ff", "d_model"],
        "activations": ("relu", None),
        "use_bias": True,
        "name": None,
    },
    "weights": {
        "W_1": "expand.kernel",
        "b_1": "expand.bias",
        "W_2": "project.kernel",
        "b_2": "project.bias",
    },
}


def test_init_values_arrive_as_written() -> None:
    result = _check("ffn", FFN_BY_LISTS, **FFN_OPTIONS)
    assert result.status is Status.VERIFIED, result.headline()


def test_an_init_value_takes_effect() -> None:
    """A ReLU on the output too, as the tuple says: the formula has none there."""
    init = {**FFN_OPTIONS["init"], "activations": ("relu", "relu")}
    result = _check("ffn", FFN_BY_LISTS, **{**FFN_OPTIONS, "init": init})
    assert result.status is Status.MISMATCH, result.headline()


def test_init_text_reads_lists_tuples_booleans_and_none() -> None:
    from formula_check.planning.option_values import init_arguments

    assert init_arguments("widths=[d_ff, d_model] activations=(relu, none) use_bias=true") == {
        "widths": ["d_ff", "d_model"],
        "activations": ("relu", None),
        "use_bias": True,
    }


# -- training=False by keyword; attention weights kept on an attribute (a textbook's style) --

DOT_PRODUCT = """
import tensorflow as tf


class DotProductAttention(tf.keras.layers.Layer):
    def __init__(self, dropout, **kwargs):
        super().__init__(**kwargs)
        self.drop_weights = tf.keras.layers.Dropout(dropout)

    def call(self, queries, keys, values, valid_lens=None, training=None):
        logits = tf.einsum("bqd,bkd->bqk", queries, keys)
        logits *= tf.math.rsqrt(tf.cast(tf.shape(keys)[-1], logits.dtype))
        if valid_lens is not None:
            real = tf.sequence_mask(valid_lens, tf.shape(logits)[-1])[:, tf.newaxis, :]
            logits = tf.where(real, logits, -1e6)
        self.attention_weights = tf.nn.softmax(logits, axis=-1)
        return self.drop_weights(self.attention_weights, training=training) @ values
"""

DOT_OPTIONS: dict[str, Any] = {
    "kind": "layer",
    "init": {"dropout": 0.5},
    "mask": "padding",
    "mask_convention": "lengths",
    "call": ("q", "k", "v", "mask", "training=false"),
    "returns": ("output", "weights=attention_weights"),
}


def test_training_false_by_keyword_and_weights_kept_on_the_layer_verify() -> None:
    result = _check("attention", DOT_PRODUCT, **DOT_OPTIONS)
    assert result.status is Status.VERIFIED, result.headline()
    assert [v.name for v in result.verdicts if not v.regime] == ["output", "weights"]


def test_training_true_takes_effect() -> None:
    call = ("q", "k", "v", "mask", "training=true")
    result = _check("attention", DOT_PRODUCT, **{**DOT_OPTIONS, "call": call})
    assert result.status is Status.MISMATCH, result.headline()


def test_weights_kept_before_the_softmax_are_caught() -> None:
    wrong = DOT_PRODUCT.replace(
        "self.attention_weights = tf.nn.softmax(logits, axis=-1)\n",
        "self.attention_weights = logits\n",
    ).replace(
        "self.drop_weights(self.attention_weights,", "self.drop_weights(tf.nn.softmax(logits),"
    )
    result = _check("attention", wrong, **DOT_OPTIONS)
    assert result.status is Status.MISMATCH, result.headline()
    assert {v.name for v in result.verdicts if not v.ok} == {"weights"}


def test_an_attribute_output_of_a_function_is_refused() -> None:
    source = CORRECT["attention"][1]
    with pytest.raises(SpecError, match="reads an attribute of a layer"):
        _check("attention", source, returns=("output", "weights=attention_weights"))


# -- Keras' MultiHeadAttention inside a wrapper ----------------------------------------------

WRAPPER = """
import tensorflow as tf


class GlobalSelfAttention(tf.keras.layers.Layer):
    def __init__(self, num_heads, key_dim):
        super().__init__()
        self.mha = tf.keras.layers.MultiHeadAttention(num_heads=num_heads, key_dim=key_dim)

    def call(self, x, mask=None):
        mixed, scores = self.mha(x, x, attention_mask=mask, return_attention_scores=True)
        self.last_attn_scores = scores  # kept for the caller, not returned
        return mixed
"""

WRAPPER_OPTIONS: dict[str, Any] = {
    "preset": "keras-mha",
    "params": {"variant": "self"},
    "mask": "causal",
    "call": ("q", "mask=mask"),
    "returns": ("output", "weights=last_attn_scores"),
}


def test_a_preset_applies_under_the_one_wrapped_layer() -> None:
    result = _check("multihead", WRAPPER, **WRAPPER_OPTIONS)
    assert result.status is Status.VERIFIED, result.headline()
    assert (
        "preset keras-mha's weight map read under mha, the one sub-layer of this layer that "
        'holds its weights (preset="keras-mha@mha" says so)'
    ) in result.notes
    assert "call= passes no k: its values are q's in this check, which the code receives" in (
        result.notes
    )


def test_scores_kept_transposed_on_the_wrapper_are_caught() -> None:
    wrong = WRAPPER.replace(
        "self.last_attn_scores = scores",
        "self.last_attn_scores = tf.transpose(scores, [0, 1, 3, 2])",
    )
    result = _check("multihead", wrong, **WRAPPER_OPTIONS)
    assert result.status is Status.MISMATCH, result.headline()


TWO_WRAPPED = WRAPPER.replace(
    "        self.mha = tf.keras.layers.MultiHeadAttention(num_heads=num_heads, key_dim=key_dim)\n",
    "        self.mha = tf.keras.layers.MultiHeadAttention(num_heads=num_heads, key_dim=key_dim)\n"
    "        self.spare = tf.keras.layers.MultiHeadAttention(num_heads=num_heads, key_dim=key_dim)\n",
).replace("        return mixed\n", "        return mixed + 0.0 * self.spare(x, x)\n")


def test_two_wrapped_layers_are_ambiguous_until_the_block_names_one() -> None:
    ambiguous = _check("multihead", TWO_WRAPPED, **WRAPPER_OPTIONS)
    assert ambiguous.status is Status.ERROR, ambiguous.headline()
    assert "are on 2 sub-layers of the layer (mha, spare)" in ambiguous.headline()
    named = _check("multihead", TWO_WRAPPED, **{**WRAPPER_OPTIONS, "preset": "keras-mha@mha"})
    assert named.status is Status.VERIFIED, named.headline()
    other = _check("multihead", TWO_WRAPPED, **{**WRAPPER_OPTIONS, "preset": "keras-mha@spare"})
    assert other.status is Status.MISMATCH, other.headline()


# -- two inputs; a functional-API model; a function that builds its own layers --------------

ADD_NORM_LAYER = """
import tensorflow as tf


class AddNorm(tf.keras.layers.Layer):
    def __init__(self, dropout):
        super().__init__()
        self.ln = tf.keras.layers.LayerNormalization()
        self.drop = tf.keras.layers.Dropout(dropout)

    def call(self, X, Y, training=None):
        return self.ln(X + self.drop(Y, training=training))
"""

ADD_NORM_OPTIONS: dict[str, Any] = {
    "kind": "layer",
    "init": {"dropout": 0.5},
    "call": ("x", "y", "training=false"),
    "weights": {"gamma": "ln.gamma", "beta": "ln.beta"},
}


def test_a_two_input_layer_verifies_and_a_lost_residual_is_caught() -> None:
    result = _check("test_add_norm", ADD_NORM_LAYER, **ADD_NORM_OPTIONS)
    assert result.status is Status.VERIFIED, result.headline()
    lost = ADD_NORM_LAYER.replace(
        "X + self.drop(Y, training=training)", "self.drop(Y, training=training)"
    )
    assert _check("test_add_norm", lost, **ADD_NORM_OPTIONS).status is Status.MISMATCH


def test_a_second_input_the_call_never_passes_is_refused() -> None:
    with pytest.raises(SpecError, match="never passes 'y'"):
        _check("test_add_norm", ADD_NORM_LAYER, **{**ADD_NORM_OPTIONS, "call": ("x",)})


FUNCTIONAL = """
import tensorflow as tf


def build_feed_forward(d_model, d_ff):
    inputs = tf.keras.Input(shape=(None, d_model))
    hidden = tf.keras.layers.Dense(d_ff, activation="relu", name="expand")(inputs)
    outputs = tf.keras.layers.Dense(d_model, name="project")(hidden)
    return tf.keras.Model(inputs, outputs)
"""

FUNCTIONAL_OPTIONS: dict[str, Any] = {
    "kind": "factory",
    "dims": {"d_model": 6, "d_ff": 9},
    "init": {"d_model": "d_model", "d_ff": "d_ff"},
    "weights": FFN_OPTIONS["weights"],
}


def test_a_functional_model_s_weights_are_found_by_layer_name() -> None:
    result = _check("ffn", FUNCTIONAL, **FUNCTIONAL_OPTIONS)
    assert result.status is Status.VERIFIED, result.headline()
    gelu = FUNCTIONAL.replace('activation="relu"', 'activation="gelu"')
    assert _check("ffn", gelu, **FUNCTIONAL_OPTIONS).status is Status.MISMATCH


def test_a_layer_name_the_model_does_not_have_is_an_error() -> None:
    weights = {**FUNCTIONAL_OPTIONS["weights"], "W_1": "expnad.kernel"}
    result = _check("ffn", FUNCTIONAL, **{**FUNCTIONAL_OPTIONS, "weights": weights})
    assert result.status is Status.ERROR, result.headline()
    assert "no attribute and no layer named 'expnad'" in result.headline()


OWN_LAYERS = """
import tensorflow as tf


def feed_forward(x, W_1, b_1, W_2, b_2):
    hidden = tf.keras.layers.Dense(W_1.shape[-1], activation="relu")(x)
    return tf.keras.layers.Dense(W_2.shape[-1])(hidden)
"""


SETS_ITS_LAYERS = """
import tensorflow as tf


def feed_forward(x, W_1, b_1, W_2, b_2):
    expand = tf.keras.layers.Dense(W_1.shape[-1], activation="relu")
    project = tf.keras.layers.Dense(W_2.shape[-1])
    expand.build(x.shape)
    project.build((*x.shape[:-1], W_1.shape[-1]))
    expand.kernel.assign(W_1)
    {bias}
    project.kernel.assign(W_2)
    project.bias.assign(b_2)
    return project(expand(x))
"""


def test_a_function_that_builds_its_own_layers_is_refused() -> None:
    """Refused while a weight of its own never takes a given one's value, as the first bias
    does when the code sets only the kernels; verified once it does (``assign``)."""
    with pytest.raises(SpecError, match="creates weights of its own while it runs"):
        _check("ffn", OWN_LAYERS)
    with pytest.raises(SpecError, match=r"creates weights of its own while it runs \(.*\(9,\)"):
        _check("ffn", SETS_ITS_LAYERS.format(bias="pass"))
    result = _check("ffn", SETS_ITS_LAYERS.format(bias="expand.bias.assign(b_1)"))
    assert result.status is Status.VERIFIED, result.headline()
    oracle, source, options = CORRECT["ffn"]
    assert _check(oracle, source, **options).status is Status.VERIFIED


WRAPS_ITS_WEIGHTS = """
import tensorflow as tf


def feed_forward(x, W_1, b_1, W_2, b_2):
    first, second = tf.Variable(W_1), tf.Variable(W_2)
    return tf.matmul(tf.nn.relu(tf.matmul(x, first) + b_1), second) + b_2
"""


def test_a_function_that_keeps_the_weights_it_is_given_in_variables_verifies() -> None:
    """Variables that start as the weights given are those weights: no refusal."""
    result = _check("ffn", WRAPS_ITS_WEIGHTS)
    assert result.status is Status.VERIFIED, result.headline()


# -- heads folded into the batch axis, the weights kept on the inner attention ---------------

FOLDED_HEADS = """
import tensorflow as tf


class ScaledDotProduct(tf.keras.layers.Layer):
    def call(self, queries, keys, values, valid_lens=None):
        logits = tf.einsum("bqd,bkd->bqk", queries, keys)
        logits /= tf.sqrt(tf.cast(tf.shape(queries)[-1], logits.dtype))
        if valid_lens is not None:
            real = tf.sequence_mask(valid_lens, tf.shape(logits)[-1])[:, tf.newaxis, :]
            logits = tf.where(real, logits, -1e6)
        self.attention_weights = tf.nn.softmax(logits, axis=-1)
        return self.attention_weights @ values


class MultiHead(tf.keras.layers.Layer):
    def __init__(self, num_hiddens, num_heads):
        super().__init__()
        self.num_heads = num_heads
        self.attention = ScaledDotProduct()
        self.W_q, self.W_k, self.W_v, self.W_o = (
            tf.keras.layers.Dense(num_hiddens, use_bias=False) for _ in range(4)
        )

    def fold(self, x):
        # (b, n, h * d) -> (b * h, n, d), batch-major: row i * h + j is head j of element i
        heads = tf.stack(tf.split(x, self.num_heads, axis=-1), axis=1)
        return tf.reshape(heads, (-1, tf.shape(x)[1], x.shape[-1] // self.num_heads))

    def unfold(self, x):
        heads = tf.reshape(x, (-1, self.num_heads, tf.shape(x)[1], x.shape[-1]))
        return tf.concat(tf.unstack(heads, axis=1), axis=-1)

    def call(self, queries, keys, values, valid_lens=None):
        q, k, v = self.fold(self.W_q(queries)), self.fold(self.W_k(keys)), self.fold(self.W_v(values))
        if valid_lens is not None:
            valid_lens = tf.repeat(valid_lens, self.num_heads, axis=0)
        return self.W_o(self.unfold(self.attention(q, k, v, valid_lens)))
"""

FOLDED_OPTIONS: dict[str, Any] = {
    "kind": "layer",
    "dims": {"b": 2, "n": 5, "m": 7, "d_model": 12, "h": 3},
    "init": {"num_hiddens": "d_model", "num_heads": "h"},
    "mask": "padding",
    "mask_convention": "lengths",
    "call": ("q", "k", "v", "mask"),
    "weights": {"W_q": "W_q.kernel", "W_k": "W_k.kernel", "W_v": "W_v.kernel", "W_o": "W_o.kernel"},
    "returns": ("output", "weights=attention.attention_weights"),
}


def test_weights_with_heads_folded_into_the_batch_are_compared_batch_major() -> None:
    result = _check("multihead", FOLDED_HEADS, **FOLDED_OPTIONS)
    assert result.status is Status.VERIFIED, result.headline()
    assert (
        "weights came back as (6, 5, 7): its first axis read as (b, h) = (2, 3), b-major "
        "(heads folded into the batch)"
    ) in result.notes
    tiled = FOLDED_HEADS.replace(
        "tf.repeat(valid_lens, self.num_heads, axis=0)",
        "tf.tile(valid_lens, [self.num_heads])",
    )
    assert _check("multihead", tiled, **FOLDED_OPTIONS).status is Status.MISMATCH


def test_heads_folded_the_other_way_round_are_not_unfolded_into_a_pass() -> None:
    from formula_check.checking.output_verdicts import unfolded

    weights = np.arange(2 * 3 * 4).reshape(2, 3, 4).astype(float)
    heads = ("b", "h", "m")
    assert np.array_equal(unfolded(weights.reshape(6, 4), weights, heads), weights)
    head_major = weights.transpose(1, 0, 2).reshape(6, 4)
    assert not np.array_equal(unfolded(head_major, weights, heads), weights)
    flattened = weights.reshape(6, 4)  # (b * n, d) for an output (b, n, d): a wrong shape
    assert unfolded(flattened, weights, ("b", "n", "d")).shape == (6, 4)


def test_a_wrapper_holding_no_such_layer_is_an_error_naming_the_path() -> None:
    plain = """
import tensorflow as tf


class NoAttention(tf.keras.layers.Layer):
    def __init__(self, num_heads, key_dim):
        super().__init__()
        self.proj = tf.keras.layers.Dense(num_heads * key_dim)

    def call(self, x, mask=None):
        return self.proj(x)
"""
    result = _check("multihead", plain, **{**WRAPPER_OPTIONS, "returns": None})
    assert result.status is Status.ERROR, result.headline()
    assert "query_dense" in result.headline()
