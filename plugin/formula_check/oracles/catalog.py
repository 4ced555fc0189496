"""The builtin oracles: float64 NumPy references of the Transformer's formulas.

:data:`BUILTINS` lists them for the registry, which adds them on first use. Sizes are read
off the arrays wherever the math allows, so a layer's real weights go through the same code as
generated ones.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np

from ..errors import OracleError
from ..model import Array
from ..tolerance import DRAW_PARAM, DTYPE_PARAM
from .base import KEEP_PARAM, Oracle, Regime, TensorSpec, scaled

MASKED_LOGIT = -1e9
"""The logit a masked-out position gets, as in the TensorFlow tutorial code."""


# Shared math --------------------------------------------------------------------------------


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


def _second_way(params: Mapping[str, Any]) -> bool:
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
    dtype: type[np.floating[Any]] = np.float64,
    *,
    through_exp: bool = False,
) -> Array:
    """Sinusoidal encoding, sines in even columns and cosines in odd ones (interleaved),
    computed in ``dtype``; the frequencies as powers of ``base``, or (as code also writes
    them) through ``exp`` of a log."""
    positions = np.arange(n, dtype=dtype)[:, np.newaxis]
    two_i = np.arange(0, d_model, 2, dtype=dtype)[np.newaxis, :]
    if through_exp:
        angles = positions * np.exp(two_i * dtype(-math.log(base) / d_model))
    else:
        angles = positions / np.power(dtype(base), two_i / dtype(d_model))
    encoding = np.empty((n, d_model), dtype=dtype)
    encoding[:, 0::2] = np.sin(angles)
    encoding[:, 1::2] = np.cos(angles)
    return encoding


# Input regimes ------------------------------------------------------------------------------

LOGIT_SCALE = 8.0
"""Queries and keys grow by this in the attention oracle's large-logits regime, so logits of
about ±1 become about ±64 and the softmax is nearly one-hot, as in a trained model (its weak
mask constants are the masked-keys regime's to show)."""

PROJECTED_LOGIT_SCALE = 16.0
"""The same for layers whose queries and keys go through their own projections, the one way
to reach their logits: about ±256, so that across the rows and heads of a block some masked
key outscores its row's kept ones by more than 100, and a constant of -100 instead of -1e9
lets it take visible weight."""


def _large_logits(names: tuple[str, ...], scale: float) -> Regime:
    def inputs(
        standard: Mapping[str, Array],
        sizes: Mapping[str, int],
        rng: np.random.Generator,
        params: Mapping[str, Any],
    ) -> dict[str, Array]:
        # self-attention's one sequence is its queries, keys and values alike
        every = params.get("variant") == "self"
        return {
            key: value * scale if every or key in names else value
            for key, value in standard.items()
        }

    says = f"{', '.join(names)} × {scale:g}: logits of about ±{round(scale * scale)}"
    return Regime("large logits", says, inputs)


MASKED_SCORE = 100.0
"""In the masked-keys regime, the logit a key gains from being masked for every query (and
loses from being masked for none): a masked key then outscores the row's kept ones by up to
about 200, and a key no query may skip sits near -100. So code whose mask constant is weak
lets masked keys take weight whether it adds the constant (``scores - 100 * mask``) or puts
it in their place (``tf.where(keep, scores, -100.0)``). Logits stay within about ±110: code
that exponentiates them without subtracting the row's maximum overflows here, as it would
on a trained model's logits."""


def _masked_keys_score_high(
    standard: Mapping[str, Array],
    sizes: Mapping[str, int],
    rng: np.random.Generator,
    params: Mapping[str, Any],
) -> dict[str, Array] | None:
    """Queries and keys that share one direction, along which a key lies as far as the
    share of queries that must not see it: the keys a mask hides are those the queries like
    best. Needs a mask (in ``params``); for the ``attention`` oracle's raw q and k."""
    keep = params.get(KEEP_PARAM)
    if keep is None or "q" not in standard or "k" not in standard:
        return None
    q, k = standard["q"], standard["k"]
    hidden = 2.0 * np.mean(~np.asarray(keep, dtype=bool), axis=1) - 1.0  # (b, m) in [-1, 1]
    drawn = rng.standard_normal(q.shape[-1])
    direction = drawn / float(np.linalg.norm(drawn))
    reach = math.sqrt(MASKED_SCORE * math.sqrt(q.shape[-1]))
    return {
        **standard,
        "q": q + reach * direction,
        "k": k + reach * hidden[..., np.newaxis] * direction,
    }


MASKED_KEYS = Regime(
    "masked keys score high",
    f"the keys a mask hides score up to {2 * MASKED_SCORE:g} above the kept ones",
    _masked_keys_score_high,
)


def _near_epsilon(
    standard: Mapping[str, Array],
    sizes: Mapping[str, int],
    rng: np.random.Generator,
    params: Mapping[str, Any],
) -> dict[str, Array]:
    """Rows whose variance is between ε/4 and 4ε, where ε decides the result."""
    epsilon = float(params.get("epsilon", 1e-6))
    result = {}
    for key, value in standard.items():
        spread = rng.uniform(0.5, 2.0, size=(*value.shape[:-1], 1))
        result[key] = math.sqrt(epsilon) * spread * rng.standard_normal(value.shape)
    return result


NEAR_EPSILON = Regime("variance near ε", "rows whose variance is ε/4 to 4ε", _near_epsilon)
WIDE_OFFSET = Regime(
    "wide",
    "inputs × 10, shifted by 3",
    lambda standard, sizes, rng, params: {k: 10 * v + 3 for k, v in standard.items()},
)


WIDE_WEIGHTS = Regime(
    "wide weights",
    "every weight × 8: a normalised sublayer input reaches the activation's far range",
    weight_scale=8.0,
)
"""Inputs alone cannot widen what a pre-norm sublayer's feed-forward network sees: the norm
brings every row back to unit variance. Its weights can: eight times the gains and kernels
puts pre-activations far past 6, where a ReLU6 or a clip differs from a ReLU."""


def _far_positions(sizes: Mapping[str, int]) -> dict[str, int]:
    return {**sizes, "n": max(int(sizes["n"]), FAR_POSITIONS)}


FAR_POSITIONS = 4096
"""Positions checked in the far regime: where float32 angles lose digits and code that
builds positions in a narrow type or wraps them shows. Past 2048 on purpose: float16 holds
every whole number up to 2048, so positions built in float16 (a mixed-precision layer's
``compute_dtype``) are exact until there."""
FAR = Regime("far positions", f"positions 0 to {FAR_POSITIONS - 1}", sizes=_far_positions)


# Reading arguments --------------------------------------------------------------------------


def _spec(
    name: str, dims: str, description: str = "", *, default: float | None = None
) -> TensorSpec:
    """A TensorSpec from ``"b n d_k"``; giving ``default`` makes the weight optional."""
    return TensorSpec(
        name,
        tuple(dims.split()),
        description,
        optional=default is not None,
        default=0.0 if default is None else default,
    )


def _get(arrays: Mapping[str, Array], spec: TensorSpec) -> Array:
    """The array for ``spec`` in the precision it was given (float64 for the reference,
    float32 for the rounding sample), or its default when an optional weight was left out."""
    if spec.name in arrays:
        value = np.asarray(arrays[spec.name])
        return value if value.dtype in (np.float32, np.float64) else value.astype(np.float64)
    if spec.optional:
        dtype = next((a.dtype for a in arrays.values() if a.dtype == np.float32), np.float64)
        return np.asarray(spec.default, dtype=dtype)
    raise OracleError(f"missing tensor {spec.name!r}")


def _keep(arrays: Mapping[str, Array]) -> Array | None:
    """The boolean keep mask (True = may attend), if the block asked for one."""
    mask = arrays.get("mask")
    return None if mask is None else np.asarray(mask, dtype=bool)


def _choice(params: Mapping[str, Any], name: str, allowed: tuple[str, ...]) -> str:
    value = params.get(name, allowed[0])
    if value not in allowed:
        options = ", ".join(repr(a) for a in allowed)
        raise OracleError(f"param {name} must be one of {options}, got {value!r}")
    return str(value)


def _positive_sizes(sizes: dict[str, int], params: Mapping[str, Any]) -> dict[str, int]:
    """Every dim must be a positive integer; the base of each oracle's ``derive``."""
    for name, size in sizes.items():
        if isinstance(size, bool) or not isinstance(size, int | np.integer) or size < 1:
            raise OracleError(f"dim {name} must be a positive integer, got {size!r}")
    return {name: int(size) for name, size in sizes.items()}


# attention ----------------------------------------------------------------------------------

Q, K, V = _spec("q", "b n d_k", "queries"), _spec("k", "b m d_k", "keys"), _spec("v", "b m d_v")


def _attention(arrays: Mapping[str, Array], params: Mapping[str, Any]) -> dict[str, Array]:
    output, weights = scaled_dot_product(
        _get(arrays, Q),
        _get(arrays, K),
        _get(arrays, V),
        _keep(arrays),
        through_logsumexp=_second_way(params),
    )
    return {"output": output, "weights": weights}


ATTENTION = Oracle(
    name="attention",
    title="Scaled dot-product attention",
    summary="Each query takes a softmax-weighted average of the values, weighted by its "
    "scaled dot products with the keys.",
    latex=r"\text{Attention}(Q, K, V) = \text{softmax}\left(\frac{QK^T}{\sqrt{d_k}}\right)V",
    compute=_attention,
    inputs=(Q, K, V),
    outputs=(_spec("output", "b n d_v"), _spec("weights", "b n m")),
    dims={"b": 2, "n": 5, "m": 7, "d_k": 6, "d_v": 4},
    heatmaps=("weights",),
    mask_dims=("b", "n", "m"),
    derive=_positive_sizes,
    regimes=(_large_logits(("q", "k"), LOGIT_SCALE), MASKED_KEYS),
)


# multihead ----------------------------------------------------------------------------------

MH_INPUTS = (_spec("q", "b n d_model"), _spec("k", "b m d_model"), _spec("v", "b m d_model"))
MH_WEIGHTS = tuple(
    spec
    for part in "qkvo"
    for spec in (
        _spec(f"W_{part}", "d_model d_model", f"{part} projection"),
        _spec(f"b_{part}", "d_model", f"{part} projection bias", default=0.0),
    )
)


def _split_heads(x: Array, h: int) -> Array:
    """(b, n, d_model) -> (b, h, n, depth), as the paper: reshape, then move heads forward."""
    b, n, d_model = x.shape
    if d_model % h:
        raise OracleError(f"d_model ({d_model}) must be divisible by h ({h})")
    heads: Array = x.reshape(b, n, h, d_model // h).transpose(0, 2, 1, 3)
    return heads


def _merge_heads(x: Array) -> Array:
    """(b, h, n, depth) -> (b, n, h * depth): the concatenation of the heads."""
    b, h, n, depth = x.shape
    merged: Array = x.transpose(0, 2, 1, 3).reshape(b, n, h * depth)
    return merged


def _multihead(arrays: Mapping[str, Array], params: Mapping[str, Any]) -> dict[str, Array]:
    h = int(params["h"])
    W_q, b_q, W_k, b_k, W_v, b_v, W_o, b_o = (_get(arrays, s) for s in MH_WEIGHTS)
    q, k, v = (_get(arrays, s) for s in MH_INPUTS)
    keep = _keep(arrays)
    if keep is not None and keep.ndim == 3:
        keep = keep[:, np.newaxis]  # one mask for every head
    heads, weights = scaled_dot_product(
        _split_heads(q @ W_q + b_q, h),
        _split_heads(k @ W_k + b_k, h),
        _split_heads(v @ W_v + b_v, h),
        keep,
        through_logsumexp=_second_way(params),
    )
    return {"output": _merge_heads(heads) @ W_o + b_o, "weights": weights}


def _derive_multihead(sizes: dict[str, int], params: Mapping[str, Any]) -> dict[str, int]:
    sizes = _positive_sizes(sizes, params)
    d_model, h = sizes["d_model"], sizes["h"]
    if d_model % h:
        raise OracleError(f"d_model ({d_model}) must be divisible by h ({h})")
    sizes["depth"] = d_model // h  # always derived: a default depth must not outvote d_model
    if _choice(params, "variant", ("cross", "self")) == "self":
        sizes["m"] = sizes["n"]  # self-attention: keys and values are the queries
    return sizes


def _generate_multihead(
    sizes: Mapping[str, int], rng: np.random.Generator, params: Mapping[str, Any]
) -> dict[str, Array]:
    if _choice(params, "variant", ("cross", "self")) == "self":
        x = rng.standard_normal((sizes["b"], sizes["n"], sizes["d_model"]))
        return {"q": x, "k": x, "v": x}
    return {spec.name: rng.standard_normal(spec.shape(sizes)) for spec in MH_INPUTS}


MULTIHEAD = Oracle(
    name="multihead",
    title="Multi-head attention",
    summary="Projects queries, keys and values, attends in h heads of size d_model/h, "
    "concatenates the heads and projects the result.",
    latex=r"\text{MultiHead}(Q, K, V) = \text{Concat}(\text{head}_1, \dots, \text{head}_h)W^O,"
    r" \quad \text{head}_i = \text{Attention}(QW_i^Q, KW_i^K, VW_i^V)",
    compute=_multihead,
    inputs=MH_INPUTS,
    outputs=(_spec("output", "b n d_model"), _spec("weights", "b h n m")),
    weights=MH_WEIGHTS,
    dims={"b": 2, "n": 5, "m": 7, "d_model": 12, "h": 3, "depth": 4},
    params={"variant": "cross"},
    heatmaps=("weights",),
    mask_dims=("b", "1", "n", "m"),
    derive=_derive_multihead,
    generate=_generate_multihead,
    regimes=(_large_logits(("q", "k"), PROJECTED_LOGIT_SCALE),),
)


# self_attention -----------------------------------------------------------------------------

X = _spec("x", "b n d_model")
SA_WEIGHTS = (
    _spec("W_q", "d_model d_k"),
    _spec("b_q", "d_k", default=0.0),
    _spec("W_k", "d_model d_k"),
    _spec("b_k", "d_k", default=0.0),
    _spec("W_v", "d_model d_v"),
    _spec("b_v", "d_v", default=0.0),
    _spec("W_o", "d_v d_model"),
    _spec("b_o", "d_model", default=0.0),
)


def _self_attention(arrays: Mapping[str, Array], params: Mapping[str, Any]) -> dict[str, Array]:
    W_q, b_q, W_k, b_k, W_v, b_v, W_o, b_o = (_get(arrays, s) for s in SA_WEIGHTS)
    x = _get(arrays, X)
    heads, weights = scaled_dot_product(
        x @ W_q + b_q,
        x @ W_k + b_k,
        x @ W_v + b_v,
        _keep(arrays),
        through_logsumexp=_second_way(params),
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
    outputs=(_spec("output", "b n d_model"), _spec("weights", "b n n")),
    weights=SA_WEIGHTS,
    dims={"b": 2, "n": 5, "d_model": 8, "d_k": 6, "d_v": 4},
    heatmaps=("weights",),
    mask_dims=("b", "n", "n"),
    derive=_positive_sizes,
    regimes=(_large_logits(("x",), PROJECTED_LOGIT_SCALE),),
)


# positional_encoding ------------------------------------------------------------------------


def _positional_encoding(
    arrays: Mapping[str, Array], params: Mapping[str, Any]
) -> dict[str, Array]:
    base = float(params.get("base", 10000.0))
    dtype = params.get(DTYPE_PARAM, np.float64)
    size = int(params["n"]), int(params["d_model"])
    return {"output": positional_encoding(*size, base, dtype, through_exp=_second_way(params))}


def _derive_positional(sizes: dict[str, int], params: Mapping[str, Any]) -> dict[str, int]:
    sizes = _positive_sizes(sizes, params)
    if sizes["d_model"] % 2:
        raise OracleError(f"d_model ({sizes['d_model']}) must be even: sin and cos alternate")
    base = params.get("base", 10000.0)
    if isinstance(base, bool) or not isinstance(base, int | float) or base <= 0:
        raise OracleError(f"param base must be a positive number, got {base!r}")
    return sizes


POSITIONAL_ENCODING = Oracle(
    name="positional_encoding",
    title="Sinusoidal positional encoding",
    summary="Each position gets sines and cosines of geometrically spaced frequencies, "
    "interleaved across the model dimension.",
    latex=r"PE_{(pos, 2i)} = \sin\left(\frac{pos}{10000^{2i/d_{\text{model}}}}\right), \quad "
    r"PE_{(pos, 2i+1)} = \cos\left(\frac{pos}{10000^{2i/d_{\text{model}}}}\right)",
    compute=_positional_encoding,
    inputs=(),
    outputs=(_spec("output", "n d_model"),),
    size_args=("n", "d_model"),
    dims={"n": 50, "d_model": 16},
    params={"base": 10000.0},
    heatmaps=("output",),
    derive=_derive_positional,
    regimes=(FAR,),
)


# ffn ----------------------------------------------------------------------------------------

FFN_WEIGHTS = (
    _spec("W_1", "d_model d_ff"),
    _spec("b_1", "d_ff"),
    _spec("W_2", "d_ff d_model"),
    _spec("b_2", "d_model"),
)


def _ffn(arrays: Mapping[str, Array], params: Mapping[str, Any]) -> dict[str, Array]:
    output, hidden = relu_ffn(_get(arrays, X), *(_get(arrays, s) for s in FFN_WEIGHTS))
    return {"output": output, "hidden": hidden}


FFN = Oracle(
    name="ffn",
    title="Position-wise feed-forward network",
    summary="Two linear maps with a ReLU between them, applied to every position alike.",
    latex=r"\text{FFN}(x) = \max(0, xW_1 + b_1)W_2 + b_2",
    compute=_ffn,
    inputs=(X,),
    outputs=(_spec("output", "b n d_model"),),
    weights=FFN_WEIGHTS,
    dims={"b": 2, "n": 5, "d_model": 6, "d_ff": 9},
    heatmaps=("hidden",),
    derive=_positive_sizes,
)


LARGE_VALUES = scaled(
    64.0,
    "inputs × 64: values of about ±150, where exp overflows float32 unless the largest is "
    "subtracted first",
    name="large values",
)
"""A softmax's own trap: logits as large as a trained model's. Code that exponentiates
without subtracting the row's maximum (or subtracts its minimum) overflows here."""


# softmax ------------------------------------------------------------------------------------

SOFTMAX_X = _spec("x", "b n m")


def _softmax(arrays: Mapping[str, Array], params: Mapping[str, Any]) -> dict[str, Array]:
    axis = int(params.get("axis", -1))
    return {"output": softmax(_get(arrays, SOFTMAX_X), axis, through_logsumexp=_second_way(params))}


def _derive_softmax(sizes: dict[str, int], params: Mapping[str, Any]) -> dict[str, int]:
    axis = params.get("axis", -1)
    if isinstance(axis, bool) or not isinstance(axis, int) or not -3 <= axis < 3:
        raise OracleError(f"param axis must be an integer in [-3, 2] for x (b, n, m), got {axis!r}")
    return _positive_sizes(sizes, params)


SOFTMAX = Oracle(
    name="softmax",
    title="Softmax",
    summary="Exponentiates and normalises so that each slice along the axis sums to one.",
    latex=r"\text{softmax}(x)_i = \frac{e^{x_i}}{\sum_j e^{x_j}}",
    compute=_softmax,
    inputs=(SOFTMAX_X,),
    outputs=(_spec("output", "b n m"),),
    dims={"b": 2, "n": 5, "m": 7},
    params={"axis": -1},
    derive=_derive_softmax,
    regimes=(LARGE_VALUES,),
)


# layer_norm ---------------------------------------------------------------------------------

LN_WEIGHTS = (
    _spec("gamma", "d_model", "gain", default=1.0),
    _spec("beta", "d_model", "shift", default=0.0),
)


def _layer_norm(arrays: Mapping[str, Array], params: Mapping[str, Any]) -> dict[str, Array]:
    gamma, beta = (_get(arrays, s) for s in LN_WEIGHTS)
    epsilon = float(params.get("epsilon", 1e-6))
    return {"output": layer_norm(_get(arrays, X), gamma, beta, epsilon)}


LAYER_NORM = Oracle(
    name="layer_norm",
    title="Layer normalisation",
    summary="Normalises each position's features to zero mean and unit variance, then "
    "scales by gamma and shifts by beta.",
    latex=r"\text{LayerNorm}(x) = \gamma \odot \frac{x - \mu}{\sqrt{\sigma^2 + \epsilon}}"
    r" + \beta",
    compute=_layer_norm,
    inputs=(X,),
    outputs=(_spec("output", "b n d_model"),),
    weights=LN_WEIGHTS,
    dims={"b": 2, "n": 5, "d_model": 6},
    params={"epsilon": 1e-6},
    derive=_positive_sizes,
    regimes=(WIDE_OFFSET, NEAR_EPSILON),
)


# linear -------------------------------------------------------------------------------------

LINEAR_W = _spec("W", "d_model d_k", "projection")


def _linear(arrays: Mapping[str, Array], params: Mapping[str, Any]) -> dict[str, Array]:
    return {"output": _get(arrays, X) @ _get(arrays, LINEAR_W)}


LINEAR = Oracle(
    name="linear",
    title="Linear projection (no bias)",
    summary="Projects every position with one matrix and no bias, as in Q = XW_Q.",
    latex=r"Q = XW_Q",
    compute=_linear,
    inputs=(X,),
    outputs=(_spec("output", "b n d_k"),),
    weights=(LINEAR_W,),
    dims={"b": 2, "n": 5, "d_model": 6, "d_k": 4},
    derive=_positive_sizes,
)


# sublayer -----------------------------------------------------------------------------------

NORM_PLACEMENTS = ("post", "pre")


def _sublayer(arrays: Mapping[str, Array], params: Mapping[str, Any]) -> dict[str, Array]:
    x = _get(arrays, X)
    ffn_weights = [_get(arrays, s) for s in FFN_WEIGHTS]
    gamma, beta = (_get(arrays, s) for s in LN_WEIGHTS)
    epsilon = float(params.get("epsilon", 1e-6))
    if _choice(params, "norm", NORM_PLACEMENTS) == "post":
        sub, hidden = relu_ffn(x, *ffn_weights)
        return {"output": layer_norm(x + sub, gamma, beta, epsilon), "hidden": hidden}
    sub, hidden = relu_ffn(layer_norm(x, gamma, beta, epsilon), *ffn_weights)
    return {"output": x + sub, "hidden": hidden}


def _derive_sublayer(sizes: dict[str, int], params: Mapping[str, Any]) -> dict[str, int]:
    _choice(params, "norm", NORM_PLACEMENTS)
    return _positive_sizes(sizes, params)


SUBLAYER = Oracle(
    name="sublayer",
    title="Residual sublayer with layer normalisation",
    summary="Wraps a feed-forward sublayer in a residual connection, normalising after "
    "the sum (post-LN) or before the sublayer (pre-LN).",
    latex=r"\text{LayerNorm}(x + \text{Sublayer}(x))",
    compute=_sublayer,
    inputs=(X,),
    outputs=(_spec("output", "b n d_model"),),
    weights=(*FFN_WEIGHTS, *LN_WEIGHTS),
    dims={"b": 2, "n": 5, "d_model": 6, "d_ff": 9},
    params={"norm": "post", "epsilon": 1e-6},
    heatmaps=("hidden",),
    derive=_derive_sublayer,
    regimes=(scaled(10.0), NEAR_EPSILON, WIDE_WEIGHTS),
)


BUILTINS: tuple[Oracle, ...] = (
    ATTENTION,
    MULTIHEAD,
    SELF_ATTENTION,
    POSITIONAL_ENCODING,
    FFN,
    SOFTMAX,
    LAYER_NORM,
    LINEAR,
    SUBLAYER,
)
"""Every builtin oracle, in the order :func:`.registry.all_oracles` lists them."""
