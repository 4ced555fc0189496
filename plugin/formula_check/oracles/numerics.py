"""The math every builtin oracle shares: a stable softmax, scaled dot-product attention,
layer normalisation, the ReLU feed-forward network and the sinusoidal encoding, in float64 or
in whatever precision they are given (float32 for the rounding sample)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from formula_check.lazy import numpy as np  # imported on first use
from formula_check.model import Array
from formula_check.oracles.tolerance import DRAW_PARAM

MASKED_LOGIT = -1e9
"""The logit a masked-out position gets, as in the TensorFlow tutorial code."""


def softmax(x: Array, axis: int = -1, *, through_logsumexp: bool = False) -> Array:
    """Numerically stable softmax: the max is subtracted before exponentiating, or (as code
    also writes it) the log of the sum of exponentials is."""
    top = np.max(x, axis=axis, keepdims=True)
    if through_logsumexp:
        total = top + np.log(np.sum(np.exp(x - top), axis=axis, keepdims=True))
        logs: Array = np.exp(x - total)
        return logs
    exps = np.exp(x - top)
    result: Array = exps / np.sum(exps, axis=axis, keepdims=True)
    return result


def second_way(params: Mapping[str, Any]) -> bool:
    """Whether this rounding draw computes the formula its second usual way."""
    return int(params.get(DRAW_PARAM, 0)) % 2 == 1


def scaled_dot_product(
    q: Array, k: Array, v: Array, keep: Array | None, *, through_logsumexp: bool = False
) -> tuple[Array, Array]:
    """``softmax(q k^T / sqrt(d_k)) v`` over any leading batch axes; returns (output, weights)."""
    logits = q @ np.swapaxes(k, -1, -2) / math.sqrt(q.shape[-1])
    if keep is not None:
        # Replace rather than add: in float32, -1e9 + logit rounds to -1e9 exactly, so TF
        # turns a fully masked row uniform; in float64 an addition would keep the logits'
        # differences and disagree with every TF implementation on such rows.
        logits = np.where(keep, logits, MASKED_LOGIT)
    weights = softmax(logits, through_logsumexp=through_logsumexp)
    return weights @ v, weights


def layer_norm(x: Array, gamma: Array, beta: Array, epsilon: float) -> Array:
    """Normalise over the last axis with the biased variance, then scale and shift."""
    mean = np.mean(x, axis=-1, keepdims=True)
    variance = np.var(x, axis=-1, keepdims=True)  # biased (ddof=0), as in Keras
    result: Array = gamma * (x - mean) / np.sqrt(variance + epsilon) + beta
    return result


def relu_ffn(x: Array, w1: Array, b1: Array, w2: Array, b2: Array) -> tuple[Array, Array]:
    """``max(0, x W1 + b1) W2 + b2``; returns (output, hidden)."""
    hidden = np.maximum(0.0, x @ w1 + b1)
    return hidden @ w2 + b2, hidden


def positional_encoding(
    n: int,
    d_model: int,
    base: float = 10000.0,
    dtype: type[np.floating[Any]] | None = None,
    *,
    through_exp: bool = False,
    layout: str = "interleaved",
) -> Array:
    """Sinusoidal encoding computed in ``dtype``: sines in even columns and cosines in odd
    ones (``interleaved``, the paper's), or every sine first and every cosine after
    (``halves``, the TensorFlow tutorial's); the frequencies as powers of ``base``, or (as
    code also writes them) through ``exp`` of a log. ``dtype`` None: float64."""
    if dtype is None:
        dtype = np.float64
    positions = np.arange(n, dtype=dtype)[:, np.newaxis]
    two_i = np.arange(0, d_model, 2, dtype=dtype)[np.newaxis, :]
    if through_exp:
        angles = positions * np.exp(two_i * dtype(-math.log(base) / d_model))
    else:
        angles = positions / np.power(dtype(base), two_i / dtype(d_model))
    if layout == "halves":
        halves: Array = np.concatenate([np.sin(angles), np.cos(angles)], axis=-1)
        return halves
    encoding = np.empty((n, d_model), dtype=dtype)
    encoding[:, 0::2] = np.sin(angles)
    encoding[:, 1::2] = np.cos(angles)
    return encoding
