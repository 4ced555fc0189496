"""Judging does less work and finds the same: every number of a verdict is what the plain
computation gives, to the bit.

The judge measures an output against the oracle once and judges it against the one-draw
bound and then the full tolerance (:class:`~formula_check.checking.compare.Difference`); the derived
tolerance computes what the bound and the full one share once
(:class:`~formula_check.oracles.tolerance.Derivation`); the oracle's float64 run on the block's own
inputs serves the code's verdict, the formula's agreement and the card's first timed run.
Here the plain computations are written out as they were before, and each shortcut is held
to them on ordinary and hostile arrays (NaN, Inf, zeros, overflow, no elements, one element,
integers, per-element tolerances).
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
import pytest

from formula_check.checking import timing_stats
from formula_check.checking.compare import Difference
from formula_check.checking.formula import judge_formula
from formula_check.latex import compare_with_oracle, compile_for_oracle
from formula_check.model import Array
from formula_check.oracles import get_oracle
from formula_check.oracles.tolerance import (
    EPS32,
    SPREAD,
    Derivation,
    Pair,
    _same,
    derive,
    rounding_samples,
)
from formula_check.planning.plan import plan_check
from formula_check.results import largest_index
from support import compare, spec_for

# -- the plain computations, as the judge made them before --------------------------------------


def _finite_or_inf(values: Array) -> Array:
    return np.where(np.isfinite(values), values, np.inf)


def plain_compare(
    actual: Array, expected: Array, atol: float | Array, rtol: float
) -> dict[str, Any]:
    """Every number a verdict holds, computed the plain way."""
    actual = np.asarray(actual)
    expected = np.asarray(expected, dtype=np.float64)
    if actual.dtype.kind not in "biuf" or actual.shape != expected.shape:
        return {"ok": False}
    actual64 = actual.astype(np.float64)
    with np.errstate(all="ignore"):
        nonfinite = int(np.count_nonzero(~np.isfinite(actual64)))
        delta = _finite_or_inf(np.abs(actual64 - expected))
        allowed = np.broadcast_to(atol, expected.shape) + rtol * np.abs(expected)
        bad = ~(delta <= allowed) | ~np.isfinite(actual64) | ~np.isfinite(expected)
        excess = np.where(np.isinf(delta), np.inf, delta / np.maximum(allowed, 1e-300))
        worst = largest_index(excess)
        meaningful = np.abs(expected) > 0
        rel = _finite_or_inf(delta[meaningful] / np.abs(expected[meaningful]))
    some = bool(delta.size)
    return {
        "ok": not bad.any(),
        "max_abs": float(delta.max()) if some else 0.0,
        "max_rel": float(rel.max()) if rel.size else 0.0,
        "worst_index": worst,
        "max_index": largest_index(delta),
        "worst_expected": float(expected[worst]) if some else 0.0,
        "worst_actual": float(actual64[worst]) if some else 0.0,
        "worst_allowed": float(allowed[worst]) if some else 0.0,
        "used": float(excess.max()) if some else 0.0,
        "n_bad": int(bad.sum()),
        "n_total": int(delta.size),
        "nonfinite": nonfinite,
        "atol": float(np.max(atol)),
    }


def _plain_row_scale(error: Array, magnitude: Array) -> Array:
    with np.errstate(all="ignore"):
        if error.ndim == 0:
            single: Array = np.nan_to_num(error / magnitude, nan=0.0, posinf=0.0)
            return single
        whole = float(np.nan_to_num(np.sqrt(np.sum(error**2) / np.sum(magnitude**2))))
        rows = np.sqrt(
            np.sum(error**2, axis=-1, keepdims=True) / np.sum(magnitude**2, axis=-1, keepdims=True)
        )
        result: Array = np.maximum(np.nan_to_num(rows, nan=0.0, posinf=0.0), whole / 2)
        return result


def plain_derive(
    name: str, expected: Array, samples: Sequence[Pair], *, bound: bool = False
) -> Array | None:
    """The per-element tolerance, computed the plain way."""
    errors = []
    for reference, single in samples:
        if name not in single or name not in reference:
            return None
        value = np.asarray(single[name])
        if value.dtype != np.float32 or value.shape != np.shape(expected):
            return None
        with np.errstate(all="ignore"):
            errors.append(
                np.abs(value.astype(np.float64) - np.asarray(reference[name], np.float64))
            )
    if not errors:
        return None
    exact = np.asarray(expected, dtype=np.float64)
    with np.errstate(all="ignore"):
        stacked = np.stack(errors)
        if not (np.all(np.isfinite(stacked)) and np.all(np.isfinite(exact))):
            return None
        size = np.abs(exact)
        magnitude = size if exact.ndim == 0 else size + np.mean(size, axis=-1, keepdims=True)
        if bound:
            own = stacked[0] / 2
            floor = _plain_row_scale(stacked[0], magnitude) * magnitude / 4
        else:
            own = np.sqrt(np.mean(stacked**2, axis=0))
            moved = any(not _same(reference, samples[0][0]) for reference, _ in samples[1:])
            floor = _plain_row_scale(own, magnitude) * magnitude * (0.5 if moved else 2.0)
        scale = np.maximum(own, floor)
        result: Array = SPREAD * scale + EPS32 * (np.abs(exact) + np.mean(np.abs(exact)))
        return result


# -- helpers ----------------------------------------------------------------------------------


def same_number(one: Any, other: Any) -> bool:
    """Equal to the bit for floats (NaN equals NaN, 0.0 is not -0.0), plainly otherwise."""
    if isinstance(one, float) and isinstance(other, float):
        return math.copysign(1.0, one) == math.copysign(1.0, other) and (
            one == other or (math.isnan(one) and math.isnan(other))
        )
    return bool(one == other)


def same_array(one: Any, other: Any) -> bool:
    one, other = np.asarray(one), np.asarray(other)
    return (
        one.shape == other.shape
        and one.dtype == other.dtype
        and one.tobytes() == other.tobytes()  # to the bit, NaN and the sign of zero too
    )


def _cases() -> list[tuple[str, Array, Array, float | Array, float]]:
    """(what, actual, expected, atol, rtol): ordinary and hostile."""
    rng = np.random.default_rng(7)
    expected = rng.standard_normal((3, 5, 7))
    close = (expected + 1e-6 * rng.standard_normal(expected.shape)).astype(np.float32)
    per_element = 1e-6 + 1e-5 * rng.random(expected.shape)
    cases: list[tuple[str, Array, Array, float | Array, float]] = [
        ("close, fixed atol", close, expected, 1e-5, 1e-5),
        ("close, per-element atol", close, expected, per_element, 0.0),
        ("close, tight", close, expected, 1e-9, 0.0),
        ("far off", close + 1.0, expected, 1e-5, 0.0),
        ("equal", expected.copy(), expected, 0.0, 0.0),
    ]
    with_nan = close.copy()
    with_nan[0, 1, 2], with_nan[2, 4, 6] = np.nan, np.inf
    cases.append(("NaN and Inf in the code's values", with_nan, expected, 1e-5, 0.0))
    expected_bad = expected.copy()
    expected_bad[1, 1, 1], expected_bad[0, 0, 0] = np.inf, np.nan
    cases.append(("NaN and Inf in the oracle's", close, expected_bad, 1e-5, 0.0))
    cases.append(("NaN and Inf in the oracle's, rtol", close, expected_bad, 1e-5, 1e-3))
    both = with_nan.astype(np.float64)
    both[1, 1, 1] = np.inf
    cases.append(("Inf on both sides", both, expected_bad, per_element, 0.0))
    zeros = expected.copy()
    zeros[:, :, 0] = 0.0
    cases.append(("zeros in the oracle's values", close, zeros, 1e-5, 1e-5))
    cases.append(("every oracle value zero", close, np.zeros_like(expected), 1e-5, 0.0))
    huge = np.full((4, 3), 1e308)
    cases.append(("overflowing difference", -huge, huge, 1e-5, 0.0))
    cases.append(("one element", np.float32(1.5), np.float64(1.5 + 1e-7), 1e-6, 0.0))
    cases.append(("one element, NaN", np.float32(np.nan), np.float64(1.0), 1e-6, 0.0))
    cases.append(("no element", np.zeros((0, 4), np.float32), np.zeros((0, 4)), 1e-5, 0.0))
    cases.append(("integers", np.arange(12).reshape(3, 4), np.arange(12.0).reshape(3, 4), 0.5, 0))
    cases.append(("booleans", np.ones((2, 2), bool), np.ones((2, 2)), 0.0, 0.0))
    cases.append(("negative zeros", -np.zeros((2, 3)), np.zeros((2, 3)), 0.0, 0.0))
    return cases


CASES = _cases()


@pytest.mark.parametrize(
    ("what", "actual", "expected", "atol", "rtol"), CASES, ids=[c[0] for c in CASES]
)
def test_a_measured_difference_judges_as_the_plain_comparison(
    what: str, actual: Array, expected: Array, atol: float | Array, rtol: float
) -> None:
    plain = plain_compare(actual, expected, atol, rtol)
    verdict = compare("output", actual, expected, ("a", "b", "c"), atol, rtol)
    assert verdict.ok is plain["ok"]
    for field, value in plain.items():
        assert same_number(getattr(verdict, field), value), (what, field)


def test_one_difference_judged_twice_gives_what_two_comparisons_give() -> None:
    rng = np.random.default_rng(3)
    expected = rng.standard_normal((6, 9))
    actual = (expected + 3e-6 * rng.standard_normal(expected.shape)).astype(np.float32)
    tight, loose = 1e-7 + np.zeros(expected.shape), 1e-4 + rng.random(expected.shape) * 1e-4
    measured = Difference.of(actual, expected)
    for atol in (tight, loose, tight):  # judging leaves the difference as it was
        again = measured.judged("output", ("n", "d"), atol, 0.0, how="h", regime="r")
        fresh = compare("output", actual, expected, ("n", "d"), atol, 0.0, how="h", regime="r")
        assert again == fresh
    assert not measured.judged("output", ("n", "d"), tight, 0.0).ok
    assert measured.judged("output", ("n", "d"), loose, 0.0).ok


def test_a_wrong_shape_or_kind_is_a_problem_whatever_the_tolerance() -> None:
    wrong_shape = Difference.of(np.zeros((2, 3)), np.zeros((3, 2)))
    verdict = wrong_shape.judged("output", ("n", "d"), 1.0, 1.0)
    assert not verdict.ok and verdict.problem.startswith("shape mismatch")
    assert "read as (d, n)" in verdict.problem
    text = Difference.of(np.array(["a", "b"]), np.zeros(2)).judged("output", ("n",), 1.0, 1.0)
    assert not text.ok and "expected numbers" in text.problem


# -- the derived tolerance ---------------------------------------------------------------------


def _draws(
    oracle: str, dims: Mapping[str, int], seed: int
) -> tuple[dict[str, Array], list[Pair], dict[str, Any], dict[str, Array]]:
    """An oracle's float64 outputs on seeded inputs, and its four rounding draws there."""
    spec = spec_for(oracle, "def f(*a):\n    return a[0]\n", dims=dims, seed=seed)
    plan = plan_check(spec, ".", with_timing=False)
    arrays = {**plan.inputs, **plan.weights}
    if plan.keep is not None:
        arrays["mask"] = plan.keep
    params = dict(plan.params)
    expected = dict(plan.oracle.compute(arrays, params))
    samples = rounding_samples(plan.oracle.compute, arrays, params, expected, seed)
    return expected, samples, params, arrays


