"""Judging computes nothing twice and copies nothing it need not, and finds the same.

Planning sends the code the float32 arrays its float64 ones were made from; the rounding
draws of a block's input regimes share the float32 casts of its weights (only for an oracle
of ours, which never writes into what it is given); the comparison widens float32 values as
they meet float64 ones, and judges against a tolerance it does not copy. Each is held here
to what the plain computation gives, to the bit, on ordinary and hostile values.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from typing import Any

import numpy as np
import pytest

from formula_check.checking.compare import Difference
from formula_check.checking.judge import evaluate
from formula_check.messages import CheckReply
from formula_check.model import Array
from formula_check.oracles.tolerance import (
    Derivation,
    Pair,
    Singles,
    _equal,
    _same,
    rounding_samples,
)
from formula_check.planning.plan import Plan, plan_check
from formula_check.results import Environment, Verdict
from support import spec_for
from test_judge_cpu import plain_derive

FFN_DIMS = {"b": 2, "n": 3, "d_model": 8, "d_ff": 16}


def _bits(value: Any) -> bytes:
    return np.asarray(value).tobytes()


def _same_verdict(one: Verdict, other: Verdict) -> bool:
    """Every field equal, floats to the bit (NaN equals NaN, 0.0 is not -0.0)."""
    for field in dataclasses.fields(Verdict):
        a, b = getattr(one, field.name), getattr(other, field.name)
        if isinstance(a, float) and isinstance(b, float):
            if math.copysign(1.0, a) != math.copysign(1.0, b):
                return False
            if not (a == b or (math.isnan(a) and math.isnan(b))):
                return False
        elif a != b:
            return False
    return True


# -- planning ------------------------------------------------------------------------------


@pytest.mark.parametrize("oracle", ["ffn", "attention", "multihead"])
def test_the_code_gets_exactly_the_float32_values_the_oracle_computes_with(oracle: str) -> None:
    dims: dict[str, dict[str, int]] = {
        "ffn": FFN_DIMS,
        "attention": {"b": 2, "n": 5, "m": 7, "d_k": 6, "d_v": 4},
        "multihead": {"b": 1, "n": 6, "d_model": 16, "h": 4},
    }
    plan = plan_check(spec_for(oracle, "def f(*a):\n    return a[0]\n", dims=dims[oracle]), ".")
    sent = 0
    for prefix, arrays in (("in/", plan.inputs), ("wt/", plan.weights)):
        for name, wide in arrays.items():
            single = plan.arrays[f"{prefix}{name}"]
            assert single.dtype == np.float32 and single.shape == wide.shape
            assert _bits(single) == _bits(wide.astype(np.float32))
            assert _bits(single.astype(np.float64)) == _bits(wide)  # float32-exact
            sent += 1
    assert sent >= 2
    for regime in plan.regimes:
        for name, wide in regime.inputs.items():
            single = plan.arrays[f"{regime.prefix}in/{name}"]
            assert _bits(single) == _bits(wide.astype(np.float32)), (regime.name, name)


def test_two_blocks_of_one_seed_plan_the_same_numbers() -> None:
    spec = spec_for("ffn", "def f(*a):\n    return a[0]\n", dims=FFN_DIMS, seed=4)
    one, other = plan_check(spec, "."), plan_check(spec, ".")
    assert one.arrays.keys() == other.arrays.keys()
    for key in one.arrays:
        assert _bits(one.arrays[key]) == _bits(other.arrays[key]), key
        assert one.arrays[key] is not other.arrays[key]


# -- the rounding draws' float32 casts --------------------------------------------------------


class Seen:
    """An oracle's compute that keeps every float32 array it was given, by name."""

    def __init__(self, compute: Any) -> None:
        self.compute = compute
        self.given: list[dict[str, Array]] = []

    def __call__(self, arrays: Mapping[str, Array], params: Mapping[str, Any]) -> Any:
        if any(np.asarray(v).dtype == np.float32 for v in arrays.values()):
            self.given.append(dict(arrays))
        return self.compute(arrays, params)


def _ffn_arrays(seed: int) -> tuple[Plan, dict[str, Array], dict[str, Any]]:
    plan = plan_check(
        spec_for("ffn", "def f(*a):\n    return a[0]\n", dims=FFN_DIMS, seed=seed), "."
    )
    return plan, {**plan.inputs, **plan.weights}, dict(plan.params)


