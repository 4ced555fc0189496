"""The builtin oracles: float64 NumPy references of the Transformer's formulas.

:data:`BUILTINS` lists them for the registry, which adds them on first use. They live by
family (:mod:`.attention`, :mod:`.additive`, :mod:`.positional`, :mod:`.layers`,
:mod:`.schedules`, and :mod:`.composite`, built with :mod:`.compose`); their shared math is
in :mod:`.numerics`, their input regimes in :mod:`.regimes`. Sizes are read off the arrays
wherever the math allows, so a layer's real weights go through the same code as generated
ones.
"""

from __future__ import annotations

from formula_check.oracles.additive import ADDITIVE_ATTENTION, ADDITIVE_WEIGHTS, additive_scores
from formula_check.oracles.attention import (
    ATTENTION,
    MH_INPUTS,
    MH_WEIGHTS,
    MULTIHEAD,
    SA_WEIGHTS,
    SELF_ATTENTION,
)
from formula_check.oracles.base import Oracle
from formula_check.oracles.composite import (
    ADD_NORM,
    ATTENTION_SUBLAYER,
    CROSS_ATTENTION_SUBLAYER,
    DECODER_LAYER,
    ENCODER_LAYER,
)
from formula_check.oracles.layers import (
    FFN,
    FFN_WEIGHTS,
    LAYER_NORM,
    LINEAR,
    LINEAR_W,
    LN_WEIGHTS,
    NORM_PLACEMENTS,
    SOFTMAX,
    SOFTMAX_X,
    SUBLAYER,
)
from formula_check.oracles.numerics import (
    MASKED_LOGIT,
    layer_norm,
    positional_encoding,
    relu_ffn,
    scaled_dot_product,
    softmax,
)
from formula_check.oracles.positional import (
    ADD_POSITIONAL_ENCODING,
    LEARNED_EMBEDDING,
    POSITIONAL_ENCODING,
    SINUSOIDAL_EMBEDDING,
)
from formula_check.oracles.regimes import (
    FAR,
    FAR_POSITIONS,
    LARGE_VALUES,
    LOGIT_SCALE,
    MASKED_KEYS,
    MASKED_SCORE,
    NEAR_EPSILON,
    PROJECTED_LOGIT_SCALE,
    WIDE_OFFSET,
    WIDE_WEIGHTS,
)
from formula_check.oracles.schedules import TRANSFORMER_LR_SCHEDULE, warmup_rate
from formula_check.oracles.tensors import X

__all__ = [
    "ADDITIVE_ATTENTION",
    "ADDITIVE_WEIGHTS",
    "ADD_NORM",
    "ADD_POSITIONAL_ENCODING",
    "ATTENTION",
    "ATTENTION_SUBLAYER",
    "BUILTINS",
    "CROSS_ATTENTION_SUBLAYER",
    "DECODER_LAYER",
    "ENCODER_LAYER",
    "FAR",
    "FAR_POSITIONS",
    "FFN",
    "FFN_WEIGHTS",
    "LARGE_VALUES",
    "LAYER_NORM",
    "LEARNED_EMBEDDING",
    "LINEAR",
    "LINEAR_W",
    "LN_WEIGHTS",
    "LOGIT_SCALE",
    "MASKED_KEYS",
    "MASKED_LOGIT",
    "MASKED_SCORE",
    "MH_INPUTS",
    "MH_WEIGHTS",
    "MULTIHEAD",
    "NEAR_EPSILON",
    "NORM_PLACEMENTS",
    "POSITIONAL_ENCODING",
    "PROJECTED_LOGIT_SCALE",
    "SA_WEIGHTS",
    "SELF_ATTENTION",
    "SINUSOIDAL_EMBEDDING",
    "SOFTMAX",
    "SOFTMAX_X",
    "SUBLAYER",
    "TRANSFORMER_LR_SCHEDULE",
    "WIDE_OFFSET",
    "WIDE_WEIGHTS",
    "X",
    "additive_scores",
    "layer_norm",
    "positional_encoding",
    "relu_ffn",
    "scaled_dot_product",
    "softmax",
    "warmup_rate",
]

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
    ATTENTION_SUBLAYER,
    CROSS_ATTENTION_SUBLAYER,
    ADD_NORM,
    ENCODER_LAYER,
    DECODER_LAYER,
    ADD_POSITIONAL_ENCODING,
    SINUSOIDAL_EMBEDDING,
    LEARNED_EMBEDDING,
    ADDITIVE_ATTENTION,
    TRANSFORMER_LR_SCHEDULE,
)
"""Every builtin oracle, in the order :func:`.registry.all_oracles` lists them."""