ORACLES = [
    ("attention", {"b": 2, "n": 5, "m": 7, "d_k": 6, "d_v": 4}),
    ("multihead", {"b": 1, "n": 6, "m": 6, "d_model": 16, "h": 4}),
    ("ffn", {"b": 2, "n": 3, "d_model": 8, "d_ff": 16}),
    ("positional_encoding", {"n": 40, "d_model": 16}),
    ("layer_norm", {}),
    ("softmax", {}),
]


@pytest.mark.parametrize(("oracle", "dims"), ORACLES, ids=[o for o, _ in ORACLES])
def test_the_derivation_gives_the_plain_tolerance_bound_first_then_full(
    oracle: str, dims: Mapping[str, int]
) -> None:
    expected, samples, _, _ = _draws(oracle, dims, seed=11)
    assert len(samples) >= 2
    for name, value in expected.items():
        shared = Derivation(name, value)
        for count, bound in ((1, True), (len(samples), False), (1, True), (2, False)):
            plain = plain_derive(name, value, samples[:count], bound=bound)
            for got in (
                shared.tolerance(samples[:count], bound=bound),
                derive(name, value, samples[:count], bound=bound),
            ):
                if plain is None:
                    assert got is None, (oracle, name)
                    continue
                assert got is not None and got.derived and got.rtol == 0.0
                assert same_array(got.allowed, plain), (oracle, name, count, bound)


