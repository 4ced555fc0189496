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
    lengths = tf.cast(valid_lens, tf.int32)
    if lengths.shape.rank == 1:
        lengths = lengths[:, tf.newaxis]  # one length for every query of a batch element
    visible = tf.sequence_mask(lengths, maxlen=tf.shape(scores)[-1])
    return tf.nn.softmax(tf.where(visible, scores, -1e6), axis=-1)


class DotProductAttention(tf.keras.layers.Layer):
    """Scaled dot products, a masked softmax, a weighted sum of the values; the weights are
    kept as an attribute, not returned."""

    def __init__(self, dropout, **kwargs):
        super().__init__(**kwargs)
        self.drop_weights = tf.keras.layers.Dropout(dropout)

    def call(self, queries, keys, values, valid_lens=None, **kwargs):
        scale = tf.math.rsqrt(tf.cast(queries.shape[-1], tf.float32))
        scores = tf.einsum("bqd,bkd->bqk", queries, keys) * scale
        self.attention_weights = masked_softmax(scores, valid_lens)
        kept = self.drop_weights(self.attention_weights, **kwargs)
        return tf.einsum("bqk,bkd->bqd", kept, values)


class MultiHeadAttention(tf.keras.layers.Layer):
    """Heads run in parallel by folding them into the batch axis."""

    def __init__(self, num_hiddens, num_heads, dropout, bias=False, **kwargs):
        super().__init__(**kwargs)
        self.num_heads = num_heads
        self.attention = DotProductAttention(dropout)
        self.W_q, self.W_k, self.W_v, self.W_o = (
            tf.keras.layers.Dense(num_hiddens, use_bias=bias) for _ in "qkvo"
        )

    def fold_heads(self, X):
        """(batch, steps, hiddens) -> (batch * heads, steps, hiddens / heads), batch-major."""
        batch, steps, hiddens = X.shape
        per_head = tf.reshape(X, (batch, steps, self.num_heads, hiddens // self.num_heads))
        return tf.reshape(tf.transpose(per_head, (0, 2, 1, 3)), (batch * self.num_heads, steps, -1))

    def unfold_heads(self, X):
        """The inverse of :meth:`fold_heads`."""
        folded, steps, width = X.shape
        batch = folded // self.num_heads
        per_head = tf.reshape(X, (batch, self.num_heads, steps, width))
        return tf.reshape(tf.transpose(per_head, (0, 2, 1, 3)), (batch, steps, -1))

    def call(self, queries, keys, values, valid_lens=None, **kwargs):
        q = self.fold_heads(self.W_q(queries))  # (b * h, n, d_model / h)
        k, v = self.fold_heads(self.W_k(keys)), self.fold_heads(self.W_v(values))
        if valid_lens is not None:
            # batch-major folding: row i * heads + j is head j of batch element i
            valid_lens = tf.repeat(valid_lens, self.num_heads, axis=0)
        attended = self.attention(q, k, v, valid_lens, **kwargs)
        return self.W_o(self.unfold_heads(attended))
