"""How far float32 code may be from the float64 oracle: a tolerance derived per element.

Correct float32 code differs from the exact result by its rounding, and how much depends on
the computation: the length of each sum, the size of the values that meet in it, how far
along a sequence a position is. No fixed ``atol`` fits every size: 1e-5 lets an ε moved
outside a square root pass on small blocks and flags a correct tutorial-sized multi-head
layer. So the checker *measures* the rounding of the formula at hand:

1. the oracle runs in float64 (the reference) and in float32, the precision the code
   computes in, on the block's own arrays, and again on :data:`SAMPLES` - 1 copies of them
   moved by about one float32 ulp: each pair is a fresh draw of float32 rounding at (all but)
   the same point. Builtin oracles compute every other draw in a second usual formulation
   (:data:`DRAW_PARAM`): a softmax through ``logsumexp`` loses ``|logit|`` ulps on its
   largest weight, where the one that subtracts the maximum loses none;
2. the root mean square of an element's errors over those draws is its own rounding scale
   ``s``: it follows the element's size (an attention weight's error is the weight times its
   logit's) and its row (a sum that cancels keeps its terms' error). It is kept at least half
   of the row's scale (the RMS of the row's errors over that of its magnitudes, times the
   element's magnitude), so that a few lucky draws cannot make one element's tolerance tiny;
3. an element passes when ``|code - oracle| <= SPREAD * s + EPS32 * (|oracle| + mean)``:
   the second term is the rounding of the output itself, which no float32 code avoids.

``SPREAD`` covers what the draws cannot: the code sums in another order, uses other kernels
(oneDNN, Eigen, fused Keras einsums) or another formulation of the same formula (``exp`` of
a log instead of a power), and the largest of a million errors lies several scales out. Its
value is measured, not tuned per case: ``python bench/tolerance_model.py`` prints the largest
share of its tolerance that correct code used, over every builtin oracle, other formulations,
sizes up to n = 2048, d_model = 1024, d_ff = 4096 and ten seeds.

An oracle of sizes alone (positional encoding) has no inputs to move: its draws differ only
by formulation (where they do not differ at all, its one draw is used), so an element leans
on its row, twice the row's scale as its floor.

Most code is well within its tolerance, and the three further draws (six runs of the oracle)
cost more than the rest of the check: the first draw alone gives a tolerance the full one is
never below (see :func:`derive`), and only code beyond it is judged again with all draws.

An oracle that computes in float64 whatever it is given (a user's ``astype(np.float64)``)
gives no float32 sample; its blocks are judged with the fixed ``atol``/``rtol`` instead, and
the card says why. A block's own ``atol=`` or ``rtol=`` always wins.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from formula_check.lazy import numpy as np  # imported on first use
from formula_check.model import Array
from formula_check.results import BOUND_WORDS

EPS32 = 2.0**-23
"""The float32 machine epsilon (``np.finfo(np.float32).eps``, 2^-23): twice the largest
relative rounding of one result."""

SPREAD = 64.0
"""How many rounding scales correct code may be off by; see the module's text for how it is
measured (``bench/tolerance_model.py``)."""

DRAW_PARAM = "_draw"
"""The parameter that numbers an oracle's rounding draws (0 for the first). An oracle may
compute its odd draws in another usual formulation of its formula (a softmax through
``logsumexp``, frequencies through ``exp`` of a log), so that the rounding of the ways code
is written is among the draws, not only the rounding of one of them."""

DTYPE_PARAM = "_dtype"
"""The parameter that tells an oracle computing from sizes alone (positional encoding) which
float type to compute in: float64 for the reference, float32 for the rounding sample."""


@dataclass(frozen=True)
class Tolerance:
    """What an output's elements may differ by: ``|Δ| <= allowed + rtol * |expected|``."""

    allowed: Array | float
    rtol: float
    how: str
    """One line for the card: how the tolerance came about."""
    derived: bool


def fixed(atol: float, rtol: float, why: str) -> Tolerance:
    """The tolerance a block states (or the oracle's fallback), as given."""
    return Tolerance(atol, rtol, f"atol {atol:.1g}, rtol {rtol:.1g} ({why})", derived=False)


