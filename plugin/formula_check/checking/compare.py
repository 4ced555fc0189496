"""Actual (TensorFlow, float32) against expected (oracle, float64): a verdict with numbers.

An element passes when ``|actual - expected| <= atol + rtol * |expected|``, where ``atol`` is
usually the per-element tolerance :mod:`formula_check.oracles.tolerance` derives from float32
rounding (and ``rtol`` 0), or what the block states. The verdict names both the largest
difference and the element furthest beyond its own tolerance, which may be another one.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from formula_check.model import Array
from formula_check.results import Verdict, largest_index


def squeeze_leading(actual: Array, expected_ndim: int) -> Array:
    """Drop leading size-1 axes the oracle does not have (``(1, n, d)`` against ``(n, d)``)."""
    while actual.ndim > expected_ndim and actual.shape[0] == 1:
        actual = actual[0]
    return actual


def describe_shape(dims: Sequence[str], shape: Sequence[int]) -> str:
    """``(b, n, d_v) = (2, 5, 11)``, or just ``(2, 5, 11)`` when the ranks differ."""
    sizes = "(" + ", ".join(str(s) for s in shape) + ")"
    if len(dims) == len(shape):
        return f"({', '.join(dims)}) = {sizes}"
    return sizes


@dataclass(frozen=True)
class _Measured:
    """The numbers of a difference between arrays of one shape."""

    delta: Array
    """``|actual - expected|``, infinite where either side is NaN or Inf."""
    magnitude: Array
    """``|expected|``."""
    unjudged: Array | None
    """True where either side is NaN or Inf: such an element never passes. None when every
    value on both sides is finite (then so is every ``delta``)."""
    infinite: Array | None
    """True where ``delta`` is infinite; None where none is."""
    nonfinite: int
    expected_nonfinite: int
    largest: tuple[int, ...]
    max_abs: float
    max_rel: float
    scratch: Array
    """Room for one float64 array of the shape, which each judgement writes over."""


@dataclass(frozen=True)
class Difference:
    """What comparing ``actual`` with ``expected`` finds before any tolerance: the arrays
    (``expected`` as float64; ``actual`` as float64, or as the float32 it came as, whose every
    value float64 holds exactly), ``|Δ|``, where either side is not finite. Judging an output
    against its one-draw bound and then against its full tolerance measures it once (the far
    positions of an encoding are two million elements)."""

    actual: Array
    expected: Array
    measured: _Measured | None
    """None when the dtype kind or the shapes already fail the comparison."""

    @staticmethod
    def of(actual: Array, expected: Array) -> Difference:
        """Measure ``actual`` against ``expected`` (no tolerance yet)."""
        actual = np.asarray(actual)
        expected = np.asarray(expected, dtype=np.float64)
        if actual.dtype.kind not in "biuf" or actual.shape != expected.shape:
            return Difference(actual, expected, None)
        # float32 is widened exactly where it meets float64, value by value: no widened copy
        wide = actual if actual.dtype == np.float32 else np.asarray(actual, dtype=np.float64)
        # NaN and Inf are judged here, element by element, and said in the verdict: NumPy's
        # RuntimeWarnings about them (inf - inf, inf / inf, overflow) would only add noise,
        # with our own source lines, to the build log.
        with np.errstate(all="ignore"):
            delta = np.subtract(wide, expected, out=np.empty(expected.shape))
            np.abs(delta, out=delta)
            unjudged = infinite = None
            nonfinite = expected_nonfinite = 0
            if delta.size and not np.max(delta) < np.inf:  # a NaN or an Inf somewhere
                finite, expected_finite = np.isfinite(wide), np.isfinite(expected)
                np.copyto(delta, np.inf, where=~np.isfinite(delta))  # NaN: infinitely far off
                unjudged = ~(finite & expected_finite)
                infinite = np.isinf(delta)
                nonfinite = delta.size - int(np.count_nonzero(finite))
                expected_nonfinite = delta.size - int(np.count_nonzero(expected_finite))
            magnitude = np.abs(expected)
            # a relative error says nothing where the expected value is 0
            scratch = np.empty(expected.shape)
            scratch.fill(0.0)
            rel = np.divide(delta, magnitude, out=scratch, where=magnitude > 0)
            largest_rel = float(rel.max()) if rel.size else 0.0
        largest = largest_index(delta)
        measured = _Measured(
            delta,
            magnitude,
            unjudged,
            infinite,
            nonfinite,
            expected_nonfinite,
            largest,
            float(delta[largest]) if delta.size else 0.0,
            np.inf if np.isnan(largest_rel) else largest_rel,  # inf / inf: infinitely far off
            scratch,
        )
        return Difference(wide, expected, measured)

    def judged(
        self,
        name: str,
        dims: Sequence[str],
        atol: float | Array,
        rtol: float,
        *,
        how: str = "",
        regime: str = "",
    ) -> Verdict:
        """The verdict of this difference against ``atol + rtol * |expected|``."""
        actual, expected, measured = self.actual, self.expected, self.measured
        verdict = functools.partial(
            Verdict,
            name=name,
            dims=tuple(dims),
            expected_shape=expected.shape,
            actual_shape=actual.shape,
            rtol=rtol,
            atol=float(np.max(atol)),
            tolerance=how,
            regime=regime,
        )
        if actual.dtype.kind not in "biuf":
            return verdict(ok=False, problem=f"got a {actual.dtype} array, expected numbers")
        if measured is None:
            return verdict(ok=False, problem=_shape_problem(dims, expected.shape, actual.shape))
        delta = measured.delta
        with np.errstate(all="ignore"):
            allowed, plus = _allowed(atol, rtol, measured, expected.shape)
            within = np.less_equal(delta, allowed, out=np.empty(expected.shape, dtype=bool))
            if measured.unjudged is not None:
                np.logical_and(within, ~measured.unjudged, out=within)
            excess = np.maximum(allowed, 1e-300, out=measured.scratch)
            np.divide(delta, excess, out=excess)
            if measured.infinite is not None:
                np.copyto(excess, np.inf, where=measured.infinite)
        worst = largest_index(excess)
        n_bad = int(delta.size - np.count_nonzero(within))
        some = delta.size > 0
        return verdict(
            ok=n_bad == 0,
            max_abs=measured.max_abs,
            max_rel=measured.max_rel,
            worst_index=worst,
            max_index=measured.largest,
            worst_expected=float(expected[worst]) if some else 0.0,
            worst_actual=float(actual[worst]) if some else 0.0,
            worst_allowed=float(allowed[worst] + plus) if some else 0.0,
            used=float(excess[worst]) if some else 0.0,
            n_bad=n_bad,
            n_total=int(delta.size),
            nonfinite=measured.nonfinite,
            problem=_nonfinite_problem(measured.nonfinite, measured.expected_nonfinite),
        )


def _allowed(
    atol: float | Array, rtol: float, measured: _Measured, shape: tuple[int, ...]
) -> tuple[Array, float]:
    """``atol + rtol * |expected|``, broadcast to ``shape``, and what is still to be added to
    any one of its values. Where ``rtol * |expected|`` is +0 everywhere (``rtol`` 0, every
    expected value finite) and ``atol`` a float64 number or array, that sum is ``atol`` but
    for the sign of a zero, which no comparison sees: ``atol`` serves uncopied, and the one
    value the verdict reads gets its +0 added (``-0.0 + 0.0`` is ``0.0``)."""
    if not rtol and not measured.expected_nonfinite and np.asarray(atol).dtype == np.float64:
        return np.broadcast_to(atol, shape), 0.0
    relative = rtol * measured.magnitude if rtol or measured.expected_nonfinite else 0.0
    added: Array = np.broadcast_to(atol, shape) + relative
    return added, -0.0  # x + -0.0 is x, to the bit


def _finite_or_inf(values: Array) -> Array:
    """NaN (from inf - inf, inf / inf) counts as infinitely far off."""
    return np.where(np.isfinite(values), values, np.inf)


def _nonfinite_problem(in_result: int, in_expected: int) -> str:
    """A NaN or Inf on either side fails the check: say on which."""
    parts = [f"{in_result} NaN/Inf values in the result"] if in_result else []
    if in_expected:
        where = "the oracle's expected values"
        parts.append(
            f"{in_expected} in {where}" if parts else f"{in_expected} NaN/Inf values in {where}"
        )
    return "; ".join(parts)


def delta_array(actual: Array, expected: Array) -> Array | None:
    """``|actual - expected|`` as float32 for the where-they-differ heatmap, when the shapes
    agree: Inf where either side is NaN or Inf or the difference is beyond float32 (the
    heatmap marks those cells), and no RuntimeWarning on the way."""
    if np.shape(actual) != np.shape(expected):
        return None
    with np.errstate(all="ignore"):
        delta = np.abs(
            np.asarray(actual, dtype=np.float64) - np.asarray(expected, dtype=np.float64)
        )
        return _finite_or_inf(delta).astype(np.float32)


def _shape_problem(dims: Sequence[str], expected: tuple[int, ...], actual: tuple[int, ...]) -> str:
    got = "(" + ", ".join(str(s) for s in actual) + ")"
    hint = _transpose_hint(dims, expected, actual)
    return f"shape mismatch: expected {describe_shape(dims, expected)}, got {got}{hint}"


def _transpose_hint(dims: Sequence[str], expected: tuple[int, ...], actual: tuple[int, ...]) -> str:
    """Name the dims the code seems to have swapped, when the sizes say so unambiguously."""
    if (
        len(expected) != len(actual)
        or len(dims) != len(expected)
        or sorted(expected) != sorted(actual)
    ):
        return ""
    size_to_dim = {size: dim for dim, size in zip(dims, expected, strict=True)}
    if len(size_to_dim) != len(dims):
        return ""
    read = [size_to_dim[size] for size in actual]
    return f" — read as ({', '.join(read)})"
