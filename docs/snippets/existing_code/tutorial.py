"""Sublayers as the TensorFlow Transformer tutorial builds them: Keras' MultiHeadAttention or
a feed-forward stack, wrapped with an Add and a LayerNormalization. Checked on
docs/guide/existing-code.md."""

import tensorflow as tf


class BaseAttention(tf.keras.layers.Layer):
    """Keras' attention layer, configured by keyword, with a residual and a norm."""

    def __init__(self, **attention_keywords):
        super().__init__()
        self.add = tf.keras.layers.Add()
        self.mha = tf.keras.layers.MultiHeadAttention(**attention_keywords)
        self.layernorm = tf.keras.layers.LayerNormalization()


class GlobalSelfAttention(BaseAttention):
    """Every position attends to every other."""

    def call(self, x):
        mixed = self.mha(query=x, key=x, value=x)
        return self.layernorm(self.add([x, mixed]))


class FeedForward(tf.keras.layers.Layer):
    """The feed-forward sublayer with its own residual and (Keras-default) normalisation."""

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
    """Global self-attention, then the feed-forward sublayer; each head as wide as the model."""

    def __init__(self, *, d_model, num_heads, dff, dropout_rate=0.1):
        super().__init__()
        heads = {"num_heads": num_heads, "key_dim": d_model, "dropout": dropout_rate}
        self.self_attention = GlobalSelfAttention(**heads)
        self.ffn = FeedForward(d_model, dff, dropout_rate)

    def call(self, x):
        return self.ffn(self.self_attention(x))