def test_a_derivation_refuses_what_the_plain_one_refuses() -> None:
    expected = np.linspace(-1.0, 1.0, 12).reshape(3, 4)
    single = expected.astype(np.float32)
    good: Pair = ({"output": expected}, {"output": single})
    cases: dict[str, tuple[Array, list[Pair]]] = {
        "no draw": (expected, []),
        "float64 draw": (expected, [({"output": expected}, {"output": expected.copy()})]),
        "another shape": (expected, [({"output": expected}, {"output": single[:2]})]),
        "output missing": (expected, [({"output": expected}, {"other": single})]),
        "NaN in a draw": (expected, [good, ({"output": expected}, {"output": single * np.nan})]),
        "Inf in the oracle's values": (np.where(expected > 0.9, np.inf, expected), [good]),
    }
    for what, (values, samples) in cases.items():
        assert plain_derive("output", values, samples) is None, what
        assert Derivation("output", values).tolerance(samples) is None, what
        assert Derivation("output", values).tolerance(samples, bound=True) is None, what
    # one element: its own error and its own magnitude
    scalar = Derivation("output", np.float64(0.3)).tolerance(
        [({"output": np.float64(0.3)}, {"output": np.float32(0.3)})], bound=True
    )
    plain = plain_derive(
        "output",
        np.float64(0.3),
        [({"output": np.float64(0.3)}, {"output": np.float32(0.3)})],
        bound=True,
    )
    assert scalar is not None and same_array(scalar.allowed, plain)


