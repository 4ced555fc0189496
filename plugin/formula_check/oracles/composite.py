"""Composite oracles: the Transformer's sublayers and layers, composed of the builtin ones.

Each is a :func:`.compose.compose` of ``multihead``, ``ffn`` and ``layer_norm`` steps, so its
weights are theirs under a prefix (``attn.W_q``, ``ffn.W_1``, ``norm1.gamma``), a stated head
width (``depth``, Keras' ``key_dim``) is honoured as ``multihead`` honours it, and its
tolerance is measured on its parts' own float32 rounding.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from formula_check.lazy import numpy as np  # imported on first use
from formula_check.model import Array
from formula_check.oracles.attention import MULTIHEAD
from formula_check.oracles.base import WIDE, Regime, scaled
from formula_check.oracles.compose import PLACEMENTS, Add, Apply, Rename, Step, compose, residual
from formula_check.oracles.layers import FFN, LAYER_NORM
from formula_check.oracles.regimes import NEAR_EPSILON, PROJECTED_LOGIT_SCALE
from formula_check.oracles.tensors import X, choice, tensor

CONTEXT = tensor("context", "b m d_model", "the sequence attended to (an encoder's output)")
OUTPUT = tensor("output", "b n d_model")

ATTENTION_DIMS = {
    "b": 2,
    "n": 5,
    "d_model": 12,
    "h": 3,
    "depth": 4,
    "depth_v": 4,
    "h*depth": 12,
    "h*depth_v": 12,
}
"""The multi-head attention's default sizes; ``depth`` follows ``d_model / h`` unless stated."""

LARGE_LOGITS = scaled(
    PROJECTED_LOGIT_SCALE,
    f"inputs × {PROJECTED_LOGIT_SCALE:g}: logits of about ±256 in a post-LN layer, where a "
    "weak mask constant lets masked keys take weight",
    name="large logits",
)


def _pre_norm_only(
    standard: Mapping[str, Array],
    sizes: Mapping[str, int],
    rng: np.random.Generator,
    params: Mapping[str, Any],
) -> dict[str, Array] | None:
    """The standard inputs, for a pre-LN block only: a post-LN one's logits grow with its
    inputs already (:data:`LARGE_LOGITS`)."""
    return dict(standard) if _placement(params) == "pre" else None


LARGE_WEIGHTS = Regime(
    "large weights",
    "every weight × 4: logits of about ±256 where a norm comes first (pre-LN)",
    _pre_norm_only,
    weight_scale=4.0,
)
"""A pre-LN sublayer normalises its input before the attention sees it: only its weights
(gains and projections alike) can widen the logits."""

ATTENTION_REGIMES = (LARGE_LOGITS, LARGE_WEIGHTS)

LAYER_WEIGHTS = Regime(
    "large weights",
    "every weight × 4: feed-forward pre-activations far past 6, and logits of about ±256 "
    "where a norm comes first (pre-LN)",
    weight_scale=4.0,
)
"""A layer with a feed-forward network is checked where its ReLU sees values far past 6 (a
ReLU6 or a clip shows), whatever its norm's placement: its norm brings every row back to
unit variance, its gains and kernels times 4 take the pre-activations to about ±16. Four,
not the sublayer's eight: eight makes a post-LN layer's attention logits so wide that its
rounding grows past what four draws of it measure."""
LAYER_REGIMES = (LARGE_LOGITS, LAYER_WEIGHTS)

ATTENTION_VARIANTS = ("self", "causal")


def _self_reads(stream: str) -> dict[str, str]:
    return {"q": stream, "k": stream, "v": stream}


def _placement(params: Mapping[str, Any]) -> str:
    return choice(params, "norm", PLACEMENTS)


# attention_sublayer ----------------------------------------------------------------------------


def _attention_sublayer(params: Mapping[str, Any]) -> tuple[Step, ...]:
    variant = choice(params, "variant", ATTENTION_VARIANTS)
    return (
        *residual(
            MULTIHEAD,
            "attn",
            _self_reads("x"),
            norm="norm",
            placement=_placement(params),
            params={"variant": variant},
            masked=True,
            shows={"weights": "weights"},
        ),
        Rename("x", "output"),
    )


ATTENTION_SUBLAYER = compose(
    "attention_sublayer",
    "Self-attention sublayer",
    r"\text{LayerNorm}(x + \text{MultiHead}(x, x, x))",
    summary="Multi-head self-attention (or causal self-attention) wrapped in a residual "
    "connection and a layer normalisation, after the sum (post-LN) or before the attention "
    "(pre-LN).",
    layout=_attention_sublayer,
    inputs=(X,),
    outputs=(OUTPUT,),
    dims=ATTENTION_DIMS,
    params={"variant": "self", "norm": "post", "epsilon": 1e-6},
    heatmaps=("weights",),
    mask_dims=("b", "1", "n", "n"),
    regimes=ATTENTION_REGIMES,
)


# cross_attention_sublayer ----------------------------------------------------------------------


