"""An encoder layer in the shape of the TensorFlow tutorial's 2022 edition: its own
multi-head layer (values first in ``call``), a feed-forward factory, two post-LN residuals.
Checked part by part on docs/guide/existing-code.md."""

import tensorflow as tf


def scaled_dot_product_attention(q, k, v, mask):
    """The attended values and the weights; ``mask`` is 1.0 where a key is hidden."""
    depth = tf.cast(tf.shape(k)[-1], tf.float32)
    logits = tf.matmul(q, k, transpose_b=True) * tf.math.rsqrt(depth)
    if mask is not None:
        logits -= 1e9 * mask
    weights = tf.nn.softmax(logits)
    return weights @ v, weights


class MultiHeadAttention(tf.keras.layers.Layer):
    """Four dense projections; heads split off the last axis and moved forward."""

    def __init__(self, *, d_model, num_heads):
        super().__init__()
        self.num_heads, self.d_model = num_heads, d_model
        self.wq, self.wk, self.wv = (tf.keras.layers.Dense(d_model) for _ in range(3))
        self.dense = tf.keras.layers.Dense(d_model)

    def call(self, v, k, q, mask):
        attended, weights = scaled_dot_product_attention(
            self.heads(self.wq(q)), self.heads(self.wk(k)), self.heads(self.wv(v)), mask
        )
        side_by_side = tf.transpose(attended, [0, 2, 1, 3])
        return self.dense(tf.reshape(side_by_side, (tf.shape(q)[0], -1, self.d_model))), weights

    def heads(self, x):
        """(batch, length, d_model) -> (batch, heads, length, d_model / heads)."""
        split = tf.reshape(x, (tf.shape(x)[0], tf.shape(x)[1], self.num_heads, -1))
        return tf.transpose(split, [0, 2, 1, 3])


def point_wise_feed_forward_network(d_model, dff):
    """Two dense layers, the first with a ReLU."""
    expand = tf.keras.layers.Dense(dff, activation="relu")
    return tf.keras.Sequential([expand, tf.keras.layers.Dense(d_model)])


class EncoderLayer(tf.keras.layers.Layer):
    """Self-attention and feed-forward sublayers, each with dropout, a residual and a norm."""

    def __init__(self, *, d_model, num_heads, dff, rate=0.1):
        super().__init__()
        self.mha = MultiHeadAttention(d_model=d_model, num_heads=num_heads)
        self.layernorm1 = tf.keras.layers.LayerNormalization(epsilon=1e-6)
        self.ffn = point_wise_feed_forward_network(d_model, dff)
        self.layernorm2 = tf.keras.layers.LayerNormalization(epsilon=1e-6)
        self.drop_attended = tf.keras.layers.Dropout(rate)
        self.drop_transformed = tf.keras.layers.Dropout(rate)

    def call(self, x, training, mask):
        attended, _ = self.mha(x, x, x, mask)
        y = self.layernorm1(x + self.drop_attended(attended, training=training))
        transformed = self.drop_transformed(self.ffn(y), training=training)
        return self.layernorm2(y + transformed)