SAMPLES = 4
"""How many float32 runs of the oracle measure its rounding: the first on the block's own
inputs, the others on inputs moved by about one float32 ulp, each a fresh draw of rounding
at (all but) the same point. Their root mean square is each element's own rounding scale."""

Pair = tuple[Mapping[str, Array], Mapping[str, Array]]
"""One rounding sample: the oracle's outputs in float64 and in float32 on the same inputs."""


def rounding_samples(
    compute: Any,
    arrays: Mapping[str, Array],
    params: Mapping[str, Any],
    expected: Mapping[str, Array],
    seed: int,
    count: int = SAMPLES,
    first: Pair | None = None,
    *,
    singles: Singles | None = None,
) -> list[Pair]:
    """Up to ``count`` rounding samples of the oracle on ``arrays`` (float32-exact float64
    arrays), the first on those very arrays (``first``, when already taken: it draws nothing
    from the generator, so the others are the same either way); none where its float32 run
    raises. ``singles``: the float32 casts of the first draw's arrays, kept by the caller
    for its next calls with some of the same arrays (the weights of each input regime of a
    block); only for an oracle known never to write into what it is given."""
    rng = np.random.default_rng([seed, 32])
    samples: list[Pair] = [first] if first is not None else []
    for index in range(len(samples), count):
        exact: Mapping[str, Array] | None = expected
        moved = arrays
        drawn = {**params, DRAW_PARAM: index}
        if index:
            moved = {name: _moved(value, rng) for name, value in arrays.items()}
            if any(moved[n] is not arrays[n] for n in arrays):  # else: the same reference
                exact = _run(compute, moved, drawn, np.float64)
        single = _run(compute, moved, drawn, np.float32, singles if not index else None)
        if exact is None or single is None:
            break
        if index and _same(single, samples[0][1]) and all(moved[n] is arrays[n] for n in arrays):
            break  # nothing moved, and the oracle has one way only: one sample is all
        samples.append((exact, single))
    return samples


def _same(one: Mapping[str, Array], other: Mapping[str, Array]) -> bool:
    return one.keys() == other.keys() and all(_equal(one[k], other[k]) for k in one)


def _equal(one: Array, other: Array) -> bool:
    """``np.array_equal``: an array is equal to itself unless it holds a NaN, which the
    largest value of a float array is when it holds one; no array of flags is made."""
    if one is other and isinstance(one, np.ndarray) and one.dtype.kind == "f":
        return not one.size or not np.isnan(np.max(one))
    return np.array_equal(np.asarray(one), np.asarray(other))


def _moved(value: Array, rng: np.random.Generator) -> Array:
    """A float array moved by about one float32 ulp, still exact in float32."""
    if not _is_float(value):
        return value
    step = 1 + EPS32 * rng.standard_normal(np.shape(value))
    result: Array = (value * step).astype(np.float32).astype(np.float64)
    return result


Singles = dict[int, tuple[Array, Array]]
"""Float32 casts of float64 arrays, by the float64 array's ``id`` (kept with it, so that the
id cannot be another array's)."""


def _run(
    compute: Any,
    arrays: Mapping[str, Array],
    params: Mapping[str, Any],
    dtype: type,
    singles: Singles | None = None,
) -> Mapping[str, Array] | None:
    cast = {name: _cast(value, dtype, singles) for name, value in arrays.items()}
    try:
        with np.errstate(all="ignore"):
            return dict(compute(cast, {**params, DTYPE_PARAM: dtype}))
    except Exception:  # the reference itself ran; a failure here only loses a sample
        return None


def _cast(value: Any, dtype: type, singles: Singles | None) -> Any:
    """A float array in ``dtype`` (anything else as it is): cast once into ``singles``."""
    if not _is_float(value):
        return value
    if singles is None:
        return value.astype(dtype)
    found = singles.get(id(value))
    if found is None or found[0] is not value:
        found = singles[id(value)] = (value, value.astype(dtype))
    return found[1]


def derive(
    name: str,
    expected: Array,
    samples: Sequence[Pair],
    *,
    bound: bool = False,
) -> Tolerance | None:
    """The derived tolerance of output ``name``; ``None`` when the samples cannot give one
    (none was taken, or the oracle's float32 run gave float64: it upcasts somewhere).

    ``bound``: from the first draw alone, a tolerance that the full one (all
    :data:`SAMPLES` draws) is never below: an element's root mean square over at most four
    draws is at least half its first draw's error, and so is its row's scale, so
    ``SPREAD * max(e / 2, row scale * magnitude / 4)`` bounds it. Code within that bound is
    within the full tolerance, and its other draws need not be computed."""
    return Derivation(name, expected).tolerance(samples, bound=bound)


