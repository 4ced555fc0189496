"""Additive attention (Bahdanau's): each (query, key) pair is scored by a small network with
one tanh hidden layer, and the scores go through a masked softmax over the keys."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from formula_check.lazy import numpy as np  # imported on first use
from formula_check.model import Array
from formula_check.oracles.base import Oracle, Regime
from formula_check.oracles.numerics import MASKED_LOGIT, second_way, softmax
from formula_check.oracles.regimes import LOGIT_SCALE, large_logits
from formula_check.oracles.tensors import given, keep_mask, positive_sizes, tensor

Q, K, V = tensor("q", "b n d_q", "queries"), tensor("k", "b m d_k", "keys"), tensor("v", "b m d_v")
ADDITIVE_WEIGHTS = (
    tensor("W_q", "d_q h", "query projection"),
    tensor("W_k", "d_k h", "key projection"),
    tensor("w_v", "h 1", "scoring vector"),
)
"""Bias-free, as the formula: Keras kernels (``Dense(h, use_bias=False)``), so the code's
``q @ W_q`` is the column-vector formula's ``W_q q`` with ``W_q`` transposed. A scoring vector
kept as ``(h,)`` reads as ``(h, 1)``."""


def additive_scores(q: Array, k: Array, W_q: Array, W_k: Array, w_v: Array) -> Array:
    """``w_v^T tanh(W_q q_i + W_k k_j)`` for every query ``i`` and key ``j``: ``(..., n, m)``.
    Each pair's hidden features are a sum, so the projections are broadcast, not repeated."""
    hidden = np.tanh((q @ W_q)[..., :, np.newaxis, :] + (k @ W_k)[..., np.newaxis, :, :])
    scores: Array = hidden @ w_v.reshape(-1)
    return scores


def _additive(arrays: Mapping[str, Array], params: Mapping[str, Any]) -> dict[str, Array]:
    W_q, W_k, w_v = (given(arrays, spec) for spec in ADDITIVE_WEIGHTS)
    scores = additive_scores(given(arrays, Q), given(arrays, K), W_q, W_k, w_v)
    keep = keep_mask(arrays)
    if keep is not None:
        # replaced, not added: as the attention oracle does, for the same float32 reason
        scores = np.where(keep, scores, MASKED_LOGIT)
    weights = softmax(scores, through_logsumexp=second_way(params))
    return {"output": weights @ given(arrays, V), "weights": weights}


SATURATED_TANH = replace(
    large_logits(("q", "k"), LOGIT_SCALE),
    name="saturated tanh",
    says=f"q, k × {LOGIT_SCALE:g}: most hidden features sit where tanh is nearly ±1",
)
"""Queries and keys eight times wider: most hidden features are past ±2, where tanh is flat
and code that approximates it, clips it or puts another squashing function in its place
gives other scores."""

LARGE_SCORES = Regime(
    "large scores",
    "every weight × 8: tanh saturates and scores reach about ±20, a nearly one-hot softmax",
    weight_scale=8.0,
)
"""Inputs alone cannot widen the scores: each is at most ``‖w_v‖₁``, whatever the queries.
The weights can: eight times ``w_v`` and the projections makes the softmax nearly one-hot,
as in a trained model, where a softmax over the wrong axis or a weak mask constant shows."""


ADDITIVE_ATTENTION = Oracle(
    name="additive_attention",
    title="Additive attention",
    summary="Each query scores every key with a one-hidden-layer tanh network, w_v^T "
    "tanh(W_q q + W_k k), and takes a softmax-weighted average of the values.",
    latex=r"e_{ij} = \sum_l (w_v)_l \tanh\left(\sum_r Q_{ir} (W_q)_{rl} + \sum_s K_{js} (W_k)_{sl}"
    r"\right), \quad \text{output} = \text{softmax}(e + M)V",
    compute=_additive,
    inputs=(Q, K, V),
    outputs=(tensor("output", "b n d_v"), tensor("weights", "b n m")),
    weights=ADDITIVE_WEIGHTS,
    dims={"b": 2, "n": 5, "m": 7, "d_q": 6, "d_k": 3, "d_v": 4, "h": 8},
    heatmaps=("weights",),
    mask_dims=("b", "n", "m"),
    derive=positive_sizes,
    regimes=(SATURATED_TANH, LARGE_SCORES),
)
