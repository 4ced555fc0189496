"""The Transformer block that docs/guide/production.md checks as source and as the
artifacts exported from it (docs/snippets/export_artifacts.py)."""

import keras
import tensorflow as tf


@keras.saving.register_keras_serializable(package="formula_check_docs")
class TransformerBlock(keras.layers.Layer):
    """Post-LN: ``y = LayerNorm(x + MultiHead(x, x, x))``, ``LayerNorm(y + FFN(y))``; a key
    the mask marks with 1 is hidden."""

    def __init__(self, d_model=8, num_heads=2, d_ff=16, **kwargs):
        super().__init__(**kwargs)
        self.d_model, self.num_heads, self.d_ff = d_model, num_heads, d_ff
        self.wq, self.wk = keras.layers.Dense(d_model), keras.layers.Dense(d_model)
        self.wv, self.wo = keras.layers.Dense(d_model), keras.layers.Dense(d_model)
        self.norm1 = keras.layers.LayerNormalization(epsilon=1e-6)
        self.ff1 = keras.layers.Dense(d_ff, activation="relu")
        self.ff2 = keras.layers.Dense(d_model)
        self.norm2 = keras.layers.LayerNormalization(epsilon=1e-6)

    def get_config(self):
        sizes = {"d_model": self.d_model, "num_heads": self.num_heads, "d_ff": self.d_ff}
        return {**super().get_config(), **sizes}

    def _heads(self, t):
        shape, depth = tf.shape(t), self.d_model // self.num_heads
        return tf.transpose(
            tf.reshape(t, [shape[0], shape[1], self.num_heads, depth]), [0, 2, 1, 3]
        )

    def call(self, x, mask=None):
        q, k, v = self._heads(self.wq(x)), self._heads(self.wk(x)), self._heads(self.wv(x))
        scores = tf.matmul(q, k, transpose_b=True) / tf.sqrt(float(self.d_model // self.num_heads))
        if mask is not None:
            scores += mask * -1e9
        heads = tf.matmul(tf.nn.softmax(scores, axis=-1), v)
        shape = tf.shape(x)
        joined = tf.reshape(tf.transpose(heads, [0, 2, 1, 3]), [shape[0], shape[1], self.d_model])
        y = self.norm1(x + self.wo(joined))
        return self.norm2(y + self.ff2(self.ff1(y)))