def _cross_attention_sublayer(params: Mapping[str, Any]) -> tuple[Step, ...]:
    return (
        *residual(
            MULTIHEAD,
            "attn",
            {"q": "x", "k": "context", "v": "context"},
            norm="norm",
            placement=_placement(params),
            params={"variant": "cross"},
            masked=True,
            shows={"weights": "weights"},
        ),
        Rename("x", "output"),
    )


CROSS_ATTENTION_SUBLAYER = compose(
    "cross_attention_sublayer",
    "Cross-attention sublayer",
    r"\text{LayerNorm}(x + \text{MultiHead}(x, c, c))",
    summary="Queries from x attend to a context sequence (an encoder's output), wrapped in a "
    "residual connection and a layer normalisation (post-LN or pre-LN).",
    layout=_cross_attention_sublayer,
    inputs=(X, CONTEXT),
    outputs=(OUTPUT,),
    dims={**ATTENTION_DIMS, "m": 7},
    params={"norm": "post", "epsilon": 1e-6},
    heatmaps=("weights",),
    mask_dims=("b", "1", "n", "m"),
    regimes=ATTENTION_REGIMES,
)


# add_norm --------------------------------------------------------------------------------------


def _add_norm(params: Mapping[str, Any]) -> tuple[Step, ...]:
    return (Add("x", "y", "sum"), Apply(LAYER_NORM, "", {"x": "sum"}, "output"))


ADD_NORM = compose(
    "add_norm",
    "Add and norm",
    r"\text{LayerNorm}(X + Y)",
    summary="Adds a sublayer's output to its input and normalises the sum: the residual "
    "connection of a post-LN Transformer, given both tensors.",
    layout=_add_norm,
    inputs=(X, tensor("y", "b n d_model", "the sublayer's output")),
    outputs=(OUTPUT,),
    dims={"b": 2, "n": 5, "d_model": 6},
    params={"epsilon": 1e-6},
    regimes=(WIDE, NEAR_EPSILON),
)


# encoder_layer ---------------------------------------------------------------------------------


def _encoder_layer(params: Mapping[str, Any]) -> tuple[Step, ...]:
    placement = _placement(params)
    return (
        *residual(
            MULTIHEAD,
            "attn",
            _self_reads("x"),
            norm="norm1",
            placement=placement,
            params={"variant": "self"},
            masked=True,
            shows={"weights": "weights"},
        ),
        *residual(
            FFN, "ffn", {"x": "x"}, norm="norm2", placement=placement, shows={"hidden": "hidden"}
        ),
        Rename("x", "output"),
    )


ENCODER_LAYER = compose(
    "encoder_layer",
    "Transformer encoder layer",
    r"y = \text{LayerNorm}(x + \text{MultiHead}(x, x, x)), \quad "
    r"\text{output} = \text{LayerNorm}(y + \text{FFN}(y))",
    summary="A self-attention sublayer, then a feed-forward sublayer, each with its residual "
    "connection and layer normalisation (post-LN or pre-LN).",
    layout=_encoder_layer,
    inputs=(X,),
    outputs=(OUTPUT,),
    dims={**ATTENTION_DIMS, "d_ff": 9},
    params={"norm": "post", "epsilon": 1e-6},
    heatmaps=("weights",),
    mask_dims=("b", "1", "n", "n"),
    regimes=LAYER_REGIMES,
)


# decoder_layer ---------------------------------------------------------------------------------


def _decoder_layer(params: Mapping[str, Any]) -> tuple[Step, ...]:
    placement = _placement(params)
    return (
        *residual(
            MULTIHEAD,
            "self_attn",
            _self_reads("x"),
            norm="norm1",
            placement=placement,
            params={"variant": "causal"},
            shows={"weights": "weights"},
        ),
        *residual(
            MULTIHEAD,
            "cross_attn",
            {"q": "x", "k": "context", "v": "context"},
            norm="norm2",
            placement=placement,
            params={"variant": "cross"},
            masked=True,
            shows={"weights": "cross_weights"},
        ),
        *residual(
            FFN, "ffn", {"x": "x"}, norm="norm3", placement=placement, shows={"hidden": "hidden"}
        ),
        Rename("x", "output"),
    )


DECODER_LAYER = compose(
    "decoder_layer",
    "Transformer decoder layer",
    r"y = \text{LayerNorm}(x + \text{MultiHead}_{\text{causal}}(x, x, x)), \quad "
    r"z = \text{LayerNorm}(y + \text{MultiHead}(y, c, c)), \quad "
    r"\text{output} = \text{LayerNorm}(z + \text{FFN}(z))",
    summary="Causal self-attention, cross-attention to a context sequence and a feed-forward "
    "network, each a sublayer with its residual connection and layer normalisation; the "
    "block's mask, if any, is the cross-attention's (the causal one is the layer's own).",
    layout=_decoder_layer,
    inputs=(X, CONTEXT),
    outputs=(OUTPUT,),
    dims={**ATTENTION_DIMS, "m": 7, "d_ff": 9},
    params={"norm": "post", "epsilon": 1e-6},
    heatmaps=("weights",),
    mask_dims=("b", "1", "n", "m"),
    regimes=LAYER_REGIMES,
)
