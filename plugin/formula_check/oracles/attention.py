"""Attention oracles: scaled dot-product attention, multi-head attention and single-head
self-attention."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from formula_check.errors import OracleError
from formula_check.lazy import numpy as np  # imported on first use
from formula_check.model import Array
from formula_check.oracles.base import Oracle
from formula_check.oracles.numerics import scaled_dot_product, second_way
from formula_check.oracles.regimes import (
    LOGIT_SCALE,
    MASKED_KEYS,
    PROJECTED_LOGIT_SCALE,
    large_logits,
)
from formula_check.oracles.tensors import X, choice, given, keep_mask, positive_sizes, tensor

# attention ----------------------------------------------------------------------------------

Q, K, V = tensor("q", "b n d_k", "queries"), tensor("k", "b m d_k", "keys"), tensor("v", "b m d_v")


def _attention(arrays: Mapping[str, Array], params: Mapping[str, Any]) -> dict[str, Array]:
    output, weights = scaled_dot_product(
        given(arrays, Q),
        given(arrays, K),
        given(arrays, V),
        keep_mask(arrays),
        through_logsumexp=second_way(params),
    )
    return {"output": output, "weights": weights}


ATTENTION = Oracle(
    name="attention",
    title="Scaled dot-product attention",
    summary="Each query takes a softmax-weighted average of the values, weighted by its "
    "scaled dot products with the keys.",
    latex=r"\text{Attention}(Q, K, V) = \text{softmax}\left(\frac{QK^T}{\sqrt{d_k}} + M\right)V",
    compute=_attention,
    inputs=(Q, K, V),
    outputs=(tensor("output", "b n d_v"), tensor("weights", "b n m")),
    dims={"b": 2, "n": 5, "m": 7, "d_k": 6, "d_v": 4},
    heatmaps=("weights",),
    mask_dims=("b", "n", "m"),
    derive=positive_sizes,
    regimes=(large_logits(("q", "k"), LOGIT_SCALE), MASKED_KEYS),
)


# multihead ----------------------------------------------------------------------------------

MH_INPUTS = (tensor("q", "b n d_model"), tensor("k", "b m d_model"), tensor("v", "b m d_model"))
HEADS_QK, HEADS_V = "h*depth", "h*depth_v"
"""The concatenated widths of the heads: ``h`` heads of ``depth`` (queries and keys, Keras'
``key_dim``) and of ``depth_v`` (values, Keras' ``value_dim``). Both are ``d_model`` when the
head width is ``d_model / h``, as in the paper; never stated, always derived."""
MH_WEIGHTS = (
    tensor("W_q", f"d_model {HEADS_QK}", "q projection"),
    tensor("b_q", HEADS_QK, "q projection bias", default=0.0),
    tensor("W_k", f"d_model {HEADS_QK}", "k projection"),
    tensor("b_k", HEADS_QK, "k projection bias", default=0.0),
    tensor("W_v", f"d_model {HEADS_V}", "v projection"),
    tensor("b_v", HEADS_V, "v projection bias", default=0.0),
    tensor("W_o", f"{HEADS_V} d_model", "o projection"),
    tensor("b_o", "d_model", "o projection bias", default=0.0),
)
MH_VARIANTS = ("cross", "self", "causal")
"""``cross``: queries attend to another sequence; ``self``: one sequence is the queries, keys
and values; ``causal``: self-attention where each position sees itself and earlier ones only
(Keras' ``use_causal_mask=True``), and the block's own mask, if any, as well."""


def _split_heads(x: Array, h: int) -> Array:
    """(b, n, h * depth) -> (b, h, n, depth), as the paper: reshape, then move heads forward."""
    b, n, width = x.shape
    if width % h:
        raise OracleError(f"the projections' width ({width}) must be divisible by h ({h})")
    heads: Array = x.reshape(b, n, h, width // h).transpose(0, 2, 1, 3)
    return heads


def _merge_heads(x: Array) -> Array:
    """(b, h, n, depth) -> (b, n, h * depth): the concatenation of the heads."""
    b, h, n, depth = x.shape
    merged: Array = x.transpose(0, 2, 1, 3).reshape(b, n, h * depth)
    return merged


def causal_keep(n: int, m: int) -> Array:
    """``(n, m)``: True where query ``i`` may see key ``j <= i`` (the last keys aligned with
    the last queries when ``m > n``, as Keras aligns them)."""
    kept: Array = np.tril(np.ones((n, m), dtype=bool), k=max(0, m - n))
    return kept


def _multihead(arrays: Mapping[str, Array], params: Mapping[str, Any]) -> dict[str, Array]:
    h = int(params["h"])
    W_q, b_q, W_k, b_k, W_v, b_v, W_o, b_o = (given(arrays, s) for s in MH_WEIGHTS)
    q, k, v = (given(arrays, s) for s in MH_INPUTS)
    keep = keep_mask(arrays)
    if choice(params, "variant", MH_VARIANTS) == "causal":
        causal = causal_keep(q.shape[1], k.shape[1])
        keep = causal[np.newaxis] if keep is None else keep & causal
    if keep is not None and keep.ndim == 3:
        keep = keep[:, np.newaxis]  # one mask for every head
    heads, weights = scaled_dot_product(
        _split_heads(q @ W_q + b_q, h),
        _split_heads(k @ W_k + b_k, h),
        _split_heads(v @ W_v + b_v, h),
        keep,
        through_logsumexp=second_way(params),
    )
    return {"output": _merge_heads(heads) @ W_o + b_o, "weights": weights}


def head_widths(sizes: dict[str, int]) -> dict[str, int]:
    """``depth`` as stated, or ``d_model / h``; ``depth_v`` as stated, or ``depth``; and the
    concatenated widths ``h*depth`` and ``h*depth_v``. A stated width is used as written,
    whatever ``d_model`` is (Keras' ``key_dim=d_model``)."""
    d_model, h = sizes["d_model"], sizes["h"]
    if "depth" not in sizes:
        if d_model % h:
            raise OracleError(
                f"d_model ({d_model}) must be divisible by h ({h}), or the head width "
                'stated (dims="depth=…")'
            )
        sizes["depth"] = d_model // h
    sizes.setdefault("depth_v", sizes["depth"])
    for whole, part in ((HEADS_QK, "depth"), (HEADS_V, "depth_v")):
        width = h * sizes[part]
        if sizes.setdefault(whole, width) != width:
            raise OracleError(f"{whole} is h × {part} ({width}), not {sizes[whole]}: state {part}")
    return sizes


def _derive_multihead(sizes: dict[str, int], params: Mapping[str, Any]) -> dict[str, int]:
    sizes = head_widths(positive_sizes(sizes, params))
    if choice(params, "variant", MH_VARIANTS) != "cross":
        sizes["m"] = sizes["n"]  # self-attention: keys and values are the queries
    return sizes


def _generate_multihead(
    sizes: Mapping[str, int], rng: np.random.Generator, params: Mapping[str, Any]
) -> dict[str, Array]:
    if choice(params, "variant", MH_VARIANTS) != "cross":
        x = rng.standard_normal((sizes["b"], sizes["n"], sizes["d_model"]))
        return {"q": x, "k": x, "v": x}
    return {spec.name: rng.standard_normal(spec.shape(sizes)) for spec in MH_INPUTS}


MULTIHEAD = Oracle(
    name="multihead",
    title="Multi-head attention",
    summary="Projects queries, keys and values, attends in h heads of width depth "
    "(d_model/h unless stated), concatenates the heads and projects the result.",
    latex=r"\text{MultiHead}(Q, K, V) = \text{Concat}(\text{head}_1, \dots, \text{head}_h)W^O,"
    r" \quad \text{head}_i = \text{Attention}(QW_i^Q, KW_i^K, VW_i^V)",
    compute=_multihead,
    inputs=MH_INPUTS,
    outputs=(tensor("output", "b n d_model"), tensor("weights", "b h n m")),
    weights=MH_WEIGHTS,
    dims={
        "b": 2,
        "n": 5,
        "m": 7,
        "d_model": 12,
        "h": 3,
        "depth": 4,
        "depth_v": 4,
        HEADS_QK: 12,
        HEADS_V: 12,
    },
    derived_dims=("depth", "depth_v", HEADS_QK, HEADS_V),
    params={"variant": "cross"},
    heatmaps=("weights",),
    mask_dims=("b", "1", "n", "m"),
    derive=_derive_multihead,
    generate=_generate_multihead,
    regimes=(large_logits(("q", "k"), PROJECTED_LOGIT_SCALE),),
)


# self_attention -----------------------------------------------------------------------------

SA_WEIGHTS = (
    tensor("W_q", "d_model d_k"),
    tensor("b_q", "d_k", default=0.0),
    tensor("W_k", "d_model d_k"),
    tensor("b_k", "d_k", default=0.0),
    tensor("W_v", "d_model d_v"),
    tensor("b_v", "d_v", default=0.0),
    tensor("W_o", "d_v d_model"),
    tensor("b_o", "d_model", default=0.0),
)


def _self_attention(arrays: Mapping[str, Array], params: Mapping[str, Any]) -> dict[str, Array]:
    W_q, b_q, W_k, b_k, W_v, b_v, W_o, b_o = (given(arrays, s) for s in SA_WEIGHTS)
    x = given(arrays, X)
    heads, weights = scaled_dot_product(
        x @ W_q + b_q,
        x @ W_k + b_k,
        x @ W_v + b_v,
        keep_mask(arrays),
        through_logsumexp=second_way(params),
    )
    return {"output": heads @ W_o + b_o, "weights": weights}


SELF_ATTENTION = Oracle(
    name="self_attention",
    title="Single-head self-attention",
    summary="One sequence attends to itself through query, key and value projections, "
    "followed by an output projection.",
    latex=r"\text{SelfAttention}(X) = \text{softmax}\left(\frac{(XW_Q)(XW_K)^T}{\sqrt{d_k}}"
    r"\right)(XW_V)W_O",
    compute=_self_attention,
    inputs=(X,),
    outputs=(tensor("output", "b n d_model"), tensor("weights", "b n n")),
    weights=SA_WEIGHTS,
    dims={"b": 2, "n": 5, "d_model": 8, "d_k": 6, "d_v": 4},
    heatmaps=("weights",),
    mask_dims=("b", "n", "n"),
    derive=positive_sizes,
    regimes=(large_logits(("x",), PROJECTED_LOGIT_SCALE),),
)