def test_a_derivation_keeps_each_draw_apart() -> None:
    """Two draws that are equal but not the same draw are measured each on its own: the
    cache holds a draw by identity, never by value or by place."""
    expected, samples, _, _ = _draws("attention", dict(ORACLES[0][1]), seed=5)
    shared = Derivation("output", expected["output"])
    first = shared.tolerance(samples[:1], bound=True)
    moved = [(samples[0][0], {"output": samples[0][1]["output"] * 1.5})]
    other = shared.tolerance(moved, bound=True)
    fresh = derive("output", expected["output"], moved, bound=True)
    assert first is not None and other is not None and fresh is not None
    assert same_array(other.allowed, fresh.allowed)
    assert not same_array(first.allowed, other.allowed)


# -- the oracle's run on the block's inputs, used three times -----------------------------------


class Counting:
    """An oracle's compute that counts its runs."""

    def __init__(self, compute: Callable[..., Mapping[str, Array]]) -> None:
        self.compute = compute
        self.runs = 0

    def __call__(
        self, arrays: Mapping[str, Array], params: Mapping[str, Any]
    ) -> Mapping[str, Array]:
        self.runs += 1
        return self.compute(arrays, params)


MULTIHEAD_LATEX = (
    r"\mathrm{MultiHead}(Q, K, V) = \mathrm{Concat}(\mathrm{head}_1, \dots, \mathrm{head}_h)"
    r"\, W^{O}, \quad \mathrm{head}_i = \mathrm{Attention}(Q W_i^{Q}, K W_i^{K}, V W_i^{V})"
)