def test_draws_that_share_weights_cast_them_once_and_alike() -> None:
    plan, arrays, params = _ffn_arrays(3)
    seen = Seen(plan.oracle.compute)
    expected = dict(plan.oracle.compute(arrays, params))
    singles: Singles = {}
    shared = rounding_samples(seen, arrays, params, expected, 3, 1, singles=singles)
    wider = {**arrays, "x": arrays["x"] * 10 + 3}  # a regime: other inputs, the same weights
    wider_expected = dict(plan.oracle.compute(wider, params))
    again = rounding_samples(seen, wider, params, wider_expected, 3, 1, singles=singles)
    first, second = seen.given
    for name in plan.weights:
        assert second[name] is first[name], name  # one cast, for both
        assert _bits(first[name]) == _bits(arrays[name].astype(np.float32))
    assert _bits(second["x"]) == _bits(wider["x"].astype(np.float32))
    assert second["x"] is not first["x"]
    # the same draws as casting each time
    alone = rounding_samples(plan.oracle.compute, wider, params, wider_expected, 3, 1)
    for (ref, single), (ref2, single2) in zip(again, alone, strict=True):
        assert all(_bits(ref[k]) == _bits(ref2[k]) for k in ref)
        assert all(_bits(single[k]) == _bits(single2[k]) for k in single)
    assert shared and again


def test_an_equal_array_is_not_taken_for_a_cast_one() -> None:
    plan, arrays, params = _ffn_arrays(5)
    expected = dict(plan.oracle.compute(arrays, params))
    singles: Singles = {}
    seen = Seen(plan.oracle.compute)
    rounding_samples(seen, arrays, params, expected, 5, 1, singles=singles)
    copies = {name: value.copy() for name, value in arrays.items()}
    copies["W_1"][0, 0] += 1.0  # equal elsewhere, another array all the same
    rounding_samples(seen, copies, params, expected, 5, 1, singles=singles)
    first, second = seen.given
    for name in arrays:
        assert second[name] is not first[name], name
    assert second["W_1"][0, 0] == np.float32(copies["W_1"][0, 0])


def test_the_moved_draws_are_cast_afresh_each_time() -> None:
    plan, arrays, params = _ffn_arrays(6)
    expected = dict(plan.oracle.compute(arrays, params))
    seen = Seen(plan.oracle.compute)
    singles: Singles = {}
    samples = rounding_samples(seen, arrays, params, expected, 6, 4, singles=singles)
    assert len(samples) == 4 and len(seen.given) == 4
    for draw in seen.given[1:]:
        for name in arrays:
            assert draw[name] is not seen.given[0][name]
            assert not np.array_equal(draw[name], seen.given[0][name]), name  # moved
    assert {id(pair[0]) for pair in singles.values()} <= {id(v) for v in arrays.values()}


def _judged_with(plan: Plan, compute: Any) -> tuple[list[Verdict], Seen]:
    """The block judged for code that returns the oracle's own outputs, rounded to float32,
    on its own inputs and its regime's, with ``compute`` as the oracle."""
    seen = Seen(compute)
    arrays = {**plan.inputs, **plan.weights}
    regime = plan.regimes[0]
    outputs = {
        "out/0": np.asarray(plan.oracle.compute(arrays, plan.params)["output"], np.float32),
        f"{regime.prefix}out/0": np.asarray(
            plan.oracle.compute({**arrays, **regime.inputs}, plan.params)["output"], np.float32
        ),
    }
    oracle = dataclasses.replace(plan.oracle, compute=seen)
    if compute is not plan.oracle.compute:
        oracle = dataclasses.replace(oracle, source="docs/my_oracles.py")
    reply = CheckReply(kind="function", outputs=1, output_dtypes=("float32",))
    result = evaluate(dataclasses.replace(plan, oracle=oracle), reply, outputs, Environment())
    return list(result.verdicts), seen


def test_a_block_and_its_regime_share_the_weights_cast_for_an_oracle_of_ours_only() -> None:
    plan, _, _ = _ffn_arrays(8)
    assert [r.name for r in plan.regimes] == ["wide"]
    ours, seen_ours = _judged_with(plan, plan.oracle.compute)

    def mine(arrays: Mapping[str, Array], params: Mapping[str, Any]) -> Any:
        return plan.oracle.compute(arrays, params)

    theirs, seen_theirs = _judged_with(plan, mine)
    assert len(ours) == len(theirs) == 2
    assert all(_same_verdict(a, b) for a, b in zip(ours, theirs, strict=True))
    assert all(v.ok for v in ours)
    block, regime = seen_ours.given[0], seen_ours.given[1]
    for name in plan.weights:
        assert regime[name] is block[name], name
        block2, regime2 = seen_theirs.given[0], seen_theirs.given[1]
        assert regime2[name] is not block2[name], name  # another oracle may write into them
        assert _bits(regime2[name]) == _bits(block[name])


