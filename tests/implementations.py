"""TensorFlow code as users write it: correct versions, and realistic drifts of each.

Each entry is ``(oracle, source, options)``. The drifts are the mistakes seen in the wild,
written the way they are usually written, so the checker is tested on what it will meet.

Each correct example is written once. Code that the mutation bench also mutates is written in
its seed page (``fixtures/mutants/``) and read from there (:data:`SEED_CODE`); the rest is
written here. Two spellings of one formula are two named examples, not two copies of one
(``tests/test_examples.py`` holds that, and that every drift still applies).
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

BENCH_MUTANTS = Path(__file__).resolve().parent.parent / "bench" / "mutants.py"


def load_mutation_bench() -> ModuleType:
    """``bench/mutants.py`` as a module, loaded once: its seed pages and their reader."""
    if (loaded := sys.modules.get("bench_mutants")) is not None:
        return loaded
    spec = importlib.util.spec_from_file_location("bench_mutants", BENCH_MUTANTS)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while a class is made
    spec.loader.exec_module(module)
    return module


SEED_CODE: dict[str, str] = {seed.name: seed.code for seed in load_mutation_bench().load_seeds()}
"""The code of each seed of the mutation bench, by seed name."""

SDPA = """
import tensorflow as tf

def scaled_dot_product_attention(q, k, v, mask=None):
    dk = tf.cast(tf.shape(k)[-1], tf.float32)
    logits = tf.einsum("...nd,...md->...nm", q, k) / tf.math.sqrt(dk)
    if mask is not None:
        logits += (mask * -1e9)  # a masked key's weight underflows to zero in the softmax
    attention_weights = tf.nn.softmax(logits, axis=-1)
    output = attention_weights @ v
    return output, attention_weights
"""

SDPA_KEEP = """
import tensorflow as tf

def attention(q, k, v, mask=None):
    scores = tf.einsum("bnd,bmd->bnm", q, k) / tf.sqrt(tf.cast(tf.shape(q)[-1], q.dtype))
    if mask is not None:
        scores = tf.where(mask, scores, tf.fill(tf.shape(scores), -1e9))
    weights = tf.nn.softmax(scores)
    return tf.einsum("bnm,bmd->bnd", weights, v), weights
"""

TUTORIAL_MHA = (
    SDPA
    + """

class MultiHeadAttention(tf.keras.layers.Layer):
    '''Projections in ``wq``, ``wk``, ``wv`` and ``dense``; each head d_model / num_heads wide.'''

    def __init__(self, d_model, num_heads):
        super().__init__()
        if d_model % num_heads:
            raise ValueError("num_heads must divide d_model")
        self.num_heads, self.d_model = num_heads, d_model
        self.wq, self.wk, self.wv, self.dense = (tf.keras.layers.Dense(d_model) for _ in "qkvo")

    def to_heads(self, x):
        # (b, n, d_model) -> (b, heads, n, d_model / heads)
        parts = tf.reshape(x, (tf.shape(x)[0], tf.shape(x)[1], self.num_heads, -1))
        return tf.transpose(parts, perm=[0, 2, 1, 3])

    def from_heads(self, x):
        side_by_side = tf.transpose(x, perm=[0, 2, 1, 3])
        return tf.reshape(side_by_side, (tf.shape(x)[0], -1, self.d_model))

    def call(self, q, k, v, mask=None):
        heads, weights = scaled_dot_product_attention(
            self.to_heads(self.wq(q)), self.to_heads(self.wk(k)), self.to_heads(self.wv(v)), mask
        )
        return self.dense(self.from_heads(heads)), weights
"""
)

MHA_WEIGHTS = (
    "W_q=wq.kernel b_q=wq.bias W_k=wk.kernel b_k=wk.bias "
    "W_v=wv.kernel b_v=wv.bias W_o=dense.kernel b_o=dense.bias"
)

KERAS_MHA_FACTORY = SEED_CODE["keras_mha"]

SELF_ATTENTION = """
import tensorflow as tf

class SelfAttention(tf.keras.layers.Layer):
    def __init__(self, d_k, d_v, d_model):
        super().__init__()
        self.W_q = tf.keras.layers.Dense(d_k)
        self.W_k = tf.keras.layers.Dense(d_k)
        self.W_v = tf.keras.layers.Dense(d_v)
        self.dense = tf.keras.layers.Dense(d_model)
        self.d_k = d_k

    def call(self, x, mask=None):
        Q, K, V = self.W_q(x), self.W_k(x), self.W_v(x)
        scores = tf.matmul(Q, K, transpose_b=True) / tf.math.sqrt(float(self.d_k))
        if mask is not None:
            scores += mask * -1e9
        weights = tf.nn.softmax(scores, axis=-1)
        return self.dense(tf.matmul(weights, V)), weights
