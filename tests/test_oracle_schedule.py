"""The Transformer learning-rate schedule oracle: against the paper's formula step by step,
its steps and regime, its formulas as printed (pure NumPy), and real TensorFlow schedules
through the engine: a correct one verifies, each wrong version is a mismatch."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from formula_check.latex import NotExecutable, check_against_oracle
from formula_check.model import Status
from formula_check.oracles import get_oracle
from support import run

ORACLE = get_oracle("transformer_lr_schedule")
TUTORIAL = (
    r"\Large{lrate = d_{model}^{-0.5} * \min(step{\_}num^{-0.5}, step{\_}num \cdot "
    r"warmup{\_}steps^{-1.5})}"
)
"""The 2022 tutorial's formula as it prints it."""


def case(seed: int = 0, **dims: int) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
    sizes = ORACLE.resolve_dims(dims, ORACLE.params)
    arrays = ORACLE.make_inputs(sizes, np.random.default_rng(seed), ORACLE.params)
    return arrays, {**ORACLE.params, **sizes}


def paper_rate(step: float, d_model: int, warmup_steps: int) -> float:
    """The paper's two branches, taken by comparing the step with the warm-up."""
    if step <= warmup_steps:
        return float(d_model**-0.5 * step * warmup_steps**-1.5)
    return float(d_model**-0.5 / step**0.5)


# -- the oracle, pure ---------------------------------------------------------------------------


@pytest.mark.parametrize(("d_model", "warmup_steps"), [(512, 4000), (128, 50), (12, 1)])
def test_the_oracle_is_the_papers_schedule(d_model: int, warmup_steps: int) -> None:
    arrays, params = case(1, d_model=d_model, warmup_steps=warmup_steps)
    result = ORACLE.compute(arrays, params)["output"]
    expected = [paper_rate(s, d_model, warmup_steps) for s in arrays["step"]]
    np.testing.assert_allclose(result, expected, rtol=1e-13, atol=0)


def test_the_steps_are_whole_and_lie_on_both_sides_of_the_warm_up() -> None:
    arrays, params = case(2)
    steps, warmup = arrays["step"], params["warmup_steps"]
    assert steps.shape == (params["n"],)
    np.testing.assert_array_equal(steps, np.rint(steps))
    assert np.all(np.diff(steps) >= 0)
    assert {1.0, warmup - 1.0, float(warmup), warmup + 1.0} <= set(steps)
    assert np.sum(steps > warmup) >= 2
    assert np.sum(steps < warmup - 1) >= 2


def test_the_far_steps_are_whole_long_after_the_warm_up_and_exact_in_float32() -> None:
    arrays, params = case(3)
    (far,) = ORACLE.input_regimes()
    assert far.inputs is not None
    moved = far.inputs(arrays, params, np.random.default_rng(0), params)
    assert moved is not None
    steps = moved["step"]
    assert steps.shape == arrays["step"].shape
    assert np.all(steps >= 10 * params["warmup_steps"])
    assert np.all(steps <= 2**24)
    np.testing.assert_array_equal(steps, steps.astype(np.float32))


def test_float32_steps_give_float32_rates_both_ways() -> None:
    arrays, params = case(4)
    single = {"step": arrays["step"].astype(np.float32)}
    for draw in (0, 1):
        assert ORACLE.compute(single, {**params, "_draw": draw})["output"].dtype == np.float32


def test_a_schedule_of_fewer_than_four_steps_is_refused() -> None:
    with pytest.raises(Exception, match="n \\(3\\) must be at least 4"):
        ORACLE.resolve_dims({"n": 3}, ORACLE.params)


@pytest.mark.parametrize("latex", [ORACLE.latex, TUTORIAL], ids=["catalog", "tutorial"])
def test_the_formulas_compile_and_agree(latex: str) -> None:
    arrays, params = case(5)
    agreement = check_against_oracle(latex, "transformer_lr_schedule", arrays, params)
    assert agreement.ok, agreement.message


@pytest.mark.parametrize(
    ("before", "after"),
    [(r"\min", r"\max"), ("^{-1.5}", "^{-1}"), ("d_{model}^{-0.5}", "d_{model}^{-1}")],
)
def test_a_wrong_printed_formula_differs(before: str, after: str) -> None:
    arrays, params = case(6)
    wrong = TUTORIAL.replace(before, after)
    assert wrong != TUTORIAL
    assert not check_against_oracle(wrong, "transformer_lr_schedule", arrays, params).ok


def test_an_escaped_underscore_outside_a_name_is_still_not_executable() -> None:
    arrays, params = case(7)
    with pytest.raises(NotExecutable, match=r"\\_ is outside the executable subset"):
        check_against_oracle(r"lrate = \_ step", "transformer_lr_schedule", arrays, params)


# -- real TensorFlow schedules through the engine ------------------------------------------------

SCHEDULE = """
import tensorflow as tf


class WarmupSchedule(tf.keras.optimizers.schedules.LearningRateSchedule):
    def __init__(self, d_model, warmup_steps=4000):
        super().__init__()
        self.d_model = tf.cast(d_model, tf.float32)
        self.warmup_steps = warmup_steps

    def __call__(self, step):
        step = tf.cast(step, tf.float32)
        first = tf.math.rsqrt(step)
        second = step * (self.warmup_steps ** -1.5)
        return tf.math.rsqrt(self.d_model) * tf.math.minimum(first, second)
"""

OPTIONS: dict[str, Any] = {
    "kind": "layer",
    "dims": {"d_model": 64, "warmup_steps": 300},
    "init": {"d_model": "d_model", "warmup_steps": "warmup_steps"},
    "call": ("step",),
}

MUTANTS = {
    "warm-up exponent -1": ("self.warmup_steps ** -1.5", "self.warmup_steps ** -1"),
    "max for min": ("tf.math.minimum(", "tf.math.maximum("),
    "off by one step": ("step = tf.cast(step, tf.float32)", "step = tf.cast(step + 1, tf.float32)"),
    "no d_model scale": ("tf.math.rsqrt(self.d_model) * ", ""),
    "step in float16": (
        "tf.cast(step, tf.float32)",
        "tf.cast(tf.cast(step, tf.float16), tf.float32)",
    ),
}


@pytest.mark.tf
def test_a_correct_schedule_verifies_on_the_far_steps_too() -> None:
    result = run("transformer_lr_schedule", SCHEDULE, **OPTIONS)
    assert result.status is Status.VERIFIED, result.headline()
    # the graph tf.function traces is judged too (a schedule is called, never built), also
    # on the far steps (traced again there, by tf.function itself, for their shape)
    regimes = {"", "far steps", "tf.function", "tf.function, far steps"}
    assert {verdict.regime for verdict in result.verdicts} == regimes


@pytest.mark.tf
@pytest.mark.parametrize("name", sorted(MUTANTS))
def test_each_wrong_schedule_is_a_mismatch(name: str) -> None:
    before, after = MUTANTS[name]
    assert SCHEDULE.count(before) == 1
    result = run("transformer_lr_schedule", SCHEDULE.replace(before, after), **OPTIONS)
    assert result.status is Status.MISMATCH, result.headline()
