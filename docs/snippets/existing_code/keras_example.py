"""A Transformer block as Keras' code examples write it: everything built in ``__init__``,
Keras' own attention, a Sequential feed-forward stack, post-LN with epsilon 1e-6. Checked on
docs/guide/existing-code.md."""

import keras
from keras import layers


class TransformerBlock(layers.Layer):
    """Attention, then feed-forward, each with dropout, a residual and a normalisation."""

    def __init__(self, embed_dim, num_heads, ff_dim, rate=0.1):
        super().__init__()
        self.att = layers.MultiHeadAttention(key_dim=embed_dim, num_heads=num_heads)
        self.layernorm1 = layers.LayerNormalization(epsilon=1e-6)
        widen = layers.Dense(ff_dim, activation="relu")
        self.ffn = keras.Sequential([widen, layers.Dense(embed_dim)])
        self.layernorm2 = layers.LayerNormalization(epsilon=1e-6)
        self.drops = [layers.Dropout(rate), layers.Dropout(rate)]

    def call(self, inputs):
        after_attention = self.layernorm1(inputs + self.drops[0](self.att(inputs, inputs)))
        return self.layernorm2(after_attention + self.drops[1](self.ffn(after_attention)))
