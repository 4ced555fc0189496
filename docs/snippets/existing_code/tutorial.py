"""Sublayers as the TensorFlow Transformer tutorial builds them: Keras' MultiHeadAttention or
a feed-forward stack, wrapped with an Add and a LayerNormalization. Checked on
docs/guide/existing-code.md."""

import tensorflow as tf


class BaseAttention(tf.keras.layers.Layer):
    """Keras' attention layer, configured by keyword, with a residual and a norm."""

    def __init__(self, **kwargs):
        super().__init__()
        self.mha = tf.keras.layers.MultiHeadAttention(**kwargs)
        self.layernorm = tf.keras.layers.LayerNormalization()
        self.add = tf.keras.layers.Add()


class GlobalSelfAttention(BaseAttention):
    """Every position attends to every other."""

    def call(self, x):
        attended = self.mha(query=x, value=x, key=x)
        return self.layernorm(self.add([x, attended]))


def wrapped_attention(num_heads, key_dim):
    """The Keras layer inside the wrapper, for checking on its own."""
    return GlobalSelfAttention(num_heads=num_heads, key_dim=key_dim).mha


class FeedForward(tf.keras.layers.Layer):
    """The feed-forward sublayer with its own residual and (Keras-default) normalisation."""

    def __init__(self, d_model, dff, dropout_rate=0.1):
        super().__init__()
        self.seq = tf.keras.Sequential([
            tf.keras.layers.Dense(dff, activation="relu"),
            tf.keras.layers.Dense(d_model),
            tf.keras.layers.Dropout(dropout_rate),
        ])
        self.add = tf.keras.layers.Add()
        self.layer_norm = tf.keras.layers.LayerNormalization()

    def call(self, x):
        return self.layer_norm(self.add([x, self.seq(x)]))