"""

SELF_ATTENTION_WEIGHTS = (
    "W_q=W_q.kernel b_q=W_q.bias W_k=W_k.kernel b_k=W_k.bias "
    "W_v=W_v.kernel b_v=W_v.bias W_o=dense.kernel b_o=dense.bias"
)

PE = """
import numpy as np
import tensorflow as tf

def positional_encoding(position, d_model):
    pos = tf.range(position, dtype=tf.float32)[:, tf.newaxis]
    i = tf.range(d_model, dtype=tf.float32)[tf.newaxis, :]
    angle_rates = 1 / tf.pow(10000.0, (2 * (i // 2)) / tf.cast(d_model, tf.float32))
    angles = pos * angle_rates
    even = tf.cast(tf.range(d_model) % 2 == 0, tf.float32)
    pe = tf.sin(angles) * even + tf.cos(angles) * (1 - even)
    return pe[tf.newaxis, ...]
"""

FFN = SEED_CODE["ffn_function"]

FFN_LAYER = SEED_CODE["ffn_sequential"]

SOFTMAX = SEED_CODE["softmax"]

LAYER_NORM = """
import tensorflow as tf

def layer_norm(x, gamma, beta, eps=1e-6):
    mean, variance = tf.nn.moments(x, axes=[-1], keepdims=True)
    return gamma * (x - mean) / tf.sqrt(variance + eps) + beta
"""

KERAS_LAYER_NORM = SEED_CODE["layer_norm_keras"]

OWN_LAYER_NORM = """
import tensorflow as tf

class LayerNorm(tf.keras.layers.Layer):
    def build(self, shape):
        self.gamma = self.add_weight(shape=shape[-1:], initializer="ones")
        self.beta = self.add_weight(shape=shape[-1:], initializer="zeros")

    def call(self, x):
        mean, variance = tf.nn.moments(x, axes=[-1], keepdims=True)
        return self.gamma * (x - mean) / tf.sqrt(variance + 1e-6) + self.beta
"""

VARIABLES_FFN = """
import tensorflow as tf

class FeedForward({base}):
    def __init__(self, d_model, d_ff):
        super().__init__()
        self.w1 = tf.Variable(tf.random.normal((d_model, d_ff)) * 0.3)
        self.b1 = tf.Variable(tf.zeros((d_ff,)))
        self.w2 = tf.Variable(tf.random.normal((d_ff, d_model)) * 0.3)
        self.b2 = tf.Variable(tf.zeros((d_model,)))

    def {call}(self, x):
        return tf.matmul(tf.nn.relu(tf.matmul(x, self.w1) + self.b1), self.w2) + self.b2
"""
"""Weights kept in plain ``tf.Variable`` attributes: Keras 3 does not track them, and a
``tf.Module`` has no ``trainable_weights``; they must be moved off zero all the same."""

LINEAR = SEED_CODE["linear"]
KERAS_DENSE = SEED_CODE["linear_keras"]

SUBLAYER = """
import tensorflow as tf

class ResidualFFN(tf.keras.layers.Layer):
    def __init__(self, d_model, d_ff, pre_norm=False):
        super().__init__()
        self.ffn = tf.keras.Sequential([
            tf.keras.layers.Dense(d_ff, activation="relu"),
            tf.keras.layers.Dense(d_model),
        ])
        self.norm = tf.keras.layers.LayerNormalization(epsilon=1e-6)
        self.pre_norm = pre_norm

    def call(self, x):
        if self.pre_norm:
            return x + self.ffn(self.norm(x))
        return self.norm(x + self.ffn(x))
"""

SUBLAYER_WEIGHTS = (
    "W_1=ffn.layers[0].kernel b_1=ffn.layers[0].bias W_2=ffn.layers[1].kernel "
    "b_2=ffn.layers[1].bias gamma=norm.gamma beta=norm.beta"
)

FFN_VARIABLES_MAP = {"W_1": "w1", "b_1": "b1", "W_2": "w2", "b_2": "b2"}

WIDE_HEADS_MHA = """
import tensorflow as tf

class WideHeadAttention(tf.keras.layers.Layer):
    def __init__(self, d_model, num_heads, key_dim):
        super().__init__()
        self.d_model, self.num_heads, self.key_dim = d_model, num_heads, key_dim
        self.wq = tf.keras.layers.Dense(num_heads * key_dim)
        self.wk = tf.keras.layers.Dense(num_heads * key_dim)
        self.wv = tf.keras.layers.Dense(num_heads * key_dim)
        self.wo = tf.keras.layers.Dense(d_model)

    def heads(self, x):
        shape = (tf.shape(x)[0], tf.shape(x)[1], self.num_heads, self.key_dim)
        return tf.transpose(tf.reshape(x, shape), (0, 2, 1, 3))

    def call(self, q, k, v, mask=None):
        Q, K, V = self.heads(self.wq(q)), self.heads(self.wk(k)), self.heads(self.wv(v))
        scores = tf.matmul(Q, K, transpose_b=True) / tf.sqrt(float(self.key_dim))
        if mask is not None:
            scores += mask * -1e9
        weights = tf.nn.softmax(scores, axis=-1)
        out = tf.transpose(tf.matmul(weights, V), (0, 2, 1, 3))
        out = tf.reshape(out, (tf.shape(q)[0], tf.shape(q)[1], self.num_heads * self.key_dim))
        return self.wo(out), weights
"""
"""Heads wider than ``d_model / h``, as Keras' ``key_dim`` allows: written by hand."""

WIDE_HEADS_WEIGHTS = {
    **{
        f"{kind}_{part}": f"w{part}.{attr}"
        for part in "qkvo"
        for kind, attr in (("W", "kernel"), ("b", "bias"))
    },
}

CORRECT: dict[str, tuple[str, str, dict[str, Any]]] = {
    "attention": ("attention", SDPA, {}),
    "attention-causal": ("attention", SDPA, {"mask": "causal"}),
    "attention-padding": ("attention", SDPA, {"mask": "padding"}),
    "attention-keep-mask": ("attention", SDPA_KEEP, {"mask": "both", "mask_convention": "keep"}),
    "multihead-tutorial": (
        "multihead",
        TUTORIAL_MHA,
        {
            "entry": "MultiHeadAttention",
            "init": {"d_model": "d_model", "num_heads": "h"},
            "weights": dict(p.split("=") for p in MHA_WEIGHTS.split()),
        },
    ),
    "multihead-tutorial-masked-self": (
        "multihead",
        TUTORIAL_MHA,
        {
            "entry": "MultiHeadAttention",
            "init": {"d_model": "d_model", "num_heads": "h"},
            "weights": dict(p.split("=") for p in MHA_WEIGHTS.split()),
            "mask": "causal",
            "params": {"variant": "self"},
        },
    ),
    "multihead-keras": ("multihead", KERAS_MHA_FACTORY, {"preset": "keras-mha", "mask": "padding"}),
    "multihead-keras-no-mask": ("multihead", KERAS_MHA_FACTORY, {"preset": "keras-mha"}),
    "self_attention": (
        "self_attention",
        SELF_ATTENTION,
        {
            "init": {"d_k": "d_k", "d_v": "d_v", "d_model": "d_model"},
            "weights": dict(p.split("=") for p in SELF_ATTENTION_WEIGHTS.split()),
        },
    ),
    "positional_encoding": ("positional_encoding", PE, {}),
    "positional_encoding-long": ("positional_encoding", PE, {"dims": {"n": 2048, "d_model": 64}}),
    "ffn": ("ffn", FFN, {}),
    "ffn-keras-sequential": (
        "ffn",
        FFN_LAYER,
        {
            "kind": "factory",
            "init": {"d_model": "d_model", "dff": "d_ff"},
            "weights": {
                "W_1": "layers[0].kernel",
                "b_1": "layers[0].bias",
                "W_2": "layers[1].kernel",
                "b_2": "layers[1].bias",
            },
        },
    ),
    "softmax": ("softmax", SOFTMAX, {}),
    "layer_norm": ("layer_norm", LAYER_NORM, {}),
    "layer_norm-keras": ("layer_norm", KERAS_LAYER_NORM, {"preset": "keras-layer-norm"}),
    "layer_norm-keras-epsilon-read": (
        "layer_norm",
        KERAS_LAYER_NORM,
        {
            "kind": "factory",
            "weights": {"gamma": "gamma", "beta": "beta", "epsilon": "epsilon"},
        },
    ),
    "layer_norm-own-weights": (
        "layer_norm",
        OWN_LAYER_NORM,
        {"weights": {"gamma": "gamma", "beta": "beta"}},
    ),
    "ffn-tf-variables": (
        "ffn",
        VARIABLES_FFN.format(base="tf.keras.layers.Layer", call="call"),
        {"init": {"d_model": "d_model", "d_ff": "d_ff"}, "weights": FFN_VARIABLES_MAP},
    ),
    "ffn-tf-module": (
        "ffn",
        VARIABLES_FFN.format(base="tf.Module", call="__call__"),
        {"init": {"d_model": "d_model", "d_ff": "d_ff"}, "weights": FFN_VARIABLES_MAP},
    ),
    "linear": ("linear", LINEAR, {}),
    "linear-keras-dense": ("linear", KERAS_DENSE, {"preset": "keras-dense", "entry": "Dense"}),
    "sublayer-post": (
        "sublayer",
        SUBLAYER,
        {
            "init": {"d_model": "d_model", "d_ff": "d_ff"},
            "weights": dict(p.split("=") for p in SUBLAYER_WEIGHTS.split()),
        },
    ),
    "sublayer-pre": (
        "sublayer",
        SUBLAYER,
        {
            "init": {"d_model": "d_model", "d_ff": "d_ff", "pre_norm": True},
            "weights": dict(p.split("=") for p in SUBLAYER_WEIGHTS.split()),
            "params": {"norm": "pre"},
        },
    ),
    "multihead-wide-heads": (
        "multihead",
        WIDE_HEADS_MHA,
        {
            "init": {"d_model": "d_model", "num_heads": "h", "key_dim": "depth"},
            "weights": WIDE_HEADS_WEIGHTS,
            "dims": {"d_model": 12, "h": 3, "depth": 8},
            "mask": "padding",
        },
    ),
    "multihead-keras-key-dim-d-model": (
        "multihead",
        KERAS_MHA_FACTORY,
        {"preset": "keras-mha", "dims": {"d_model": 12, "h": 3, "depth": 12}, "mask": "padding"},
    ),
}


# Composite layers, in the three published styles ------------------------------------------

TUTORIAL_ATTENTION = """
import tensorflow as tf

class AttendAddNorm(tf.keras.layers.Layer):
    '''Keras' attention in ``mha``; what it returns is added to the input by ``add`` and the
    sum normalised by ``layernorm``. Keyword arguments go to the attention as they are.'''

    def __init__(self, **mha_options):
        super().__init__()
        self.add = tf.keras.layers.Add()
        self.layernorm = tf.keras.layers.LayerNormalization()
        self.mha = tf.keras.layers.MultiHeadAttention(**mha_options)

    def settle(self, residual, update):
        return self.layernorm(self.add([residual, update]))

class GlobalSelfAttention(AttendAddNorm):
    def call(self, x):
        mixed = self.mha(query=x, key=x, value=x)
        return self.settle(x, mixed)

class CausalSelfAttention(AttendAddNorm):
    def call(self, x):
        earlier_only = self.mha(query=x, key=x, value=x, use_causal_mask=True)
        return self.settle(x, earlier_only)

class CrossAttention(AttendAddNorm):
    def call(self, x, context):
        read, scores = self.mha(
            query=x, value=context, key=context, return_attention_scores=True
        )
        self.last_attn_scores = scores  # kept for plotting after the call
        return self.settle(x, read)
"""
"""The current TensorFlow tutorial's shape: Keras' MultiHeadAttention with ``key_dim=d_model``,
an Add and a LayerNormalization of Keras' default epsilon (1e-3)."""

TUTORIAL_LAYERS = (
    TUTORIAL_ATTENTION
    + """

class FeedForward(tf.keras.layers.Layer):
    '''Widen with a ReLU, project back (``seq``), then the same add and norm as attention's.'''

    def __init__(self, d_model, dff, dropout_rate=0.1):
        super().__init__()
        widen = tf.keras.layers.Dense(dff, activation="relu")
        narrow = tf.keras.layers.Dense(d_model)
        self.seq = tf.keras.Sequential([widen, narrow, tf.keras.layers.Dropout(dropout_rate)])
        self.layer_norm = tf.keras.layers.LayerNormalization()
        self.add = tf.keras.layers.Add()

    def call(self, x):
        return self.layer_norm(self.add([x, self.seq(x)]))

class EncoderLayer(tf.keras.layers.Layer):
    def __init__(self, *, d_model, num_heads, dff, dropout_rate=0.1):
        super().__init__()
        self.ffn = FeedForward(d_model, dff, dropout_rate)
        self.self_attention = GlobalSelfAttention(
            key_dim=d_model, num_heads=num_heads, dropout=dropout_rate
        )

    def call(self, x):
        return self.ffn(self.self_attention(x))

class DecoderLayer(tf.keras.layers.Layer):
    def __init__(self, *, d_model, num_heads, dff, dropout_rate=0.1):
        super().__init__()
        width = dict(key_dim=d_model, num_heads=num_heads, dropout=dropout_rate)
        self.causal_self_attention = CausalSelfAttention(**width)
        self.cross_attention = CrossAttention(**width)
        self.ffn = FeedForward(d_model, dff, dropout_rate)

    def call(self, x, context):
        own = self.causal_self_attention(x)
        mixed = self.cross_attention(own, context)
        return self.ffn(mixed)
"""
)


def keras_mha_map(prefix: str, path: str) -> dict[str, str]:
    """A weight map of Keras' MultiHeadAttention at ``path`` for the composite's ``prefix``."""
    parts = {"q": "query_dense", "k": "key_dense", "v": "value_dense", "o": "output_dense"}
    return {
        f"{prefix}.{kind}_{part}": f"{path}.{layer}.{attribute}"
        for part, layer in parts.items()
        for kind, attribute in (("W", "kernel"), ("b", "bias"))
    }


def norm_map(prefix: str, path: str) -> dict[str, str]:
    return {f"{prefix}.gamma": f"{path}.gamma", f"{prefix}.beta": f"{path}.beta"}


def ffn_map(prefix: str, first: str, second: str) -> dict[str, str]:
    return {
        f"{prefix}.W_1": f"{first}.kernel",
        f"{prefix}.b_1": f"{first}.bias",
        f"{prefix}.W_2": f"{second}.kernel",
        f"{prefix}.b_2": f"{second}.bias",
    }


TUTORIAL_SUBLAYER_MAP = {**keras_mha_map("attn", "mha"), **norm_map("norm", "layernorm")}
TUTORIAL_SIZES = {"d_model": 12, "h": 3, "depth": 12}
"""The tutorial's ``key_dim=d_model``: heads as wide as the model."""
TUTORIAL_OPTIONS: dict[str, Any] = {
    "init": {"num_heads": "h", "key_dim": "depth"},
    "weights": TUTORIAL_SUBLAYER_MAP,
    "dims": TUTORIAL_SIZES,
    "params": {"epsilon": 1e-3},
}

TUTORIAL_ENCODER_MAP = {
    **keras_mha_map("attn", "self_attention.mha"),
    **norm_map("norm1", "self_attention.layernorm"),
    **ffn_map("ffn", "ffn.seq.layers[0]", "ffn.seq.layers[1]"),
    **norm_map("norm2", "ffn.layer_norm"),
}
TUTORIAL_DECODER_MAP = {
    **keras_mha_map("self_attn", "causal_self_attention.mha"),
    **norm_map("norm1", "causal_self_attention.layernorm"),
    **keras_mha_map("cross_attn", "cross_attention.mha"),
    **norm_map("norm2", "cross_attention.layernorm"),
    **ffn_map("ffn", "ffn.seq.layers[0]", "ffn.seq.layers[1]"),
    **norm_map("norm3", "ffn.layer_norm"),
}
TUTORIAL_LAYER_INIT = {"d_model": "d_model", "num_heads": "h", "dff": "d_ff"}

KERAS_IO_BLOCK = """
import tensorflow as tf
from tensorflow.keras import layers

class TransformerBlock(layers.Layer):
    '''Self-attention, then a two-layer network; each result added back and normalised.'''

    def __init__(self, embed_dim, num_heads, ff_dim, rate=0.1):
        super().__init__()
        self.att = layers.MultiHeadAttention(key_dim=embed_dim, num_heads=num_heads)
        self.layernorm1 = layers.LayerNormalization(epsilon=1e-6)
        self.ffn = tf.keras.Sequential(
            [layers.Dense(ff_dim, activation="relu"), layers.Dense(embed_dim)]
        )
        self.layernorm2 = layers.LayerNormalization(epsilon=1e-6)
        self.drop_attention, self.drop_ffn = layers.Dropout(rate), layers.Dropout(rate)

    def call(self, inputs, training=False):
        attended = self.drop_attention(self.att(inputs, inputs), training=training)
        hidden = self.layernorm1(inputs + attended)
        transformed = self.drop_ffn(self.ffn(hidden), training=training)
        return self.layernorm2(hidden + transformed)
"""
"""Keras' text-classification example's block: ``key_dim=embed_dim``, epsilon 1e-6."""

KERAS_IO_MAP = {
    **keras_mha_map("attn", "att"),
    **norm_map("norm1", "layernorm1"),
    **ffn_map("ffn", "ffn.layers[0]", "ffn.layers[1]"),
    **norm_map("norm2", "layernorm2"),
}

ADD_NORM_TEXTBOOK = """
import tensorflow as tf

class AddNorm(tf.keras.layers.Layer):
    '''The sublayer's output (after dropout) added to its input, normalised over ``norm_shape``,
    which Keras takes as the axes to normalise.'''

    def __init__(self, norm_shape, dropout):
        super().__init__()
        self.ln = tf.keras.layers.LayerNormalization(axis=norm_shape)
        self.drop = tf.keras.layers.Dropout(dropout)

    def call(self, X, Y):
        return self.ln(X + self.drop(Y))
"""

TEXTBOOK_ENCODER = (
    ADD_NORM_TEXTBOOK
    + """

class DotProductAttention(tf.keras.layers.Layer):
    '''Scaled dot products; a key the boolean mask leaves out scores -1e6.'''

    def call(self, queries, keys, values, mask=None):
        scale = tf.math.rsqrt(tf.cast(tf.shape(queries)[-1], queries.dtype))
        logits = scale * tf.einsum("bqd,bkd->bqk", queries, keys)
        if mask is not None:
            logits = tf.where(mask, logits, -1e6)
        self.attention_weights = tf.nn.softmax(logits)
        return tf.einsum("bqk,bkd->bqd", self.attention_weights, values)

class MultiHeadAttention(tf.keras.layers.Layer):
    '''Heads stacked along the batch axis, so that one DotProductAttention serves them all.'''

    def __init__(self, num_hiddens, num_heads, bias=False):
        super().__init__()
        self.num_heads = num_heads
        self.attention = DotProductAttention()
        self.W_q, self.W_k, self.W_v, self.W_o = (
            tf.keras.layers.Dense(num_hiddens, use_bias=bias) for _ in range(4)
        )

    def fold(self, X):
        # (b, n, h * d) -> (h * b, n, d): head j's features become batch block j
        return tf.concat(tf.split(X, self.num_heads, axis=-1), axis=0)

    def unfold(self, X):
        return tf.concat(tf.split(X, self.num_heads, axis=0), axis=-1)

    def call(self, queries, keys, values, mask=None):
        q, k, v = self.fold(self.W_q(queries)), self.fold(self.W_k(keys)), self.fold(self.W_v(values))
        if mask is not None:
            mask = tf.tile(mask, (self.num_heads, 1, 1))  # block j of the batch is head j
        return self.W_o(self.unfold(self.attention(q, k, v, mask)))

class PositionWiseFFN(tf.keras.layers.Layer):
    '''One two-layer network applied at every position alike.'''

    def __init__(self, ffn_num_hiddens, ffn_num_outputs):
        super().__init__()
        self.dense1 = tf.keras.layers.Dense(ffn_num_hiddens, activation="relu")
        self.dense2 = tf.keras.layers.Dense(ffn_num_outputs)

    def call(self, X):
        return self.dense2(self.dense1(X))

class TransformerEncoderBlock(tf.keras.layers.Layer):
    '''Post-LN: attention, add and norm, the feed-forward network, add and norm (axis 2).'''

    def __init__(self, num_hiddens, ffn_num_hiddens, num_heads, dropout=0.0, bias=False):
        super().__init__()
        self.attention = MultiHeadAttention(num_hiddens, num_heads, bias)
        self.ffn = PositionWiseFFN(ffn_num_hiddens, num_hiddens)
        self.addnorm1, self.addnorm2 = AddNorm([2], dropout), AddNorm([2], dropout)

    def call(self, X, mask=None):
        attended = self.addnorm1(X, self.attention(X, X, X, mask))
        return self.addnorm2(attended, self.ffn(attended))
"""
)
"""A textbook's TensorFlow tab: projections without biases, heads folded into the batch,
an AddNorm of Keras' default epsilon over axis 2, a boolean mask of kept keys."""

TEXTBOOK_ENCODER_MAP = {
    **{f"attn.W_{part}": f"attention.W_{part}.kernel" for part in "qkvo"},
    **norm_map("norm1", "addnorm1.ln"),
    **ffn_map("ffn", "ffn.dense1", "ffn.dense2"),
    **norm_map("norm2", "addnorm2.ln"),
}

PRE_NORM_ENCODER = """
import tensorflow as tf

class PreNormEncoderLayer(tf.keras.layers.Layer):
    def __init__(self, d_model, num_heads, d_ff):
        super().__init__()
        self.norm1 = tf.keras.layers.LayerNormalization(epsilon=1e-6)
        self.attention = tf.keras.layers.MultiHeadAttention(
            num_heads=num_heads, key_dim=d_model // num_heads
        )
        self.norm2 = tf.keras.layers.LayerNormalization(epsilon=1e-6)
        self.hidden = tf.keras.layers.Dense(d_ff, activation="relu")
        self.out = tf.keras.layers.Dense(d_model)

    def call(self, x, mask=None):
        y = self.norm1(x)
        x = x + self.attention(y, y, attention_mask=mask)
        return x + self.out(self.hidden(self.norm2(x)))
"""
"""A pre-LN encoder layer (normalise, then attend or transform, then add), masked the
Keras way: ``attention_mask`` True where a query may attend."""

PRE_NORM_MAP = {
    **keras_mha_map("attn", "attention"),
    **norm_map("norm1", "norm1"),
    **ffn_map("ffn", "hidden", "out"),
    **norm_map("norm2", "norm2"),
}

COMPOSITES: dict[str, tuple[str, str, dict[str, Any]]] = {
    "attention_sublayer-tutorial": (
        "attention_sublayer",
        TUTORIAL_ATTENTION,
        {"entry": "GlobalSelfAttention", **TUTORIAL_OPTIONS},
    ),
    "attention_sublayer-tutorial-causal": (
        "attention_sublayer",
        TUTORIAL_ATTENTION,
        {
            "entry": "CausalSelfAttention",
            **TUTORIAL_OPTIONS,
            "params": {"epsilon": 1e-3, "variant": "causal"},
        },
    ),
    "cross_attention_sublayer-tutorial": (
        "cross_attention_sublayer",
        TUTORIAL_ATTENTION,
        {"entry": "CrossAttention", **TUTORIAL_OPTIONS},
    ),
    "encoder_layer-tutorial": (
        "encoder_layer",
        TUTORIAL_LAYERS,
        {
            "entry": "EncoderLayer",
            "init": TUTORIAL_LAYER_INIT,
            "weights": TUTORIAL_ENCODER_MAP,
            "dims": TUTORIAL_SIZES,
            "params": {"epsilon": 1e-3},
        },
    ),
    "decoder_layer-tutorial": (
        "decoder_layer",
        TUTORIAL_LAYERS,
        {
            "entry": "DecoderLayer",
            "init": TUTORIAL_LAYER_INIT,
            "weights": TUTORIAL_DECODER_MAP,
            "dims": TUTORIAL_SIZES,
            "params": {"epsilon": 1e-3},
        },
    ),
    "encoder_layer-keras-io": (
        "encoder_layer",
        KERAS_IO_BLOCK,
        {
            "entry": "TransformerBlock",
            "init": {"embed_dim": "d_model", "num_heads": "h", "ff_dim": "d_ff"},
            "weights": KERAS_IO_MAP,
            "dims": TUTORIAL_SIZES,
        },
    ),
    "encoder_layer-textbook": (
        "encoder_layer",
        TEXTBOOK_ENCODER,
        {
            "entry": "TransformerEncoderBlock",
            "init": {"num_hiddens": "d_model", "ffn_num_hiddens": "d_ff", "num_heads": "h"},
            "weights": TEXTBOOK_ENCODER_MAP,
            "params": {"epsilon": 1e-3, "mask_dims": "b n n"},
            "mask": "padding",
            "mask_convention": "keep",
        },
    ),
    "encoder_layer-pre-norm": (
        "encoder_layer",
        PRE_NORM_ENCODER,
        {
            "init": {"d_model": "d_model", "num_heads": "h", "d_ff": "d_ff"},
            "weights": PRE_NORM_MAP,
            "params": {"norm": "pre", "mask_dims": "b n n"},
            "mask": "padding",
            "mask_convention": "keep",
        },
    ),
    "add_norm-textbook": (
        "add_norm",
        ADD_NORM_TEXTBOOK,
        {
            "init": {"norm_shape": 2, "dropout": 0.0},
            "weights": {"gamma": "ln.gamma", "beta": "ln.beta"},
            "params": {"epsilon": 1e-3},
        },
    ),
}
CORRECT.update(COMPOSITES)


# Positional layers that take an input -------------------------------------------------------

TEXTBOOK_POSITIONS = """
import numpy as np
import tensorflow as tf

class PositionalEncoding(tf.keras.layers.Layer):
    '''Adds a fixed float64 table: sines in the even columns, cosines in the odd ones.'''

    def __init__(self, num_hiddens, dropout, max_len=1000):
        super().__init__()
        self.dropout = tf.keras.layers.Dropout(dropout)
        frequencies = 10000.0 ** (-np.arange(0, num_hiddens, 2) / num_hiddens)
        phase = np.outer(np.arange(max_len), frequencies)
        table = np.empty((max_len, num_hiddens))
        table[:, 0::2], table[:, 1::2] = np.sin(phase), np.cos(phase)
        self.P = table[np.newaxis]

    def call(self, X, **kwargs):
        return self.dropout(X + self.P[:, : X.shape[1], :], **kwargs)
"""
"""A textbook's layer: a float64 table of ``max_len`` rows, added to the input (X + P)."""

SCALED_POSITIONS = """
import math
import tensorflow as tf

def add_positions(x):
    length, depth = tf.shape(x)[1], x.shape[-1]
    position = tf.cast(tf.range(length), tf.float32)[:, tf.newaxis]
    rates = tf.exp(tf.range(0, depth, 2, dtype=tf.float32) * (-math.log(10000.0) / depth))
    angles = position * rates
    pe = tf.reshape(tf.stack([tf.sin(angles), tf.cos(angles)], axis=-1), (length, depth))
    return x * tf.math.sqrt(tf.cast(depth, tf.float32)) + pe[tf.newaxis]
"""
"""An embedding scaled by √d_model and its encoding added, in one function."""

TUTORIAL_HALVES = """
import numpy as np
import tensorflow as tf

def positional_encoding(length, depth):
    '''Row p: the sines of p's angles in the first half of the columns, the cosines after.'''
    half = depth // 2
    inverse_rates = np.power(10000.0, -np.arange(half) / half)
    phase = np.arange(length)[:, None] * inverse_rates[None, :]
    return tf.constant(np.hstack([np.sin(phase), np.cos(phase)]), dtype=tf.float32)

class PositionalEmbedding(tf.keras.layers.Layer):
    '''Token vectors scaled by the root of their width, plus the table's first rows.'''

    def __init__(self, vocab_size, d_model):
        super().__init__()
        self.embedding = tf.keras.layers.Embedding(vocab_size, d_model, mask_zero=True)
        self.pos_encoding = positional_encoding(2048, d_model)
        self.d_model = d_model

    def call(self, x):
        scale = tf.math.sqrt(tf.cast(self.d_model, tf.float32))
        tokens = self.embedding(x) * scale
        return tokens + self.pos_encoding[tf.newaxis, : tf.shape(x)[1], :]
"""
"""The current tutorial's shape: sines and cosines in two halves, a table of 2048 positions,
the embedding scaled by √d_model."""

KERAS_IO_EMBEDDING = SEED_CODE["learned_embedding"]
"""Keras' text-classification example: two tables, tokens and positions, added."""

POSITIONAL_LAYERS: dict[str, tuple[str, str, dict[str, Any]]] = {
    "add_positional_encoding-textbook": (
        "add_positional_encoding",
        TEXTBOOK_POSITIONS,
        {"init": {"num_hiddens": "d_model", "dropout": 0.0, "max_len": "max_len"}},
    ),
    "add_positional_encoding-scaled": (
        "add_positional_encoding",
        SCALED_POSITIONS,
        {"params": {"scaled": True}},
    ),
    "positional_encoding-halves": (
        "positional_encoding",
        TUTORIAL_HALVES,
        {"entry": "positional_encoding", "params": {"layout": "halves"}},
    ),
    "sinusoidal_embedding-tutorial": (
        "sinusoidal_embedding",
        TUTORIAL_HALVES,
        {
            "entry": "PositionalEmbedding",
            "init": {"vocab_size": "vocab", "d_model": "d_model"},
            "weights": {"tokens": "embedding.embeddings"},
            "params": {"layout": "halves"},
        },
    ),
    "learned_embedding-keras-io": (
        "learned_embedding",
        KERAS_IO_EMBEDDING,
        {
            "init": {"maxlen": "max_len", "vocab_size": "vocab", "embed_dim": "d_model"},
            "weights": {"tokens": "token_emb.embeddings", "positions": "pos_emb.embeddings"},
        },
    ),
}
CORRECT.update(POSITIONAL_LAYERS)

PRESET_LAYERS: dict[str, tuple[str, str, dict[str, Any]]] = {
    "attention_sublayer-tutorial-preset-causal": (
        "attention_sublayer",
        TUTORIAL_ATTENTION,
        {
            "entry": "CausalSelfAttention",
            "preset": "tf-tutorial-attention",
            "dims": TUTORIAL_SIZES,
            "params": {"epsilon": 1e-3, "variant": "causal"},
        },
    ),
    "cross_attention_sublayer-tutorial-preset": (
        "cross_attention_sublayer",
        TUTORIAL_ATTENTION,
        {
            "entry": "CrossAttention",
            "preset": "tf-tutorial-attention",
            "dims": TUTORIAL_SIZES,
            "params": {"epsilon": 1e-3},
        },
    ),
    "encoder_layer-tutorial-preset": (
        "encoder_layer",
        TUTORIAL_LAYERS,
        {
            "entry": "EncoderLayer",
            "preset": "tf-tutorial-encoder-layer",
            "dims": TUTORIAL_SIZES,
            "params": {"epsilon": 1e-3},
        },
    ),
    "decoder_layer-tutorial-preset": (
        "decoder_layer",
        TUTORIAL_LAYERS,
        {
            "entry": "DecoderLayer",
            "preset": "tf-tutorial-decoder-layer",
            "dims": TUTORIAL_SIZES,
            "params": {"epsilon": 1e-3},
        },
    ),
    "encoder_layer-keras-example-preset": (
        "encoder_layer",
        KERAS_IO_BLOCK,
        {"preset": "keras-example-transformer-block", "dims": TUTORIAL_SIZES},
    ),
    "sinusoidal_embedding-tutorial-preset": (
        "sinusoidal_embedding",
        TUTORIAL_HALVES,
        {"entry": "PositionalEmbedding", "preset": "tf-tutorial-positional-embedding"},
    ),
    "learned_embedding-keras-example-preset": (
        "learned_embedding",
        KERAS_IO_EMBEDDING,
        {"preset": "keras-example-token-position-embedding"},
    ),
}
CORRECT.update(PRESET_LAYERS)
