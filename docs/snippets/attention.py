"""Scaled dot-product attention, kept in a file so several pages can point at it."""

import tensorflow as tf


def scaled_dot_product_attention(q, k, v, mask=None):
    """softmax(q k^T / sqrt(d_k)) v; ``mask`` is 1.0 where a key must be ignored."""
    logits = tf.matmul(q, k, transpose_b=True)
    logits /= tf.math.sqrt(tf.cast(tf.shape(k)[-1], logits.dtype))
    if mask is not None:
        logits += mask * -1e9
    weights = tf.nn.softmax(logits, axis=-1)
    return tf.matmul(weights, v), weights
