"""TensorFlow code as users write it: correct versions, and realistic drifts of each.

Each entry is ``(oracle, source, options)``. The drifts are the mistakes seen in the wild,
written the way they are usually written, so the checker is tested on what it will meet.
"""

from __future__ import annotations

from typing import Any

SDPA = """
import tensorflow as tf

def scaled_dot_product_attention(q, k, v, mask=None):
    matmul_qk = tf.matmul(q, k, transpose_b=True)
    dk = tf.cast(tf.shape(k)[-1], tf.float32)
    scaled_attention_logits = matmul_qk / tf.math.sqrt(dk)
    if mask is not None:
        scaled_attention_logits += (mask * -1e9)
    attention_weights = tf.nn.softmax(scaled_attention_logits, axis=-1)
    output = tf.matmul(attention_weights, v)
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
    def __init__(self, d_model, num_heads):
        super().__init__()
        assert d_model % num_heads == 0
        self.num_heads = num_heads
        self.d_model = d_model
        self.depth = d_model // num_heads
        self.wq = tf.keras.layers.Dense(d_model)
        self.wk = tf.keras.layers.Dense(d_model)
        self.wv = tf.keras.layers.Dense(d_model)
        self.dense = tf.keras.layers.Dense(d_model)

    def split_heads(self, x, batch_size):
        x = tf.reshape(x, (batch_size, -1, self.num_heads, self.depth))
        return tf.transpose(x, perm=[0, 2, 1, 3])

    def call(self, q, k, v, mask=None):
        batch_size = tf.shape(q)[0]
        q = self.split_heads(self.wq(q), batch_size)
        k = self.split_heads(self.wk(k), batch_size)
        v = self.split_heads(self.wv(v), batch_size)
        attended, weights = scaled_dot_product_attention(q, k, v, mask)
        attended = tf.transpose(attended, perm=[0, 2, 1, 3])
        concat = tf.reshape(attended, (batch_size, -1, self.d_model))
        return self.dense(concat), weights
"""
)

MHA_WEIGHTS = (
    "W_q=wq.kernel b_q=wq.bias W_k=wk.kernel b_k=wk.bias "
    "W_v=wv.kernel b_v=wv.bias W_o=dense.kernel b_o=dense.bias"
)

KERAS_MHA_FACTORY = """
import tensorflow as tf

def build(num_heads, key_dim):
    return tf.keras.layers.MultiHeadAttention(num_heads=num_heads, key_dim=key_dim)
"""

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

FFN = """
import tensorflow as tf

def ffn(x, w1, b1, w2, b2):
    hidden = tf.nn.relu(tf.matmul(x, w1) + b1)
    return tf.matmul(hidden, w2) + b2
"""

FFN_LAYER = """
import tensorflow as tf

def point_wise_feed_forward_network(d_model, dff):
    return tf.keras.Sequential([
        tf.keras.layers.Dense(dff, activation="relu"),
        tf.keras.layers.Dense(d_model),
    ])
"""

SOFTMAX = """
import tensorflow as tf

def softmax(x):
    e = tf.exp(x - tf.reduce_max(x, axis=-1, keepdims=True))
    return e / tf.reduce_sum(e, axis=-1, keepdims=True)
"""

LAYER_NORM = """
import tensorflow as tf

def layer_norm(x, gamma, beta, eps=1e-6):
    mean, variance = tf.nn.moments(x, axes=[-1], keepdims=True)
    return gamma * (x - mean) / tf.sqrt(variance + eps) + beta
"""

KERAS_LAYER_NORM = """
import tensorflow as tf

def make():
    return tf.keras.layers.LayerNormalization(epsilon=1e-6)
"""

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

LINEAR = """
import tensorflow as tf

def project(x, w_q):
    return tf.matmul(x, w_q)
"""

KERAS_DENSE = """
import tensorflow as tf

Dense = tf.keras.layers.Dense
"""

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
