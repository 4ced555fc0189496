"""Input regimes of the builtin oracles: the inputs where a formula is sensitive (large
logits, masked keys that score high, variance near ε, far positions...)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from formula_check.lazy import numpy as np  # imported on first use
from formula_check.model import Array
from formula_check.oracles.base import KEEP_PARAM, Regime, scaled

LOGIT_SCALE = 8.0
"""Queries and keys grow by this in the attention oracle's large-logits regime, so logits of
about ±1 become about ±64 and the softmax is nearly one-hot, as in a trained model (its weak
mask constants are the masked-keys regime's to show)."""

PROJECTED_LOGIT_SCALE = 16.0
"""The same for layers whose queries and keys go through their own projections, the one way
to reach their logits: about ±256, so that across the rows and heads of a block some masked
key outscores its row's kept ones by more than 100, and a constant of -100 instead of -1e9
lets it take visible weight."""


def large_logits(names: tuple[str, ...], scale: float) -> Regime:
    """Inputs ``names`` (every input, for self-attention) times ``scale``: logits about
    ``scale²`` times wider, a nearly one-hot softmax."""

    def inputs(
        standard: Mapping[str, Array],
        sizes: Mapping[str, int],
        rng: np.random.Generator,
        params: Mapping[str, Any],
    ) -> dict[str, Array]:
        # self-attention's one sequence is its queries, keys and values alike
        every = params.get("variant") in ("self", "causal")
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
    """Rows whose variance is between ε/4 and 4ε, where ε decides the result. Inputs a
    norm adds up first (add_norm's x + y) share the variance, so that their sum's is too."""
    epsilon = float(params.get("epsilon", 1e-6)) / len(standard)
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

LARGE_VALUES = scaled(
    64.0,
    "inputs × 64: values of about ±150, where exp overflows float32 unless the largest is "
    "subtracted first",
    name="large values",
)
"""A softmax's own trap: logits as large as a trained model's. Code that exponentiates
without subtracting the row's maximum (or subtracts its minimum) overflows here."""
