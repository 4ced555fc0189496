"""The drift matrix: realistic ways code leaves its formula, each as an edit of correct code.

``DRIFTS[name] = (case, old, new, extra_options)``: take the correct implementation
``implementations.CORRECT[case]``, replace ``old`` by ``new`` (``old`` must occur once), check
it. A case whose code is a seed of the mutation bench is edited in that very code.
"""

from __future__ import annotations

from typing import Any

DRIFTS: dict[str, tuple[str, str, str, dict[str, Any]]] = {
    # attention
    "attention: divides by d_k, not sqrt(d_k)": ("attention", "tf.math.sqrt(dk)", "dk", {}),
    "attention: no scaling": ("attention", " / tf.math.sqrt(dk)", "", {}),
    "attention: softmax over the query axis": ("attention", "axis=-1", "axis=1", {}),
    "attention: mask with the wrong sign": ("attention-causal", "mask * -1e9", "mask * 1e9", {}),
    "attention: mask ignored": (
        "attention-padding",
        "logits += (mask * -1e9)",
        "logits += 0.0",
        {},
    ),
    "attention: keep mask inverted": (
        "attention-keep-mask",
        "tf.where(mask, scores",
        "tf.where(~mask, scores",
        {},
    ),
    # multi-head
    "multihead: split without the transpose": (
        "multihead-tutorial",
        "return tf.transpose(parts, perm=[0, 2, 1, 3])",
        "return tf.reshape(parts, (tf.shape(x)[0], self.num_heads, tf.shape(x)[1], -1))",
        {},
    ),
    "multihead: heads not transposed back before concat": (
        "multihead-tutorial",
        "side_by_side = tf.transpose(x, perm=[0, 2, 1, 3])",
        "side_by_side = x",
        {},
    ),
    "multihead: output projection forgotten": (
        "multihead-tutorial",
        "return self.dense(self.from_heads(heads)), weights",
        "return self.from_heads(heads), weights",
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
    "ffn: missing bias b1": ("ffn", "tf.matmul(x, W_1) + b_1", "tf.matmul(x, W_1)", {}),
    "ffn: missing bias b2": ("ffn", "tf.matmul(hidden, W_2) + b_2", "tf.matmul(hidden, W_2)", {}),
    "ffn: no activation": (
        "ffn",
        "tf.nn.relu(tf.matmul(x, W_1) + b_1)",
        "tf.matmul(x, W_1) + b_1",
        {},
    ),
    "ffn: Sequential layer without relu": (
        "ffn-keras-sequential",
        'Dense(dff, activation="relu")',
        "Dense(dff)",
        {},
    ),
    # softmax
    "softmax: wrong axis": ("softmax", "reduce_sum(exps, axis=-1", "reduce_sum(exps, axis=1", {}),
    "softmax: normalised over everything": (
        "softmax",
        "tf.reduce_sum(exps, axis=-1, keepdims=True)",
        "tf.reduce_sum(exps)",
        {},
    ),
    "softmax: log-softmax": (
        "softmax",
        "return exps / tf.reduce_sum(exps, axis=-1, keepdims=True)",
        "return tf.nn.log_softmax(x)",
        {},
    ),
    "softmax: exponent without normalisation": (
        "softmax",
        "return exps / tf.reduce_sum(exps, axis=-1, keepdims=True)",
        "return exps",
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
        "return self.settle(x, mixed)",
        "return self.add([x, self.layernorm(mixed)])",
        {},
    ),
    "attention_sublayer: no residual": (
        "attention_sublayer-tutorial",
        "return self.settle(x, mixed)",
        "return self.layernorm(mixed)",
        {},
    ),
    "attention_sublayer: pre-LN code, post-LN formula": (
        "attention_sublayer-tutorial",
        "        mixed = self.mha(query=x, key=x, value=x)\n        return self.settle(x, mixed)",
        "        normed = self.layernorm(x)\n"
        "        return self.add([x, self.mha(query=normed, key=normed, value=normed)])",
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
        "value=context, key=context",
        "value=x, key=x",
        {},
    ),
    "cross_attention_sublayer: no residual": (
        "cross_attention_sublayer-tutorial",
        "return self.settle(x, read)",
        "return self.layernorm(read)",
        {},
    ),
    "cross_attention_sublayer: pre-LN code, post-LN formula": (
        "cross_attention_sublayer-tutorial",
        "        read, scores = self.mha(\n"
        "            query=x, value=context, key=context, return_attention_scores=True\n"
        "        )\n"
        "        self.last_attn_scores = scores  # kept for plotting after the call\n"
        "        return self.settle(x, read)",
        "        normed = self.layernorm(x)\n"
        "        return self.add([x, self.mha(query=normed, value=context, key=context)])",
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
        "return self.ffn(self.self_attention(x))",
        "return self.self_attention(self.ffn(x))",
        {},
    ),
    "encoder_layer: no residual around the feed-forward network": (
        "encoder_layer-tutorial",
        "self.add([x, self.seq(x)])",
        "self.seq(x)",
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
        "self.ffn(hidden)",
        "self.ffn(inputs)",
        {},
    ),
    "encoder_layer: second residual from the input": (
        "encoder_layer-keras-io",
        "return self.layernorm2(hidden + transformed)",
        "return self.layernorm2(inputs + transformed)",
        {},
    ),
    "encoder_layer: the first norm used twice": (
        "encoder_layer-keras-io",
        "return self.layernorm2(hidden + transformed)",
        "return self.layernorm1(hidden + transformed)",
        {},
    ),
    "encoder_layer: mask ignored": (
        "encoder_layer-textbook",
        "self.attention(q, k, v, mask)",
        "self.attention(q, k, v)",
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
        "use_causal_mask=True",
        "use_causal_mask=False",
        {},
    ),
    "decoder_layer: cross-attention before the causal self-attention": (
        "decoder_layer-tutorial",
        "        own = self.causal_self_attention(x)\n"
        "        mixed = self.cross_attention(own, context)\n"
        "        return self.ffn(mixed)",
        "        mixed = self.cross_attention(x, context)\n"
        "        own = self.causal_self_attention(mixed)\n"
        "        return self.ffn(own)",
        {},
    ),
    "decoder_layer: cross-attention to itself, not the context": (
        "decoder_layer-tutorial",
        "self.cross_attention(own, context)",
        "self.cross_attention(own, own)",
        {},
    ),
    "decoder_layer: feed-forward sublayer skipped": (
        "decoder_layer-tutorial",
        "return self.ffn(mixed)",
        "return mixed",
        {},
    ),
    "add_norm: residual outside the norm": (
        "add_norm-textbook",
        "return self.ln(X + self.drop(Y))",
        "return X + self.ln(self.drop(Y))",
        {},
    ),
    "add_norm: the input forgotten": (
        "add_norm-textbook",
        "return self.ln(X + self.drop(Y))",
        "return self.ln(self.drop(Y))",
        {},
    ),
    "add_norm: the sublayer's output subtracted": (
        "add_norm-textbook",
        "X + self.drop(Y)",
        "X - self.drop(Y)",
        {},
    ),
    "add_norm: Keras' default epsilon, the formula's 1e-6": (
        "add_norm-textbook",
        "LayerNormalization(axis=norm_shape)",
        "LayerNormalization(axis=norm_shape)",
        {"params": {"epsilon": 1e-6}},
    ),
    # positional layers that take an input, and the halves layout
    "add_positional_encoding: sin and cos swapped": (
        "add_positional_encoding-textbook",
        "np.sin(phase), np.cos(phase)",
        "np.cos(phase), np.sin(phase)",
        {},
    ),
    "add_positional_encoding: exponent i/d instead of 2i/d": (
        "add_positional_encoding-textbook",
        "np.arange(0, num_hiddens, 2)",
        "np.arange(0, num_hiddens // 2)",
        {},
    ),
    "add_positional_encoding: positions start at one": (
        "add_positional_encoding-textbook",
        "self.P[:, : X.shape[1], :]",
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
        "np.hstack([np.sin(phase), np.cos(phase)])",
        "np.stack([np.sin(phase), np.cos(phase)], axis=-1).reshape(length, -1)",
        {},
    ),
    "positional_encoding: halves with cosines first": (
        "positional_encoding-halves",
        "[np.sin(phase), np.cos(phase)]",
        "[np.cos(phase), np.sin(phase)]",
        {},
    ),
    "positional_encoding: halves whose rates use the whole depth": (
        "positional_encoding-halves",
        "-np.arange(half) / half",
        "-np.arange(half) / depth",
        {},
    ),
    "sinusoidal_embedding: embedding not scaled": (
        "sinusoidal_embedding-tutorial",
        "self.embedding(x) * scale",
        "self.embedding(x)",
        {},
    ),
    "sinusoidal_embedding: scaled by d_model": (
        "sinusoidal_embedding-tutorial",
        "scale = tf.math.sqrt(tf.cast(self.d_model, tf.float32))",
        "scale = tf.cast(self.d_model, tf.float32)",
        {},
    ),
    "sinusoidal_embedding: halves code, interleaved formula": (
        "sinusoidal_embedding-tutorial",
        "np.hstack([np.sin(phase), np.cos(phase)])",
        "np.hstack([np.sin(phase), np.cos(phase)])",
        {"params": {"layout": "interleaved"}},
    ),
    "sinusoidal_embedding: positions reversed": (
        "sinusoidal_embedding-tutorial",
        "self.pos_encoding[tf.newaxis, : tf.shape(x)[1], :]",
        "tf.reverse(self.pos_encoding[tf.newaxis, : tf.shape(x)[1], :], axis=[1])",
        {},
    ),
    "learned_embedding: positions looked up in the token table": (
        "learned_embedding-keras-io",
        "self.pos_emb(where)",
        "self.token_emb(where)",
        {},
    ),
    "learned_embedding: positions reversed": (
        "learned_embedding-keras-io",
        "tf.range(tf.shape(ids)[-1])",
        "tf.reverse(tf.range(tf.shape(ids)[-1]), axis=[0])",
        {},
    ),
    "learned_embedding: positions forgotten": (
        "learned_embedding-keras-io",
        "return self.token_emb(ids) + self.pos_emb(where)",
        "return self.token_emb(ids)",
        {},
    ),
    "learned_embedding: scaled by the root of the width": (
        "learned_embedding-keras-io",
        "self.token_emb(ids) + ",
        "self.token_emb(ids) * tf.math.sqrt(float(self.token_emb.output_dim)) + ",
        {},
    ),
}