# -- the comparison ---------------------------------------------------------------------------


def _cases() -> list[tuple[str, Array, Array, Any]]:
    rng = np.random.default_rng(11)
    expected = rng.standard_normal((4, 6))
    close = (expected + 1e-6 * rng.standard_normal(expected.shape)).astype(np.float32)
    hostile = close.copy()
    hostile[0, 0], hostile[1, 2], hostile[2, 3] = np.nan, np.inf, -np.inf
    zeros = np.zeros_like(expected)
    tolerance = np.full(expected.shape, 1e-5)
    tolerance[1] = -0.0  # a zero that is negative: the verdict says +0 for it, as before
    return [
        ("close, per-element", close, expected, tolerance),
        ("close, number", close, expected, 1e-5),
        ("far", close * 2, expected, 1e-5),
        ("NaN and Inf in the code's", hostile, expected, tolerance),
        ("Inf in the oracle's", close, np.where(expected > 1.5, np.inf, expected), tolerance),
        ("zeros", zeros.astype(np.float32), zeros, -0.0),
        ("overflow", np.full((2, 2), 3e38, np.float32), np.full((2, 2), -1.7e308), 1.0),
        ("float16", close.astype(np.float16), expected, 1e-3),
        ("integers", np.arange(24).reshape(4, 6), np.arange(24.0).reshape(4, 6) + 0.5, 0.25),
        ("float32 tolerance", close, expected, tolerance.astype(np.float32)),
        ("no elements", np.zeros((0, 3), np.float32), np.zeros((0, 3)), 1e-5),
        ("one element", np.float32(0.5), np.float64(0.5000001), 1e-9),
    ]


@pytest.mark.parametrize(
    ("what", "actual", "expected", "atol"), _cases(), ids=[c[0] for c in _cases()]
)
def test_float32_values_are_judged_as_their_float64_copies_are(
    what: str, actual: Array, expected: Array, atol: Any
) -> None:
    actual = np.asarray(actual)
    widened = actual.astype(np.float64)  # what the comparison used to judge
    for rtol in (0.0, 1e-3):
        for measured in (Difference.of(actual, expected), Difference.of(widened, expected)):
            got = measured.judged("output", ("n", "d"), atol, rtol, how="h")
            again = measured.judged("output", ("n", "d"), atol, rtol, how="h")
            plain = Difference.of(widened, expected).judged(
                "output", ("n", "d"), atol, rtol, how="h"
            )
            assert _same_verdict(got, again), what
            assert _same_verdict(got, plain), (what, got, plain)


def test_a_negative_zero_tolerance_is_said_as_zero() -> None:
    expected = np.array([[0.0, 1.0]])
    verdict = Difference.of(expected.astype(np.float32), expected).judged(
        "output", ("n", "d"), np.array([[-0.0, -0.0]]), 0.0
    )
    assert verdict.ok
    assert math.copysign(1.0, verdict.worst_allowed) == 1.0


# -- equality of draws ------------------------------------------------------------------------


def test_an_array_is_equal_to_itself_unless_it_holds_a_nan() -> None:
    plain = np.linspace(0.0, 1.0, 7)
    holed = plain.copy()
    holed[3] = np.nan
    assert _equal(plain, plain) and _same({"a": plain}, {"a": plain})
    assert not _equal(holed, holed) and not _same({"a": holed}, {"a": holed})
    assert _equal(np.zeros((0, 2)), np.zeros((0, 2)))
    assert _equal(np.arange(3), np.arange(3)) and not _equal(np.arange(3), np.arange(1, 4))
    assert not _equal(plain, plain[::-1])
    assert not _same({"a": plain}, {"b": plain})
    for one, other in ((plain, plain), (holed, holed), (plain, plain.copy())):
        assert _equal(one, other) == np.array_equal(one, other)


# -- the derived tolerance of one number ------------------------------------------------------


@pytest.mark.parametrize("draws", [1, 2, 3, 4])
def test_one_number_gets_the_plain_tolerance_from_any_count_of_draws(draws: int) -> None:
    exact = np.float64(0.3)
    samples: list[Pair] = [
        ({"output": np.float64(0.3 + 1e-9 * k)}, {"output": np.float32(0.3 + 1e-7 * k)})
        for k in range(draws)
    ]
    for bound in (True, False):
        got = Derivation("output", exact).tolerance(samples, bound=bound)
        plain = plain_derive("output", exact, samples, bound=bound)
        assert got is not None and plain is not None
        assert np.ndim(got.allowed) == 0
        assert _bits(np.float64(got.allowed)) == _bits(np.float64(plain)), (draws, bound)
