"""Learning-rate schedules: functions of the training step, not of activations. The
Transformer paper's warm-up schedule rises linearly for ``warmup_steps`` steps and decays
with the inverse square root of the step after."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from formula_check.errors import OracleError
from formula_check.lazy import numpy as np  # imported on first use
from formula_check.model import Array
from formula_check.oracles.base import Oracle, Regime
from formula_check.oracles.numerics import second_way
from formula_check.oracles.tensors import given, positive_sizes, tensor

STEP = tensor("step", "n", "training steps, whole numbers from 1")

FLOAT32_WHOLE = 2**24
"""The last step float32 holds exactly with every whole number below it: a schedule that
casts its step to float32 (as Keras' do) computes on the true step up to here."""


def warmup_rate(step: Array, d_model: int, warmup_steps: int, *, through_sqrt: bool) -> Array:
    """``d_model^-0.5 · min(step^-0.5, step · warmup_steps^-1.5)`` in ``step``'s precision;
    the inverse square root as a power, or (as code also writes it) one over a square root."""
    decay = 1 / np.sqrt(step) if through_sqrt else step**-0.5
    warming = step * warmup_steps**-1.5
    rate: Array = d_model**-0.5 * np.minimum(decay, warming)
    return rate


def _schedule(arrays: Mapping[str, Array], params: Mapping[str, Any]) -> dict[str, Array]:
    step = given(arrays, STEP)
    d_model, warmup_steps = int(params["d_model"]), int(params["warmup_steps"])
    return {"output": warmup_rate(step, d_model, warmup_steps, through_sqrt=second_way(params))}


def _steps(low: int, high: int, count: int, rng: np.random.Generator) -> Array:
    """``count`` sorted whole steps, spread evenly in log between ``low`` and ``high``."""
    drawn = np.exp(rng.uniform(math.log(low), math.log(high), size=count))
    steps: Array = np.sort(np.rint(drawn)).astype(np.float64)
    return steps


def _generate(
    sizes: Mapping[str, int], rng: np.random.Generator, params: Mapping[str, Any]
) -> dict[str, Array]:
    """Steps on both sides of the warm-up: the first step, where an off-by-one doubles the
    rate; the last warm-up step and the two after it, where the branches meet; the rest spread
    in log, half during the warm-up and half up to sixteen times it, where the decay rules."""
    warmup, count = sizes["warmup_steps"], sizes["n"]
    fixed = [1.0, float(max(1, warmup - 1)), float(warmup), float(warmup + 1)]
    spread = count - len(fixed)
    during = _steps(2, max(2, warmup - 2), spread // 2, rng)
    after = _steps(warmup + 2, 16 * warmup, spread - spread // 2, rng)
    return {"step": np.sort(np.concatenate([fixed, during, after]))}


def _far_steps(
    standard: Mapping[str, Array],
    sizes: Mapping[str, int],
    rng: np.random.Generator,
    params: Mapping[str, Any],
) -> dict[str, Array]:
    low = min(10 * int(params["warmup_steps"]), FLOAT32_WHOLE // 2)
    return {"step": _steps(low, FLOAT32_WHOLE, len(standard["step"]), rng)}


FAR_STEPS = Regime(
    "far steps",
    f"steps from 10 × warmup_steps to {FLOAT32_WHOLE:,}, long after the warm-up",
    _far_steps,
)
"""A long run's steps: far past the warm-up, the decay alone decides the rate, and code that
holds the step in a narrow type (float16's whole numbers end at 2048, int16's at 32767) or
mixes the two branches up shows."""


def _derive(sizes: dict[str, int], params: Mapping[str, Any]) -> dict[str, int]:
    sizes = positive_sizes(sizes, params)
    if sizes["n"] < 4:
        raise OracleError(
            f"n ({sizes['n']}) must be at least 4: the first step and three around the warm-up"
        )
    return sizes


TRANSFORMER_LR_SCHEDULE = Oracle(
    name="transformer_lr_schedule",
    title="Transformer learning-rate schedule",
    summary="The learning rate at each training step: linear warm-up for warmup_steps steps, "
    "then decay with the inverse square root of the step, scaled by d_model^-0.5.",
    latex=r"\text{lrate} = d_{\text{model}}^{-0.5} \cdot \min\left(step_{num}^{-0.5}, "
    r"step_{num} \cdot warmup_{steps}^{-1.5}\right)",
    compute=_schedule,
    inputs=(STEP,),
    outputs=(tensor("output", "n"),),
    size_args=("d_model", "warmup_steps"),
    dims={"n": 12, "d_model": 512, "warmup_steps": 4000},
    derive=_derive,
    generate=_generate,
    regimes=(FAR_STEPS,),
    vector_hint="The check calls the schedule once, with a vector of n steps (Keras calls it "
    "with one step at a time): write it with tensor operations, which take every step at "
    "once, e.g. tf.minimum(tf.math.rsqrt(step), step * warmup_steps ** -1.5) in place of an "
    "if on the step, Python's min() or float(step)",
)
