"""Layers of a small model package, imported by module snippets (``docs.snippets.layers``)."""

import tensorflow as tf


class PositionwiseFeedForward(tf.keras.layers.Layer):
    """Two dense layers with a ReLU between them, applied to every position."""

    def __init__(self, d_model, d_ff):
        super().__init__()
        self.expand = tf.keras.layers.Dense(d_ff, activation="relu")
        self.project = tf.keras.layers.Dense(d_model)

    def call(self, x):
        return self.project(self.expand(x))
