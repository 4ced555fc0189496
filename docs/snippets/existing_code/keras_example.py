"""A Transformer block as Keras' code examples write it: everything built in ``__init__``,
Keras' own attention, a Sequential feed-forward stack, post-LN with epsilon 1e-6. Checked on
docs/guide/existing-code.md."""

import keras
from keras import layers


class TransformerBlock(layers.Layer):
    """Attention, then feed-forward, each with dropout, a residual and a normalisation."""

    def __init__(self, embed_dim, num_heads, ff_dim, rate=0.1):
        super().__init__()
        self.att = layers.MultiHeadAttention(num_heads=num_heads, key_dim=embed_dim)
        self.ffn = keras.Sequential(
            [layers.Dense(ff_dim, activation="relu"), layers.Dense(embed_dim)]
        )
        self.layernorm1 = layers.LayerNormalization(epsilon=1e-6)
        self.layernorm2 = layers.LayerNormalization(epsilon=1e-6)
        self.dropout1 = layers.Dropout(rate)
        self.dropout2 = layers.Dropout(rate)

    def call(self, inputs):
        attended = self.dropout1(self.att(inputs, inputs))
        out1 = self.layernorm1(inputs + attended)
        return self.layernorm2(out1 + self.dropout2(self.ffn(out1)))