class Derivation:
    """The derived tolerance of one output, as :func:`derive` gives it, for a judge that asks
    for the one-draw bound and then for the full tolerance: what both share (the oracle's
    values, their magnitudes, each draw's errors) is computed once. The numbers are those of
    :func:`derive`, to the bit: each is the same operations on the same arrays."""

    def __init__(self, name: str, expected: Array, size: Array | None = None) -> None:
        """``size``: ``|expected|``, when the caller has it already (the comparison's)."""
        self.name = name
        self.exact = np.asarray(expected, dtype=np.float64)
        self._size = size
        self._errors: list[tuple[Pair, _Error | None]] = []
        self._reference: _Reference | None = None

    def tolerance(self, samples: Sequence[Pair], *, bound: bool = False) -> Tolerance | None:
        """The tolerance from ``samples`` (see :func:`derive`)."""
        errors = []
        for pair in samples:
            error = self._error(pair)
            if error is None:
                return None
            errors.append(error)
        if not errors:
            return None
        known = self._finite_reference()
        if known is None or not all(error.finite for error in errors):
            return None
        magnitude = known.magnitude
        with np.errstate(all="ignore"):
            if bound:
                first = errors[0]
                row = _row_scale(first.value, magnitude, known.sums, first.squared)
                scale = np.multiply(row, magnitude, out=np.empty(magnitude.shape))
                scale /= 4
                allowed = np.divide(first.value, 2, out=np.empty(magnitude.shape))  # its own
            else:
                allowed = _root_mean_square(errors)
                # draws at one and the same point (an oracle of sizes alone: only its
                # formulations differ) say little of any one element: lean on its row, twice
                # its scale
                moved = any(not _same(reference, samples[0][0]) for reference, _ in samples[1:])
                squares = np.square(allowed, out=np.empty(allowed.shape))
                row = _row_scale(allowed, magnitude, known.sums, squares)
                scale = np.multiply(row, magnitude, out=squares)  # the squares are summed
                scale *= 0.5 if moved else 2.0
            np.maximum(allowed, scale, out=scale)  # the element's own scale, or its row's
            np.multiply(scale, SPREAD, out=allowed)
            allowed += known.rounding
        low, high = float(np.min(scale)), float(np.max(scale))
        spread = f"{low:.2g}" if np.isclose(low, high, rtol=0.5) else f"{low:.2g} to {high:.2g}"
        runs = (
            f"{BOUND_WORDS}, from one float32 run of the oracle"
            if bound
            else f"measured on {len(errors)} float32 runs of the oracle"
        )
        how = f"derived: {SPREAD:g} × float32 rounding ({spread}, {runs}) + float32 ulp"
        return Tolerance(allowed[()] if allowed.ndim == 0 else allowed, 0.0, how, derived=True)

    def _error(self, pair: Pair) -> _Error | None:
        """The error of one draw's float32 run; None when it has no float32 value of this
        output in the oracle's shape."""
        for seen, error in self._errors:
            if seen is pair:
                return error
        reference, single = pair
        error = None
        if self.name in single and self.name in reference:
            value = np.asarray(single[self.name])
            if value.dtype == np.float32 and value.shape == self.exact.shape:
                error = _Error.of(value, np.asarray(reference[self.name], np.float64))
        self._errors.append((pair, error))
        return error

    def _finite_reference(self) -> _Reference | None:
        """Each element's magnitude (:func:`_magnitude`), the sums of its square, and the
        rounding of the output itself (``EPS32 * (|y| + mean |y|)``); None when the oracle's
        values are not all finite."""
        if self._reference is None:
            exact = self.exact
            with np.errstate(all="ignore"):
                size = np.abs(exact) if self._size is None else self._size
                if not _all_finite(size):
                    return None
                magnitude = _magnitude(exact, size)
                rounding = np.add(size, np.mean(size), out=np.empty(size.shape))
                rounding *= EPS32
                self._reference = _Reference(magnitude, _Sums.of(np.square(magnitude)), rounding)
        return self._reference


