"""The oracle's side of a judgement, and each output's verdict against it: the oracle's
values on a call's arrays and its float32 rounding draws (:class:`Reference`, computed once
and shared by the calls judged against them), the tolerance each output gets, where and by how
much the code's values differ, and the words a failed verdict carries (an overflow, a hint).

Pure NumPy: runs in the build process, never touches TensorFlow.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from formula_check.checking.compare import Difference, squeeze_leading
from formula_check.errors import OracleError, SpecError
from formula_check.model import Array
from formula_check.oracles.tolerance import (
    SAMPLES,
    Derivation,
    Pair,
    Singles,
    Tolerance,
    fixed,
    rounding_samples,
)
from formula_check.planning.plan import Plan
from formula_check.results import Verdict

HEADS = ("b", "h")
"""The leading axes of an output that code may fold into one (heads into the batch)."""


def unfolded(actual: Array, expected: Array, dims: Sequence[str]) -> Array:
    """Heads folded into the batch axis, as a textbook's multi-head attention keeps its
    weights (``(b * h, n, m)``), read as ``(b, h, n, m)``, batch-major, for an output whose
    axes start ``b, h``: code that folds them the other way round differs, and is caught.
    Any other shape is compared as it is."""
    want = np.shape(expected)
    if (
        tuple(dims[:2]) == HEADS
        and actual.ndim == len(want) - 1 >= 1
        and actual.shape[0] == want[0] * want[1]
        and actual.shape[1:] == want[2:]
        and want[1] > 1
    ):
        return actual.reshape(want)
    return actual


@dataclasses.dataclass
class Reference:
    """The oracle's side of judged calls: the arrays it computes on (inputs, weights, mask),
    the formula's parameters, the float32 casts the block's rounding draws share (for an
    oracle of ours, which never writes into its arrays; see :mod:`..oracles.tolerance`). Its outputs
    and rounding draws are computed when first needed, then shared by every call judged
    against them (the graph's and the eager call on the same inputs)."""

    plan: Plan
    arrays: Mapping[str, Array]
    params: Mapping[str, Any]
    singles: Singles | None
    draws: dict[int, list[Pair]] = dataclasses.field(default_factory=dict)

    @functools.cached_property
    def expected(self) -> dict[str, Array]:
        """The oracle's outputs on these arrays; a failure is the oracle's, named."""
        return expected_values(self.plan, self.arrays, self.params)

    def samples(self, count: int) -> list[Pair]:
        """The oracle's first ``count`` rounding draws (none where the tolerance is stated)."""
        if tolerance_stated(self.plan):
            return []
        if count not in self.draws:
            taken = next(iter(self.draws.get(1, [])), None)  # the first, if the bound took it
            compute, seed = self.plan.oracle.compute, self.plan.spec.seed
            given = (self.arrays, self.params, self.expected)
            drawn = rounding_samples(compute, *given, seed, count, taken, singles=self.singles)
            self.draws[count] = drawn
        return self.draws[count]


EXP_LIMIT = float(np.log(np.finfo(np.float32).max))
"""88.72: exp of any larger float32 is infinite."""


def overflowed(
    plan: Plan, verdict: Verdict, standard: Sequence[Verdict], reference: Reference
) -> Verdict:
    """``verdict`` on a call, saying so where the code overflowed float32 there: NaN or Inf
    in its result where the oracle's values are all finite, and none in the same output on
    the standard inputs. Where the call's inputs are past :data:`EXP_LIMIT` themselves,
    exp of them is infinite in float32, and the usual cure is said."""
    inputs = reference.arrays
    want = reference.expected.get(verdict.name)
    clean = [v for v in standard if v.name == verdict.name and not v.regime and not v.nonfinite]
    if not verdict.nonfinite or want is None or not clean or not np.all(np.isfinite(want)):
        return verdict
    largest = max(
        (_largest(np.asarray(inputs[t.name])) for t in plan.oracle.inputs if t.name in inputs),
        default=0.0,
    )
    if largest > EXP_LIMIT:
        said = (
            f"overflows float32 on inputs of about ±{_about(largest)} (exp is infinite past "
            f"{EXP_LIMIT:.1f}); subtract the row maximum before exp"
        )
    else:
        said = "overflows float32 on these inputs, where the oracle's values are all finite"
    return dataclasses.replace(verdict, problem=f"{verdict.problem}: {said}")


def _largest(values: Array) -> float:
    """The largest finite ``|value|`` (0 when there is none)."""
    magnitude = np.abs(values, dtype=np.float64)
    return float(np.max(magnitude, where=np.isfinite(magnitude), initial=0.0))


def _about(value: float) -> str:
    """``value`` to two significant figures, as a plain number (``160``, ``0.25``)."""
    return f"{float(f'{value:.2g}'):g}"


def expected_values(
    plan: Plan, arrays: Mapping[str, Array], params: Mapping[str, Any]
) -> dict[str, Array]:
    """The oracle's outputs on ``arrays``; a failure is the oracle's, named."""
    oracle = plan.oracle
    try:
        return dict(oracle.compute(arrays, params))
    except OracleError:
        raise
    except Exception as exc:
        raise OracleError(
            f"oracle {oracle.name!r} failed on these arrays: {type(exc).__name__}: {exc}",
            plan.spec.location,
        ) from exc


def tolerance_stated(plan: Plan) -> bool:
    """Whether the block or its oracle states the tolerance (none is derived from rounding)."""
    spec, oracle = plan.spec, plan.oracle
    return spec.atol is not None or spec.rtol is not None or oracle.tolerance is not None


def still_computes(
    plan: Plan, arrays: Mapping[str, Array], params: Mapping[str, Any], first: Mapping[str, Array]
) -> None:
    """An oracle of one's own, called twice more on the block's arrays after every other call
    judging made, must give what its first call gave each time. One that keeps state between
    calls (a counter, a cache, a list it appends to) computes another function on each: its
    rounding draws would then disagree by what the state changed, and the tolerance derived
    from them would grow until wrong code fits (an adversarial review made ``3 x`` pass an
    oracle of ``2 x`` that alternated between two scales). Two calls in a row catch any
    state that flips or grows; an oracle written to hide a longer cycle is not looked for
    (it is the project's own code). Not asked where the tolerance is stated: nothing is then
    derived from the oracle's own runs (a Monte Carlo oracle with an ``atol`` is fine)."""
    calls = (expected_values(plan, arrays, params), expected_values(plan, arrays, params))
    for name, value in first.items():
        numbers = _numbers(value)
        if numbers is None:  # not an array of numbers: nothing a check compares or draws
            continue
        others = [_numbers(again.get(name)) for again in calls]
        if any(other is None or not _identical(numbers, other) for other in others):
            raise OracleError(
                f"oracle {plan.oracle.name!r} computes another {name!r} when called again on "
                "the same arrays: it keeps state between calls (a counter, a cache, a global "
                "it changes) or draws random numbers of its own, so the tolerance derived from "
                "its float32 runs would measure that, not rounding. Compute from the arguments "
                "alone, or state the block's atol/rtol",
                plan.spec.location,
            )


def _numbers(value: object) -> Array | None:
    """``value`` as an array of numbers, or None (an object, a ragged list, nothing)."""
    if value is None:
        return None
    try:
        array = np.asarray(value)
    except (ValueError, TypeError):
        return None
    return array if array.dtype.kind in "biufc" else None


def _identical(first: Array, second: Array) -> bool:
    same = first.shape == second.shape and first.dtype == second.dtype
    return same and bool(np.array_equal(first, second, equal_nan=True))


def _tolerance(
    plan: Plan,
    name: str,
    derivation: Derivation,
    samples: Sequence[Pair],
    sizes: Mapping[str, Any],
    *,
    bound: bool = False,
) -> Tolerance:
    """The block's own ``atol``/``rtol`` if it states one; else the oracle's own rule if it
    has one; else the tolerance derived from float32 rounding (see :mod:`..oracles.tolerance`)."""
    spec, oracle = plan.spec, plan.oracle
    if spec.atol is not None or spec.rtol is not None:
        atol = spec.atol if spec.atol is not None else oracle.atol
        rtol = spec.rtol if spec.rtol is not None else oracle.rtol
        return fixed(atol, rtol, "stated by the block")
    if oracle.tolerance is not None:
        allowed = oracle.tolerance(
            name, {k: v for k, v in sizes.items() if isinstance(v, int)}, oracle.atol
        )
        return Tolerance(allowed, oracle.rtol, f"the {oracle.name} oracle's own rule", False)
    derived = derivation.tolerance(samples, bound=bound)
    if derived is not None:
        return derived
    return fixed(oracle.atol, oracle.rtol, UNMEASURED)


UNMEASURED = (
    "fixed: float32 rounding could not be measured, because the oracle's float32 run failed "
    "or gave float64 (see Verdicts: tolerances)"
)


def output_verdicts(
    plan: Plan,
    names: Sequence[str],
    outputs: Sequence[Array | None],
    reference: Reference,
    regime: str = "",
    widened: Sequence[Array | None] = (),
) -> tuple[list[Verdict], dict[str, Array]]:
    """Each output returned (not None) against the oracle's (``reference``'s); ``widened``:
    what the artifact's own rounding explains of each output (an int8 model's), added to its
    tolerance."""
    spec, oracle = plan.spec, plan.oracle
    stated = tolerance_stated(plan)
    expected, params = reference.expected, reference.params
    verdicts, shown = [], {}
    for place, (name, actual) in enumerate(zip(names, outputs, strict=False)):
        if name in {"_", ""} or actual is None:
            continue
        extra = widened[place] if place < len(widened) else None
        if name not in expected:
            raise SpecError(
                f"returns: oracle {oracle.name!r} has no output {name!r}", spec.location
            )
        want = expected[name]
        dims = oracle.tensor(name).dims if any(t.name == name for t in oracle.outputs) else ()
        got = unfolded(squeeze_leading(np.asarray(actual), np.ndim(want)), want, dims)
        # measured once, judged against one tolerance or two
        difference = Difference.of(got, want)
        size = difference.measured.magnitude if difference.measured is not None else None
        derivation = Derivation(name, want, size)  # |oracle|: measured once, for both
        # the full tolerance takes four float32 runs of the oracle and their references; the
        # bound from the first is never above it, and enough for code within it
        verdict = None
        if BOUND_FIRST:
            first = _tolerance(plan, name, derivation, reference.samples(1), params, bound=True)
            verdict = _judged(name, difference, dims, _widen(first, extra, plan), regime)
        if verdict is None or (not verdict.ok and not stated):
            full = _tolerance(plan, name, derivation, reference.samples(SAMPLES), params)
            verdict = _judged(name, difference, dims, _widen(full, extra, plan), regime)
        if not verdict.ok and not verdict.problem:
            verdict = dataclasses.replace(verdict, hint=_hint(plan, name, got, want))
        verdicts.append(verdict)
        shown[name] = got
    return verdicts, shown


def _widen(tolerance: Tolerance, extra: Array | None, plan: Plan) -> Tolerance:
    """``tolerance`` plus what an artifact's own rounding explains, element by element."""
    if extra is None:
        return tolerance
    how = f"{tolerance.how} {plan.artifact.get('rounding', '+ the artifact rounding')}"
    return dataclasses.replace(tolerance, allowed=tolerance.allowed + np.asarray(extra), how=how)


BOUND_FIRST = True
"""Judge first against the bound one rounding draw gives (see :func:`..oracles.tolerance.derive`).
``bench/tolerance_model.py`` turns it off to measure every check against its full tolerance."""


def _judged(
    name: str,
    difference: Difference,
    dims: Sequence[str],
    tolerance: Tolerance,
    regime: str,
) -> Verdict:
    return difference.judged(
        name, dims, tolerance.allowed, tolerance.rtol, how=tolerance.how, regime=regime
    )


HALVES = (
    "the code's values are the formula's with every sine first and every cosine after (the "
    "halves layout, concatenated, as the TensorFlow tutorial builds it); the formula "
    "interleaves them, sines in even columns and cosines in odd ones: interleave them in the "
    'code, or, if the halves are meant, state them: params="layout=halves", with a formula '
    "written in halves"
)


def _hint(plan: Plan, name: str, actual: Array, expected: Array) -> str:
    """Where a known mistake explains the difference, say so."""
    interleaved = plan.params.get("layout", "interleaved") == "interleaved"
    if plan.oracle.name == "positional_encoding" and interleaved and np.ndim(expected) >= 2:
        actual = np.asarray(actual, dtype=np.float64)
        halves = np.concatenate([expected[..., 0::2], expected[..., 1::2]], axis=-1)
        if actual.shape == halves.shape and np.max(np.abs(actual - halves), initial=0.0) < 1e-3:
            return HALVES
    return ""


def unmatched(name: str, problem: str) -> Verdict:
    """An output the code did not return where the block says it does: failed, no shapes."""
    return Verdict(
        name=name, ok=False, dims=(), expected_shape=(), actual_shape=(), problem=problem
    )
