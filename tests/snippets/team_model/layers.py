"""The team's attention, in its own module."""

import tensorflow as tf

from team_model.math_utils import scale


def attention(q, k, v, mask=None):
    logits = scale(tf.matmul(q, k, transpose_b=True), tf.shape(k)[-1])
    if mask is not None:
        logits += mask * -1e9
    weights = tf.nn.softmax(logits, axis=-1)
    return tf.matmul(weights, v), weights


def broken(q, k, v):
    return q.no_such_method()
