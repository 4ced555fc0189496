"""Layer oracles: the feed-forward network, softmax, layer normalisation, a linear
projection, and the residual feed-forward sublayer."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from formula_check.errors import OracleError
from formula_check.model import Array
from formula_check.oracles.base import Oracle, scaled
from formula_check.oracles.numerics import layer_norm, relu_ffn, second_way, softmax
from formula_check.oracles.regimes import LARGE_VALUES, NEAR_EPSILON, WIDE_OFFSET, WIDE_WEIGHTS
from formula_check.oracles.tensors import X, choice, given, positive_sizes, tensor

# ffn ----------------------------------------------------------------------------------------

FFN_WEIGHTS = (
    tensor("W_1", "d_model d_ff"),
    tensor("b_1", "d_ff"),
    tensor("W_2", "d_ff d_model"),
    tensor("b_2", "d_model"),
)


def _ffn(arrays: Mapping[str, Array], params: Mapping[str, Any]) -> dict[str, Array]:
    output, hidden = relu_ffn(given(arrays, X), *(given(arrays, s) for s in FFN_WEIGHTS))
    return {"output": output, "hidden": hidden}


FFN = Oracle(
    name="ffn",
    title="Position-wise feed-forward network",
    summary="Two linear maps with a ReLU between them, applied to every position alike.",
    latex=r"\text{FFN}(x) = \max(0, xW_1 + b_1)W_2 + b_2",
    compute=_ffn,
    inputs=(X,),
    outputs=(tensor("output", "b n d_model"),),
    weights=FFN_WEIGHTS,
    dims={"b": 2, "n": 5, "d_model": 6, "d_ff": 9},
    heatmaps=("hidden",),
    derive=positive_sizes,
)


# softmax ------------------------------------------------------------------------------------

SOFTMAX_X = tensor("x", "b n m")


def _softmax(arrays: Mapping[str, Array], params: Mapping[str, Any]) -> dict[str, Array]:
    axis = int(params.get("axis", -1))
    return {"output": softmax(given(arrays, SOFTMAX_X), axis, through_logsumexp=second_way(params))}


def _derive_softmax(sizes: dict[str, int], params: Mapping[str, Any]) -> dict[str, int]:
    axis = params.get("axis", -1)
    if isinstance(axis, bool) or not isinstance(axis, int) or not -3 <= axis < 3:
        raise OracleError(f"param axis must be an integer in [-3, 2] for x (b, n, m), got {axis!r}")
    return positive_sizes(sizes, params)


SOFTMAX = Oracle(
    name="softmax",
    title="Softmax",
    summary="Exponentiates and normalises so that each slice along the axis sums to one.",
    latex=r"\text{softmax}(x)_i = \frac{e^{x_i}}{\sum_j e^{x_j}}",
    compute=_softmax,
    inputs=(SOFTMAX_X,),
    outputs=(tensor("output", "b n m"),),
    dims={"b": 2, "n": 5, "m": 7},
    params={"axis": -1},
    derive=_derive_softmax,
    regimes=(LARGE_VALUES,),
)


# layer_norm ---------------------------------------------------------------------------------

LN_WEIGHTS = (
    tensor("gamma", "d_model", "gain", default=1.0),
    tensor("beta", "d_model", "shift", default=0.0),
)


def _layer_norm(arrays: Mapping[str, Array], params: Mapping[str, Any]) -> dict[str, Array]:
    gamma, beta = (given(arrays, s) for s in LN_WEIGHTS)
    epsilon = float(params.get("epsilon", 1e-6))
    return {"output": layer_norm(given(arrays, X), gamma, beta, epsilon)}


LAYER_NORM = Oracle(
    name="layer_norm",
    title="Layer normalisation",
    summary="Normalises each position's features to zero mean and unit variance, then "
    "scales by gamma and shifts by beta.",
    latex=r"\text{LayerNorm}(x) = \gamma \odot \frac{x - \mu}{\sqrt{\sigma^2 + \epsilon}}"
    r" + \beta",
    compute=_layer_norm,
    inputs=(X,),
    outputs=(tensor("output", "b n d_model"),),
    weights=LN_WEIGHTS,
    dims={"b": 2, "n": 5, "d_model": 6},
    params={"epsilon": 1e-6},
    derive=positive_sizes,
    regimes=(WIDE_OFFSET, NEAR_EPSILON),
)


# linear -------------------------------------------------------------------------------------

LINEAR_W = tensor("W", "d_model d_k", "projection")


def _linear(arrays: Mapping[str, Array], params: Mapping[str, Any]) -> dict[str, Array]:
    return {"output": given(arrays, X) @ given(arrays, LINEAR_W)}


LINEAR = Oracle(
    name="linear",
    title="Linear projection (no bias)",
    summary="Projects every position with one matrix and no bias, as in Q = XW_Q.",
    latex=r"Q = XW_Q",
    compute=_linear,
    inputs=(X,),
    outputs=(tensor("output", "b n d_k"),),
    weights=(LINEAR_W,),
    dims={"b": 2, "n": 5, "d_model": 6, "d_k": 4},
    derive=positive_sizes,
)


# sublayer -----------------------------------------------------------------------------------

NORM_PLACEMENTS = ("post", "pre")


def _sublayer(arrays: Mapping[str, Array], params: Mapping[str, Any]) -> dict[str, Array]:
    x = given(arrays, X)
    ffn_weights = [given(arrays, s) for s in FFN_WEIGHTS]
    gamma, beta = (given(arrays, s) for s in LN_WEIGHTS)
    epsilon = float(params.get("epsilon", 1e-6))
    if choice(params, "norm", NORM_PLACEMENTS) == "post":
        sub, hidden = relu_ffn(x, *ffn_weights)
        return {"output": layer_norm(x + sub, gamma, beta, epsilon), "hidden": hidden}
    sub, hidden = relu_ffn(layer_norm(x, gamma, beta, epsilon), *ffn_weights)
    return {"output": x + sub, "hidden": hidden}


def _derive_sublayer(sizes: dict[str, int], params: Mapping[str, Any]) -> dict[str, int]:
    choice(params, "norm", NORM_PLACEMENTS)
    return positive_sizes(sizes, params)


SUBLAYER = Oracle(
    name="sublayer",
    title="Residual sublayer with layer normalisation",
    summary="Wraps a feed-forward sublayer in a residual connection, normalising after "
    "the sum (post-LN) or before the sublayer (pre-LN).",
    latex=r"\text{LayerNorm}(x + \text{Sublayer}(x))",
    compute=_sublayer,
    inputs=(X,),
    outputs=(tensor("output", "b n d_model"),),
    weights=(*FFN_WEIGHTS, *LN_WEIGHTS),
    dims={"b": 2, "n": 5, "d_model": 6, "d_ff": 9},
    params={"norm": "post", "epsilon": 1e-6},
    heatmaps=("hidden",),
    derive=_derive_sublayer,
    regimes=(scaled(10.0), NEAR_EPSILON, WIDE_WEIGHTS),
)
