"""Attention as a textbook's TensorFlow tab writes it: valid lengths instead of a mask,
dropout arguments, bias-free projections named after the matrices of the text, heads folded
into the batch axis. Checked on docs/guide/existing-code.md."""

import tensorflow as tf


def masked_softmax(scores, valid_lens):
    """Softmax over the last axis that ignores every key at or after a row's valid length.

    ``valid_lens`` holds one length per batch element, or one per (batch element, query).
    """
    if valid_lens is None:
        return tf.nn.softmax(scores, axis=-1)
    shape = scores.shape
    if len(valid_lens.shape) == 1:
        lengths = tf.repeat(valid_lens, repeats=shape[1])
    else:
        lengths = tf.reshape(valid_lens, shape=-1)
    flat = tf.reshape(scores, (-1, shape[-1]))
    positions = tf.range(shape[-1], dtype=tf.float32)[None, :]
    visible = positions < tf.cast(lengths, tf.float32)[:, None]
    flat = tf.where(visible, flat, -1e6 * tf.ones_like(flat))
    return tf.nn.softmax(tf.reshape(flat, shape), axis=-1)


class DotProductAttention(tf.keras.layers.Layer):
    """Scaled dot products, a masked softmax, a weighted sum of the values; the weights are
    kept as an attribute, not returned."""

    def __init__(self, dropout, **kwargs):
        super().__init__(**kwargs)
        self.dropout = tf.keras.layers.Dropout(dropout)

    def call(self, queries, keys, values, valid_lens=None, **kwargs):
        width = queries.shape[-1]
        scores = tf.matmul(queries, keys, transpose_b=True) / tf.math.sqrt(
            tf.cast(width, tf.float32)
        )
        self.attention_weights = masked_softmax(scores, valid_lens)
        return tf.matmul(self.dropout(self.attention_weights, **kwargs), values)


class MultiHeadAttention(tf.keras.layers.Layer):
    """Heads run in parallel by folding them into the batch axis."""

    def __init__(self, num_hiddens, num_heads, dropout, bias=False, **kwargs):
        super().__init__(**kwargs)
        self.num_heads = num_heads
        self.attention = DotProductAttention(dropout)
        self.W_q = tf.keras.layers.Dense(num_hiddens, use_bias=bias)
        self.W_k = tf.keras.layers.Dense(num_hiddens, use_bias=bias)
        self.W_v = tf.keras.layers.Dense(num_hiddens, use_bias=bias)
        self.W_o = tf.keras.layers.Dense(num_hiddens, use_bias=bias)

    def fold_heads(self, X):
        """(batch, steps, hiddens) -> (batch * heads, steps, hiddens / heads)."""
        X = tf.reshape(X, (X.shape[0], X.shape[1], self.num_heads, -1))
        X = tf.transpose(X, (0, 2, 1, 3))
        return tf.reshape(X, (-1, X.shape[2], X.shape[3]))

    def unfold_heads(self, X):
        """The inverse of :meth:`fold_heads`."""
        X = tf.reshape(X, (-1, self.num_heads, X.shape[1], X.shape[2]))
        X = tf.transpose(X, (0, 2, 1, 3))
        return tf.reshape(X, (X.shape[0], X.shape[1], -1))

    def call(self, queries, keys, values, valid_lens=None, **kwargs):
        queries = self.fold_heads(self.W_q(queries))
        keys = self.fold_heads(self.W_k(keys))
        values = self.fold_heads(self.W_v(values))
        if valid_lens is not None:
            valid_lens = tf.repeat(valid_lens, repeats=self.num_heads, axis=0)
        attended = self.attention(queries, keys, values, valid_lens, **kwargs)
        return self.W_o(self.unfold_heads(attended))
