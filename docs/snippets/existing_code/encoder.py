"""An encoder layer in the shape of the TensorFlow tutorial's 2022 edition: its own
multi-head layer (values first in ``call``), a feed-forward factory, two post-LN residuals.
Checked part by part on docs/guide/existing-code.md."""

import tensorflow as tf


def scaled_dot_product_attention(q, k, v, mask):
    """The attended values and the weights; ``mask`` is 1.0 where a key is hidden."""
    logits = tf.matmul(q, k, transpose_b=True)
    logits = logits / tf.math.sqrt(tf.cast(tf.shape(k)[-1], tf.float32))
    if mask is not None:
        logits += mask * -1e9
    weights = tf.nn.softmax(logits, axis=-1)
    return tf.matmul(weights, v), weights


class MultiHeadAttention(tf.keras.layers.Layer):
    """Four dense projections; heads split off the last axis and moved forward."""

    def __init__(self, *, d_model, num_heads):
        super().__init__()
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

    def call(self, v, k, q, mask):
        batch_size = tf.shape(q)[0]
        q = self.split_heads(self.wq(q), batch_size)
        k = self.split_heads(self.wk(k), batch_size)
        v = self.split_heads(self.wv(v), batch_size)
        attended, weights = scaled_dot_product_attention(q, k, v, mask)
        attended = tf.transpose(attended, perm=[0, 2, 1, 3])
        return self.dense(tf.reshape(attended, (batch_size, -1, self.d_model))), weights


def point_wise_feed_forward_network(d_model, dff):
    """Two dense layers, the first with a ReLU."""
    return tf.keras.Sequential([
        tf.keras.layers.Dense(dff, activation="relu"),
        tf.keras.layers.Dense(d_model),
    ])


class EncoderLayer(tf.keras.layers.Layer):
    """Self-attention and feed-forward sublayers, each with dropout, a residual and a norm."""

    def __init__(self, *, d_model, num_heads, dff, rate=0.1):
        super().__init__()
        self.mha = MultiHeadAttention(d_model=d_model, num_heads=num_heads)
        self.ffn = point_wise_feed_forward_network(d_model, dff)
        self.layernorm1 = tf.keras.layers.LayerNormalization(epsilon=1e-6)
        self.layernorm2 = tf.keras.layers.LayerNormalization(epsilon=1e-6)
        self.dropout1 = tf.keras.layers.Dropout(rate)
        self.dropout2 = tf.keras.layers.Dropout(rate)

    def call(self, x, training, mask):
        attended, _ = self.mha(x, x, x, mask)
        out1 = self.layernorm1(x + self.dropout1(attended, training=training))
        ffn_out = self.dropout2(self.ffn(out1), training=training)
        return self.layernorm2(out1 + ffn_out)

