"""The drift matrix: realistic ways code leaves its formula, each as an edit of correct code.

``DRIFTS[name] = (case, old, new, extra_options)``: take the correct implementation
``implementations.CORRECT[case]``, replace ``old`` by ``new`` (``old`` must occur), check it.
"""

from __future__ import annotations

from typing import Any

DRIFTS: dict[str, tuple[str, str, str, dict[str, Any]]] = {
    # attention
    "attention: divides by d_k, not sqrt(d_k)": ("attention", "tf.math.sqrt(dk)", "dk", {}),
    "attention: no scaling": ("attention", "matmul_qk / tf.math.sqrt(dk)", "matmul_qk", {}),
    "attention: softmax over the query axis": ("attention", "axis=-1", "axis=1", {}),
    "attention: mask with the wrong sign": ("attention-causal", "mask * -1e9", "mask * 1e9", {}),
    "attention: mask ignored": ("attention-padding", "+= (mask * -1e9)", "+= 0.0", {}),
    "attention: keep mask inverted": (
        "attention-keep-mask",
        "tf.where(mask, scores",
        "tf.where(~mask, scores",
        {},
    ),
    # multi-head
    "multihead: split without the transpose": (
        "multihead-tutorial",
        "return tf.transpose(x, perm=[0, 2, 1, 3])",
        "return tf.reshape(x, (batch_size, self.num_heads, -1, self.depth))",
        {},
    ),
    "multihead: heads not transposed back before concat": (
        "multihead-tutorial",
        "attended = tf.transpose(attended, perm=[0, 2, 1, 3])",
        "pass",
        {},
    ),
    "multihead: output projection forgotten": (
        "multihead-tutorial",
        "return self.dense(concat), weights",
        "return concat, weights",
        {},
    ),
    "multihead: values projected with W_k": ("multihead-tutorial", "self.wv(v)", "self.wk(v)", {}),
    "multihead: mask wrong sign": (
        "multihead-tutorial-masked-self",
        "mask * -1e9",
        "mask * 1e9",
        {},
    ),
    # single-head self-attention
    "self_attention: scaled by sqrt(d_model)": (
        "self_attention",
        "float(self.d_k)",
        "float(x.shape[-1])",
        {},
    ),
    "self_attention: K Q swapped": (
        "self_attention",
        "tf.matmul(Q, K, transpose_b=True)",
        "tf.matmul(K, Q, transpose_b=True)",
        {},
    ),
    "self_attention: output projection forgotten": (
        "self_attention",
        "return self.dense(tf.matmul(weights, V)), weights",
        "return tf.matmul(weights, V), weights",
        {},
    ),
    "self_attention: values projected with W_k": (
        "self_attention",
        "self.W_v(x)",
        "self.W_k(x)",
        {},
    ),
    # positional encoding
    "positional_encoding: sin and cos swapped": (
        "positional_encoding",
        "tf.sin(angles) * even + tf.cos(angles)",
        "tf.cos(angles) * even + tf.sin(angles)",
        {},
    ),
    "positional_encoding: exponent i/d instead of 2i/d": (
        "positional_encoding",
        "(2 * (i // 2))",
        "(i // 2)",
        {},
    ),
    "positional_encoding: base 1000": ("positional_encoding", "10000.0", "1000.0", {}),
    "positional_encoding: [sin | cos] halves": (
        "positional_encoding",
        "pe = tf.sin(angles) * even + tf.cos(angles) * (1 - even)",
        "pe = tf.concat([tf.sin(angles[:, 0::2]), tf.cos(angles[:, 1::2])], axis=-1)",
        {},
    ),
    "positional_encoding: exponent uses the column index": (
        "positional_encoding",
        "(2 * (i // 2))",
        "i",
        {},
    ),
    # feed-forward
    "ffn: relu replaced by gelu": ("ffn", "tf.nn.relu(", "tf.nn.gelu(", {}),
    "ffn: missing bias b1": ("ffn", "tf.matmul(x, w1) + b1", "tf.matmul(x, w1)", {}),
    "ffn: missing bias b2": ("ffn", "tf.matmul(hidden, w2) + b2", "tf.matmul(hidden, w2)", {}),
    "ffn: no activation": ("ffn", "tf.nn.relu(tf.matmul(x, w1) + b1)", "tf.matmul(x, w1) + b1", {}),
    "ffn: Sequential layer without relu": (
        "ffn-keras-sequential",
        'Dense(dff, activation="relu")',
        "Dense(dff)",
        {},
    ),
    # softmax
    "softmax: wrong axis": ("softmax", "axis=-1, keepdims=True)\n", "axis=1, keepdims=True)\n", {}),
    "softmax: normalised over everything": (
        "softmax",
        "tf.reduce_sum(e, axis=-1, keepdims=True)",
        "tf.reduce_sum(e)",
        {},
    ),
    "softmax: log-softmax": (
        "softmax",
        "return e / tf.reduce_sum(e, axis=-1, keepdims=True)",
        "return tf.nn.log_softmax(x)",
        {},
    ),
    "softmax: exponent without normalisation": (
        "softmax",
        "return e / tf.reduce_sum(e, axis=-1, keepdims=True)",
        "return e",
        {},
    ),
    # layer norm
    "layer_norm: normalised over the sequence axis": ("layer_norm", "axes=[-1]", "axes=[1]", {}),
    "layer_norm: gamma and beta swapped": (
        "layer_norm",
        "return gamma * (x - mean) / tf.sqrt(variance + eps) + beta",
        "return beta * (x - mean) / tf.sqrt(variance + eps) + gamma",
        {},
    ),
    "layer_norm: beta forgotten": (
        "layer_norm",
        "tf.sqrt(variance + eps) + beta",
        "tf.sqrt(variance + eps)",
        {},
    ),
    "layer_norm: Keras default epsilon": (
        "layer_norm-keras",
        "epsilon=1e-6",
        "epsilon=1e-1",
        {"weights": {"gamma": "gamma", "beta": "beta"}},
    ),
    "layer_norm: Keras' default epsilon, read back by the weight map": (
        "layer_norm-keras-epsilon-read",
        "epsilon=1e-6",
        "epsilon=1e-3",
        {},
    ),
    "layer_norm: the layer's own gamma and beta left unused": (
        "layer_norm-own-weights",
        "return self.gamma * (x - mean) / tf.sqrt(variance + 1e-6) + self.beta",
        "return (x - mean) / tf.sqrt(variance + 1e-6)",
        {},
    ),
    "ffn: a plain tf.Variable bias forgotten in a Keras layer": (
        "ffn-tf-variables",
        "tf.matmul(x, self.w1) + self.b1)",
        "tf.matmul(x, self.w1))",
        {},
    ),
    "ffn: a plain tf.Variable bias forgotten in a tf.Module": (
        "ffn-tf-module",
        "tf.matmul(x, self.w1) + self.b1)",
        "tf.matmul(x, self.w1))",
        {},
    ),
    # linear
    # linear
    "linear: scaled output": (
        "linear",
        "return tf.matmul(x, w_q)",
        "return tf.matmul(x, w_q) / 2.0",
        {},
    ),
    "linear: adds a ones bias": (
        "linear",
        "return tf.matmul(x, w_q)",
        "return tf.matmul(x, w_q) + 1.0",
        {},
    ),
    "linear: squared input": ("linear", "tf.matmul(x, w_q)", "tf.matmul(x * x, w_q)", {}),
    "linear: weight columns reversed": (
        "linear",
        "tf.matmul(x, w_q)",
        "tf.matmul(x, w_q[:, ::-1])",
        {},
    ),
    # residual + layer norm
    "sublayer: no residual": (
        "sublayer-post",
        "return self.norm(x + self.ffn(x))",
        "return self.norm(self.ffn(x))",
        {},
    ),
    "sublayer: residual outside the norm": (
        "sublayer-post",
        "return self.norm(x + self.ffn(x))",
        "return x + self.norm(self.ffn(x))",
        {},
    ),
    "sublayer: pre-LN code, post-LN formula": (
        "sublayer-pre",
        "pre_norm=False",
        "pre_norm=None",
        {"init": {"d_model": "d_model", "d_ff": "d_ff"}},
    ),
    "sublayer: Keras default epsilon": (
        "sublayer-post",
        "LayerNormalization(epsilon=1e-6)",
        "LayerNormalization()",
        {},
    ),
    # head width stated apart from d_model / h (Keras' key_dim)
    "multihead: scaled by sqrt(d_model / h), not sqrt(key_dim)": (
        "multihead-wide-heads",
        "tf.sqrt(float(self.key_dim))",
        "tf.sqrt(float(self.d_model // self.num_heads))",
        {},
    ),
    "multihead: output projection forgotten with wide heads": (
        "multihead-wide-heads",
        "return self.wo(out), weights",
        "return out, weights",
        {},
    ),
    # composite layers: residual order, norm placement, masks, sublayer order
    "attention_sublayer: residual outside the norm": (
        "attention_sublayer-tutorial",
        "        x = self.add([x, attn_output])\n        return self.layernorm(x)",
        "        return self.add([x, self.layernorm(attn_output)])",
        {},
    ),
    "attention_sublayer: no residual": (
        "attention_sublayer-tutorial",
        "x = self.add([x, attn_output])",
        "x = attn_output",
        {},
    ),
    "attention_sublayer: pre-LN code, post-LN formula": (
        "attention_sublayer-tutorial",
        "        attn_output = self.mha(query=x, value=x, key=x)\n"
        "        x = self.add([x, attn_output])\n        return self.layernorm(x)",
        "        y = self.layernorm(x)\n"
        "        return self.add([x, self.mha(query=y, value=y, key=y)])",
        {},
    ),
    "attention_sublayer: Keras' default epsilon, the formula's 1e-6": (
        "attention_sublayer-tutorial",
        "LayerNormalization()",
        "LayerNormalization()",
        {"params": {"epsilon": 1e-6}},
    ),
    "attention_sublayer: causal mask forgotten": (
        "attention_sublayer-tutorial-causal",
        "use_causal_mask=True",
        "use_causal_mask=False",
        {},
    ),
    "cross_attention_sublayer: keys and values from x, not the context": (
        "cross_attention_sublayer-tutorial",
        "query=x, key=context, value=context",
        "query=x, key=x, value=x",
        {},
    ),
    "cross_attention_sublayer: no residual": (
        "cross_attention_sublayer-tutorial",
        "self.last_attn_scores = attn_scores\n        x = self.add([x, attn_output])",
        "self.last_attn_scores = attn_scores\n        x = attn_output",
        {},
    ),
    "cross_attention_sublayer: pre-LN code, post-LN formula": (
        "cross_attention_sublayer-tutorial",
        "        attn_output, attn_scores = self.mha(\n"
        "            query=x, key=context, value=context, return_attention_scores=True\n"
        "        )\n"
        "        self.last_attn_scores = attn_scores\n"
        "        x = self.add([x, attn_output])\n"
        "        return self.layernorm(x)",
        "        y = self.layernorm(x)\n"
        "        attn_output = self.mha(query=y, key=context, value=context)\n"
        "        return self.add([x, attn_output])",
        {},
    ),
    "cross_attention_sublayer: Keras' default epsilon, the formula's 1e-6": (
        "cross_attention_sublayer-tutorial",
        "LayerNormalization()",
        "LayerNormalization()",
        {"params": {"epsilon": 1e-6}},
    ),
    "encoder_layer: feed-forward sublayer before the attention": (
        "encoder_layer-tutorial",
        "        x = self.self_attention(x)\n        return self.ffn(x)",
        "        x = self.ffn(x)\n        return self.self_attention(x)",
        {},
    ),
    "encoder_layer: no residual around the feed-forward network": (
        "encoder_layer-tutorial",
        "x = self.add([x, self.seq(x)])",
        "x = self.seq(x)",
        {},
    ),
    "encoder_layer: feed-forward network without its ReLU": (
        "encoder_layer-tutorial",
        'Dense(dff, activation="relu")',
        "Dense(dff)",
        {},
    ),
    "encoder_layer: feed-forward network of the input, not of the attention's": (
        "encoder_layer-keras-io",
        "ffn_output = self.ffn(out1)",
        "ffn_output = self.ffn(inputs)",
        {},
    ),
    "encoder_layer: second residual from the input": (
        "encoder_layer-keras-io",
        "return self.layernorm2(out1 + ffn_output)",
        "return self.layernorm2(inputs + ffn_output)",
        {},
    ),
    "encoder_layer: the first norm used twice": (
        "encoder_layer-keras-io",
        "return self.layernorm2(out1 + ffn_output)",
        "return self.layernorm1(out1 + ffn_output)",
        {},
    ),
    "encoder_layer: mask ignored": (
        "encoder_layer-textbook",
        "output = self.attention(queries, keys, values, mask)",
        "output = self.attention(queries, keys, values)",
        {},
    ),
    "encoder_layer: post-LN code, pre-LN formula": (
        "encoder_layer-pre-norm",
        "        y = self.norm1(x)\n        x = x + self.attention(y, y, attention_mask=mask)\n"
        "        return x + self.out(self.hidden(self.norm2(x)))",
        "        x = self.norm1(x + self.attention(x, x, attention_mask=mask))\n"
        "        return self.norm2(x + self.out(self.hidden(x)))",
        {},
    ),
    "encoder_layer: pre-LN without the last residual": (
        "encoder_layer-pre-norm",
        "return x + self.out(self.hidden(self.norm2(x)))",
        "return self.out(self.hidden(self.norm2(x)))",
        {},
    ),
    "encoder_layer: pre-LN with its mask ignored": (
        "encoder_layer-pre-norm",
        "attention_mask=mask",
        "attention_mask=None",
        {},
    ),
    "encoder_layer: ReLU6 in a pre-LN feed-forward network": (
        "encoder_layer-pre-norm",
        'activation="relu"',
        'activation="relu6"',
        {},
    ),
    "encoder_layer: ReLU6 in a post-LN feed-forward network": (
        "encoder_layer-keras-io",
        'layers.Dense(ff_dim, activation="relu")',
        'layers.Dense(ff_dim, activation="relu6")',
        {},
    ),
    "decoder_layer: causal mask forgotten": (
        "decoder_layer-tutorial",
        "mha(query=x, value=x, key=x, use_causal_mask=True)",
        "mha(query=x, value=x, key=x)",
        {},
    ),
    "decoder_layer: cross-attention before the causal self-attention": (
        "decoder_layer-tutorial",
        "        x = self.causal_self_attention(x=x)\n"
        "        x = self.cross_attention(x=x, context=context)",
        "        x = self.cross_attention(x=x, context=context)\n"
        "        x = self.causal_self_attention(x=x)",
        {},
    ),
    "decoder_layer: cross-attention to itself, not the context": (
        "decoder_layer-tutorial",
        "x = self.cross_attention(x=x, context=context)",
        "x = self.cross_attention(x=x, context=x)",
        {},
    ),
    "decoder_layer: feed-forward sublayer skipped": (
        "decoder_layer-tutorial",
        "x = self.cross_attention(x=x, context=context)\n        return self.ffn(x)",
        "x = self.cross_attention(x=x, context=context)\n        return x",
        {},
    ),
    "add_norm: residual outside the norm": (
        "add_norm-textbook",
        "return self.ln(self.dropout(Y) + X)",
        "return self.ln(self.dropout(Y)) + X",
        {},
    ),
    "add_norm: the input forgotten": (
        "add_norm-textbook",
        "return self.ln(self.dropout(Y) + X)",
        "return self.ln(self.dropout(Y))",
        {},
    ),
    "add_norm: the sublayer's output subtracted": (
        "add_norm-textbook",
        "self.dropout(Y) + X",
        "X - self.dropout(Y)",
        {},
    ),
    "add_norm: Keras' default epsilon, the formula's 1e-6": (
        "add_norm-textbook",
        "LayerNormalization(norm_shape)",
        "LayerNormalization(norm_shape)",
        {"params": {"epsilon": 1e-6}},
    ),
    # positional layers that take an input, and the halves layout
    "add_positional_encoding: sin and cos swapped": (
        "add_positional_encoding-textbook",
        "self.P[:, :, 0::2] = np.sin(angles)\n        self.P[:, :, 1::2] = np.cos(angles)",
        "self.P[:, :, 0::2] = np.cos(angles)\n        self.P[:, :, 1::2] = np.sin(angles)",
        {},
    ),
    "add_positional_encoding: exponent i/d instead of 2i/d": (
        "add_positional_encoding-textbook",
        "np.arange(0, num_hiddens, 2, dtype=np.float32)",
        "np.arange(0, num_hiddens // 2, dtype=np.float32)",
        {},
    ),
    "add_positional_encoding: positions start at one": (
        "add_positional_encoding-textbook",
        "self.P[:, :X.shape[1], :]",
        "self.P[:, 1 : X.shape[1] + 1, :]",
        {},
    ),
    "add_positional_encoding: scaled by d_model, not its root": (
        "add_positional_encoding-scaled",
        "x * tf.math.sqrt(tf.cast(depth, tf.float32))",
        "x * tf.cast(depth, tf.float32)",
        {},
    ),
    "add_positional_encoding: scale forgotten": (
        "add_positional_encoding-scaled",
        "x * tf.math.sqrt(tf.cast(depth, tf.float32))",
        "x",
        {},
    ),
    "positional_encoding: interleaved code, halves formula": (
        "positional_encoding-halves",
        "np.concatenate([np.sin(angle_rads), np.cos(angle_rads)], axis=-1)",
        "np.stack([np.sin(angle_rads), np.cos(angle_rads)], axis=-1).reshape(length, -1)",
        {},
    ),
    "positional_encoding: halves with cosines first": (
        "positional_encoding-halves",
        "[np.sin(angle_rads), np.cos(angle_rads)]",
        "[np.cos(angle_rads), np.sin(angle_rads)]",
        {},
    ),
    "positional_encoding: halves whose rates use the whole depth": (
        "positional_encoding-halves",
        "depths = np.arange(depth)[np.newaxis, :] / depth",
        "depths = np.arange(depth)[np.newaxis, :] / (2 * depth)",
        {},
    ),
    "sinusoidal_embedding: embedding not scaled": (
        "sinusoidal_embedding-tutorial",
        "        x *= tf.math.sqrt(tf.cast(self.d_model, tf.float32))\n",
        "",
        {},
    ),
    "sinusoidal_embedding: scaled by d_model": (
        "sinusoidal_embedding-tutorial",
        "x *= tf.math.sqrt(tf.cast(self.d_model, tf.float32))",
        "x *= tf.cast(self.d_model, tf.float32)",
        {},
    ),
    "sinusoidal_embedding: halves code, interleaved formula": (
        "sinusoidal_embedding-tutorial",
        "np.concatenate([np.sin(angle_rads), np.cos(angle_rads)], axis=-1)",
        "np.concatenate([np.sin(angle_rads), np.cos(angle_rads)], axis=-1)",
        {"params": {"layout": "interleaved"}},
    ),
    "sinusoidal_embedding: positions reversed": (
        "sinusoidal_embedding-tutorial",
        "self.pos_encoding[tf.newaxis, :length, :]",
        "tf.reverse(self.pos_encoding[tf.newaxis, :length, :], axis=[1])",
        {},
    ),
    "learned_embedding: positions looked up in the token table": (
        "learned_embedding-keras-io",
        "positions = self.pos_emb(positions)",
        "positions = self.token_emb(positions)",
        {},
    ),
    "learned_embedding: positions reversed": (
        "learned_embedding-keras-io",
        "tf.range(start=0, limit=maxlen, delta=1)",
        "tf.range(start=maxlen - 1, limit=-1, delta=-1)",
        {},
    ),
    "learned_embedding: positions forgotten": (
        "learned_embedding-keras-io",
        "return x + positions",
        "return x",
        {},
    ),
    "learned_embedding: scaled by the root of the width": (
        "learned_embedding-keras-io",
        "return x + positions",
        "return x * tf.math.sqrt(tf.cast(tf.shape(x)[-1], tf.float32)) + positions",
        {},
    ),
}