def test_the_formula_is_compared_with_known_values_of_its_own_oracle_only() -> None:
    dims = {"b": 1, "n": 4, "m": 4, "d_model": 8, "h": 2}
    _, _, params, arrays = _draws("multihead", dims, seed=2)
    oracle = get_oracle("multihead")
    arrays = {k: v for k, v in arrays.items() if not k.startswith("b_")}  # no biases given
    expected = dict(oracle.compute(arrays, params))
    compiled = compile_for_oracle(MULTIHEAD_LATEX, "multihead", params)
    plain = compare_with_oracle(compiled, oracle, arrays, params)
    assert plain.ok
    assert compare_with_oracle(compiled, oracle, arrays, params, expected=expected) == plain
    # the values given are the ones compared with: wrong ones would show
    wrong = {k: v + 1.0 for k, v in expected.items()}
    assert not compare_with_oracle(compiled, oracle, arrays, params, expected=wrong).ok
    # with biases given that the formula does not name, the oracle runs without them: the
    # values computed with them are never used
    with_biases = {**arrays, "b_q": np.ones(8), "b_o": np.ones(8)}
    assert compare_with_oracle(compiled, oracle, with_biases, params, expected=wrong).ok


def test_judging_a_formula_runs_the_oracle_only_when_its_values_are_not_known() -> None:
    dims = {"b": 1, "n": 4, "m": 4, "d_model": 8, "h": 2}
    _, _, params, arrays = _draws("multihead", dims, seed=2)
    arrays = {k: v for k, v in arrays.items() if not k.startswith("b_")}
    counting = Counting(get_oracle("multihead").compute)
    spec = spec_for("multihead", "def f(*a):\n    return a[0]\n", dims=dims, latex=MULTIHEAD_LATEX)
    from formula_check.checking import formula

    oracle = dataclasses.replace(get_oracle("multihead"), compute=counting)
    original = formula.get_oracle
    formula.get_oracle = lambda name: oracle if name == "multihead" else original(name)  # type: ignore[assignment]
    try:
        unknown = judge_formula(spec, arrays, params)
        assert counting.runs == 1
        values = dict(counting.compute(arrays, params))
        known = judge_formula(spec, arrays, params, known=(oracle, values))
        assert counting.runs == 1  # not run again
        # values of another oracle object (one registered since, a custom one) are not used
        stranger = dataclasses.replace(oracle, name="multihead")
        judge_formula(spec, arrays, params, known=(stranger, values))
        assert counting.runs == 2
    finally:
        formula.get_oracle = original  # type: ignore[assignment]
    assert unknown is not None and unknown.state == "agrees"
    assert known == unknown


def test_the_run_that_gave_the_expected_values_is_the_first_timed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    runs: list[float] = []

    def slow(arrays: Mapping[str, Any], params: Mapping[str, Any]) -> dict[str, Any]:
        runs.append(time.perf_counter())
        time.sleep(timing_stats.ORACLE_BUDGET)
        return {"output": np.zeros(1)}

    plan = plan_check(spec_for("softmax", "def f(x):\n    return x\n"), ".", with_timing=False)
    plan = dataclasses.replace(plan, oracle=dataclasses.replace(plan.oracle, compute=slow))
    stats = timing_stats.oracle_timing(plan, {}, {}, done=[timing_stats.ORACLE_BUDGET])
    fewest, most = timing_stats.ORACLE_RUNS
    assert stats.repeats == fewest and len(runs) == fewest - 1
    # runs already made never make it more than the most, nor fewer than the fewest
    many = timing_stats.oracle_timing(plan, {}, {}, done=[0.0] * (most + 3))
    assert many.repeats == most and len(runs) == fewest - 1
    assert timing_stats.oracle_timing(plan, {}, {}, done=[]).repeats == fewest