@dataclass(frozen=True)
class _Sums:
    """The sums :func:`_row_scale` takes of squares: over the whole array, and row by row."""

    whole: Array
    rows: Array

    @staticmethod
    def of(squares: Array) -> _Sums:
        if squares.ndim == 0:
            return _Sums(squares, squares)
        return _Sums(np.sum(squares), np.sum(squares, axis=-1, keepdims=True))


@dataclass(frozen=True)
class _Reference:
    """What every tolerance of one output takes from the oracle's values alone."""

    magnitude: Array
    sums: _Sums
    """Of the magnitudes' squares."""
    rounding: Array


def _all_finite(size: Array) -> bool:
    """Whether every element of ``size`` (``|y|``, never negative) is finite: its largest is
    below infinity (NaN, the largest of any array holding one, is not), with no array of
    flags made."""
    return not size.size or bool(np.max(size) < np.inf)


@dataclass(frozen=True)
class _Error:
    """``|float32 run - float64 run|`` of one draw, elementwise; its square when asked."""

    value: Array
    finite: bool

    @functools.cached_property
    def squared(self) -> Array:
        return np.square(self.value)

    @staticmethod
    def of(single: Array, reference: Array) -> _Error:
        with np.errstate(all="ignore"):
            # float32 - float64 is computed in float64, each float32 value widened exactly,
            # as astype(float64) widens it, without the widened copy
            value = np.subtract(single, reference, out=np.empty(reference.shape))
            np.abs(value, out=value)
            return _Error(value, _all_finite(value))


def _root_mean_square(errors: Sequence[_Error]) -> Array:
    """Each element's root mean square over the draws, as ``sqrt(mean(stack(squares),
    axis=0))`` gives it, to the bit: that mean adds the draws' squares one after another
    (the first two in either order: a sum of two does not depend on it), then divides by
    their count. Neither the stack nor each draw's square is kept: the second draw's is
    made in place of the sum, the others' in one spare array."""
    first = errors[0]
    total = np.empty(np.shape(first.value))  # an array, also for a single number
    if len(errors) > 1:
        np.square(errors[1].value, out=total)
        total += first.squared
    else:
        total[...] = first.squared
    spare = np.empty(total.shape) if len(errors) > 2 else None
    for error in errors[2:]:
        assert spare is not None
        total += np.square(error.value, out=spare)
    total /= len(errors)
    np.sqrt(total, out=total)
    return total


def _magnitude(exact: Array, size: Array | None = None) -> Array:
    """How large each element is against its row: ``|y| + mean |y|`` over the last axis. The
    rounding of an element grows with it (the error of an attention weight is the weight
    times that of its logit), and with the row (a sum that cancels keeps its terms' error).
    ``size``: ``|y|``, when already known."""
    size = np.abs(exact) if size is None else size
    if exact.ndim == 0:
        return size
    result: Array = np.add(size, np.mean(size, axis=-1, keepdims=True), out=np.empty(size.shape))
    return result


def _row_scale(
    error: Array,
    magnitude: Array,
    magnitudes: _Sums | None = None,
    errors2: Array | None = None,
) -> Array:
    """The relative rounding of each row: the root mean square of its errors over that of
    its magnitudes (so the many negligible weights of a nearly one-hot softmax row do not
    dilute the error of the few that matter), at least half the whole array's; broadcastable
    to ``error``'s shape. ``magnitudes``: the sums of the magnitudes' squares, and
    ``errors2`` the errors' squares, when already known."""
    with np.errstate(all="ignore"):
        if error.ndim == 0:
            single: Array = np.nan_to_num(error / magnitude, nan=0.0, posinf=0.0)
            return single
        errors2 = np.square(error) if errors2 is None else errors2
        sums = _Sums.of(np.square(magnitude)) if magnitudes is None else magnitudes
        whole = float(np.nan_to_num(np.sqrt(np.sum(errors2) / sums.whole)))
        rows = np.sqrt(np.sum(errors2, axis=-1, keepdims=True) / sums.rows)
        result: Array = np.maximum(np.nan_to_num(rows, nan=0.0, posinf=0.0), whole / 2)
        return result


def _is_float(value: Any) -> bool:
    return isinstance(value, np.ndarray) and value.dtype.kind == "f"
