"""Judge a worker's answer against the oracle: verdicts, shapes, timings, heatmap arrays.

Pure NumPy: runs in the calling process, never touches TensorFlow.
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from .compare import compare, delta_array, squeeze_leading
from .errors import OracleError, SpecError
from .formula import judge_formula
from .model import (
    Array,
    CheckResult,
    Environment,
    Location,
    ShapeInfo,
    SnippetFailure,
    Status,
    SweepPoint,
    TimingStats,
    Verdict,
    frozen_map,
)
from .oracles import Oracle
from .planning import Plan
from .replies import CheckReply, SnippetFailed, TimingResult
from .tolerance import SAMPLES, Pair, Tolerance, derive, fixed, rounding_samples

_PHASES = {
    "call": "",
    "load": "",
    "entry": "looking up the entry",
    "import": "importing the module",
    "construct": "constructing the layer",
    "output": "reading the outputs",
    "timing": "timing",
}


def snippet_failure(plan: Plan, failed: SnippetFailed, root: str) -> SnippetFailure:
    """The snippet's exception, located on the page (inline) or in its file."""
    snippet = plan.spec.snippet
    line = failed.line
    location: Location | None = None
    if line and snippet.origin == "inline":
        location = Location(snippet.location.path, snippet.line_offset + line)
    elif line and snippet.origin == "file":
        location = Location(snippet.location.path, line)
    elif line and failed.file:
        path = failed.file
        location = Location(path[len(root) + 1 :] if path.startswith(root + "/") else path, line)
    phase = failed.phase
    regime = phase.removeprefix("regime:") if phase.startswith("regime:") else ""
    phase = f"running on the {regime} inputs" if regime else _PHASES.get(phase, phase)
    message = failed.message
    if phase:
        message = f"{message} (while {phase})"
    return SnippetFailure(failed.type, message, location, failed.traceback)


def evaluate(
    plan: Plan,
    reply: CheckReply | Mapping[str, Any],
    arrays: Mapping[str, Array],
    env: Environment,
) -> CheckResult:
    """Compare the code's outputs with the oracle's and build the result. ``reply`` may also
    be the reply's header, as a worker's ``run_check`` gives it (tests and benches call it so)."""
    if not isinstance(reply, CheckReply):
        reply = CheckReply.decode(reply)
    spec, oracle = plan.spec, plan.oracle
    outputs = [arrays[f"out/{i}"] for i in range(reply.outputs)]
    unused = [_unused(plan, name) for name in reply.unused_weights]
    if unused:  # the oracle cannot even be evaluated without those weights
        return CheckResult(
            block_id=spec.block_id,
            location=spec.location,
            oracle=oracle.name,
            status=Status.MISMATCH,
            expect=spec.expect,
            verdicts=tuple(unused),
            environment=env,
            stdout=reply.stdout,
        )
    weights, read_params = _weights(plan, reply, arrays)
    params = dict(plan.params)  # the formula's: what the code says of them is checked below
    oracle_arrays = {**plan.inputs, **weights}
    if plan.keep is not None:
        oracle_arrays["mask"] = plan.keep
    expected = _expected(plan, oracle_arrays, params)
    names = _output_names(plan, len(outputs), reply.output_keys)
    verdicts, shown = _verdicts(plan, names, outputs, expected, oracle_arrays, params)
    pictured = (shown, expected)
    skipped = dict(reply.regimes_skipped)
    for regime in plan.regimes:
        if regime.name in skipped:
            continue
        grown = {k: v * regime.weight_scale for k, v in weights.items()}
        inputs = {**oracle_arrays, **grown, **regime.inputs}
        sizes = {**params, **regime.sizes}
        got = [arrays.get(f"{regime.prefix}out/{i}") for i in range(len(outputs))]
        wanted = _expected(plan, inputs, sizes)
        more, seen = _verdicts(
            plan, names, [g for g in got if g is not None], wanted, inputs, sizes, regime.name
        )
        if dict(regime.sizes) != dict(plan.sizes) and any(
            v.actual_shape != v.expected_shape for v in more
        ):
            # at sizes of its own, code that stops at a maximum length cannot be judged there
            shapes = ", ".join(f"{v.name} {v.actual_shape}" for v in more if v.problem)
            skipped[regime.name] = f"the code returned {shapes} at these sizes"
            continue
        if all(v.ok for v in verdicts) and not all(v.ok for v in more):
            pictured = (seen, wanted)  # the heatmaps show the first inputs where it differs
        verdicts += more
    checked = [_param_check(plan, name, value) for name, value in read_params.items()]
    verdicts += [verdict for verdict, _ in checked if verdict is not None]
    formula = judge_formula(spec, oracle_arrays, params)
    code_ok = bool(verdicts) and all(v.ok for v in verdicts)
    status = Status.VERIFIED if code_ok and not (formula and formula.failed) else Status.MISMATCH
    notes = (
        _notes(plan, names, outputs, reply.output_dtypes, reply.output_keys)
        + [note for _, note in checked if note]
        + _unmapped_notes(plan, reply)
        + blind_spots(plan)
        + _untraced(reply.timings)
        + _regime_notes(plan, skipped)
        + _tolerance_notes(verdicts)
    )
    timings = tuple(_timings(reply.timings))
    if spec.timing.enabled:
        timings += (_oracle_timing(plan, oracle_arrays, params),)
    return CheckResult(
        block_id=spec.block_id,
        location=spec.location,
        oracle=oracle.name,
        status=status,
        expect=spec.expect,
        verdicts=tuple(verdicts),
        message="" if verdicts else "the code returned nothing to compare",
        shapes=_shapes(plan, weights, names, outputs),
        timings=timings,
        environment=env,
        arrays=frozen_map(_heatmap_arrays(plan, pictured[1], pictured[0], verdicts)),
        sweep=_sweep(reply.timings),
        notes=tuple(notes),
        stdout=reply.stdout,
        formula=formula,
    )


def _weights(
    plan: Plan, reply: CheckReply, arrays: Mapping[str, Array]
) -> tuple[dict[str, Array], dict[str, Any]]:
    """Weights the oracle uses: generated ones for functions, the layer's own otherwise."""
    oracle, spec = plan.oracle, plan.spec
    if reply.kind == "function":
        if spec.weights and not spec.weights_from_page:
            raise SpecError(
                "weights: a weight map says where a layer keeps its weights, but this code is "
                "a function: it is given the weights as arguments, so drop weights=",
                spec.location,
            )
        return dict(plan.weights), {}
    read = {key[2:]: value for key, value in arrays.items() if key.startswith("w/")}
    weights: dict[str, Array] = {}
    scalars: dict[str, float] = {}
    declared = {t.name: t for t in oracle.weights}
    for name, value in read.items():
        if name not in declared:
            if name not in plan.params:
                raise SpecError(
                    f"weights: {name!r} is not a weight or parameter of oracle {oracle.name!r}",
                    spec.location,
                )
            stated = plan.params[name]
            number = np.ndim(value) == 0 and np.asarray(value).dtype.kind in "iuf"
            if not number or isinstance(stated, (str, bool)):
                raise SpecError(
                    f"weights: {name!r} is a parameter of oracle {oracle.name!r}; only a "
                    "number can be read from the layer and checked against the formula's (the "
                    f"layer's is {_kind_of(value)}, the formula's {stated!r})",
                    spec.location,
                )
            scalars[name] = float(value)
            continue
        weights[name] = _fit(
            name,
            np.asarray(value, dtype=np.float64),
            declared[name].shape(plan.sizes),
            spec.location,
        )
    defaulted = []
    for name, tensor in declared.items():
        if name not in weights:
            if not tensor.optional:
                raise SpecError(
                    f"weights: the layer's {name!r} is needed by oracle {oracle.name!r}; "
                    f'map it, e.g. weights="{name}=attribute.path"',
                    spec.location,
                )
            weights[name] = np.full(tensor.shape(plan.sizes), tensor.default)
            defaulted.append(f"{name} = {tensor.default:g}")
    unmapped = _described(reply.unmapped_weights)
    if defaulted and unmapped:  # the code may ignore what the oracle assumed: no one can tell
        raise SpecError(
            f"weights: the layer has trainable weights the weight map does not name "
            f"({unmapped}), and oracle {oracle.name!r} took its own {', '.join(defaulted)} in "
            "their place, so the check cannot tell whether the code applies them: map them, "
            f'e.g. weights="{_map_example(oracle)}"',
            spec.location,
        )
    return weights, scalars


def _kind_of(value: Array) -> str:
    array = np.asarray(value)
    return f"an array of shape {array.shape}" if array.ndim else f"a {array.dtype.name} value"


def _described(unmapped: Sequence[Sequence[Any]]) -> str:
    return ", ".join(f"{name} {tuple(shape)}" for name, shape in unmapped)


def _map_example(oracle: Oracle) -> str:
    """``gamma=attribute.path beta=attribute.path``: a map naming each of the oracle's weights."""
    return " ".join(f"{t.name}=attribute.path" for t in oracle.weights)


def blind_spots(plan: Plan) -> list[str]:
    """What these sizes and this mask cannot tell apart. Two dims of one size let code that
    swaps them (or scales by the wrong one) pass; a size of 1 hides an operation over the
    wrong axis; a mask that hides nothing lets code that ignores it pass. Said on the card,
    since a verdict is only as strong as the case it was run on."""
    notes = []
    by_size: dict[int, list[str]] = {}
    # a causal mask and self-attention make the queries the keys: n = m is the formula's own
    square = plan.spec.mask in {"causal", "both"} or plan.params.get("variant") == "self"
    for dim, size in plan.sizes.items():
        if not (square and dim == "m" and plan.sizes.get("n") == size):
            by_size.setdefault(size, []).append(dim)
    for size, dims in sorted(by_size.items()):
        if size == 1:
            notes.append(
                f"{' = '.join(dims)} = 1: a size of 1 hides code that works along the wrong "
                "axis there (a softmax, a mask, a transpose); give it a size above 1"
            )
        elif len(dims) > 1:
            notes.append(
                f"{' = '.join(dims)} = {size}: code that mixes up {' and '.join(dims)} cannot "
                "be told apart at these sizes; give them different sizes"
            )
    if plan.keep is not None and bool(np.all(plan.keep)):
        notes.append(
            f"the {plan.spec.mask} mask hides nothing at these sizes, so code that ignores it "
            "cannot be told apart"
        )
    return notes


def _unmapped_notes(plan: Plan, reply: CheckReply) -> list[str]:
    """Trainable weights of the layer outside the formula: moved before the comparison, so a
    term the formula does not have shows up as a difference."""
    unmapped = _described(reply.unmapped_weights)
    if not unmapped:
        return []
    moved = "moved by noise before the comparison" if plan.spec.perturb_weights else "not moved"
    return [f"trainable weights outside the weight map: {unmapped} ({moved})"]


def _param_check(plan: Plan, name: str, value: float) -> tuple[Verdict | None, str]:
    """A parameter the weight map reads from the layer (its ``epsilon``) is checked against
    the formula's, the page's ``params=`` or the oracle's default; it never replaces it, or a
    layer built with the wrong constant would verify itself. A failing verdict, or a note."""
    stated = float(plan.params[name])
    source = "params=" if name in plan.spec.params else "the oracle's default"
    if math.isclose(value, stated, rel_tol=1e-5, abs_tol=0.0):
        return None, f"{name} read from the layer: {value:g}, as the formula says ({source})"
    return Verdict(
        name=name,
        ok=False,
        dims=(),
        expected_shape=(),
        actual_shape=(),
        problem=f"the layer's {name} is {value:g}, the formula's {stated:g} ({source})",
    ), ""


def _fit(name: str, value: Array, shape: tuple[int, ...], where: Location) -> Array:
    if value.shape == shape:
        return value
    if value.ndim != len(shape) and value.size == int(np.prod(shape)):
        return value.reshape(shape)  # per-head kernels -> concatenated heads
    raise SpecError(f"weights: {name} has shape {value.shape}, the oracle expects {shape}", where)


def _unused(plan: Plan, name: str) -> Verdict:
    """A mapped weight whose layer the code never called: the formula uses it, the code not."""
    path = plan.spec.weights.get(name, "?")
    tensor = plan.oracle.tensor(name)
    return Verdict(
        name=name,
        ok=False,
        dims=tensor.dims,
        expected_shape=tensor.shape(plan.sizes),
        actual_shape=(),
        problem=f"the formula uses {name} but the code never calls the layer holding {path}",
    )


def _output_names(plan: Plan, count: int, keys: Sequence[str] | None = None) -> list[str]:
    """The oracle output each returned value is compared with: the keys of a returned dict
    when each is one of those wanted (``returns=``, else the oracle's outputs), else those
    wanted in order."""
    named = plan.spec.returns
    declared = list(named) if named is not None else [t.name for t in plan.oracle.outputs]
    if keys and set(keys) <= set(declared) - {"_"}:
        return list(keys)
    return declared[:count]


def _expected(
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


def _tolerance(
    plan: Plan,
    name: str,
    expected: Array,
    samples: Sequence[Pair],
    sizes: Mapping[str, Any],
    *,
    bound: bool = False,
) -> Tolerance:
    """The block's own ``atol``/``rtol`` if it states one; else the oracle's own rule if it
    has one; else the tolerance derived from float32 rounding (see :mod:`.tolerance`)."""
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
    derived = derive(name, expected, samples, bound=bound)
    if derived is not None:
        return derived
    return fixed(oracle.atol, oracle.rtol, UNMEASURED)


UNMEASURED = (
    "fixed: float32 rounding could not be measured, because the oracle's float32 run failed "
    "or gave float64 (see Verdicts: tolerances)"
)


def _verdicts(
    plan: Plan,
    names: Sequence[str],
    outputs: Sequence[Array],
    expected: Mapping[str, Array],
    arrays: Mapping[str, Array],
    params: Mapping[str, Any],
    regime: str = "",
) -> tuple[list[Verdict], dict[str, Array]]:
    spec, oracle = plan.spec, plan.oracle
    stated = spec.atol is not None or spec.rtol is not None or oracle.tolerance is not None
    draws: dict[int, list[Pair]] = {}

    def samples(count: int) -> list[Pair]:
        """The oracle's first ``count`` rounding draws, each computed once, when needed."""
        if stated:
            return []
        if count not in draws:
            taken = draws.get(1)  # the first draw, if the bound already took it
            draws[count] = rounding_samples(
                oracle.compute, arrays, params, expected, spec.seed, count, *(taken or [])[:1]
            )
        return draws[count]

    verdicts, shown = [], {}
    for name, actual in zip(names, outputs, strict=False):
        if name in {"_", ""}:
            continue
        if name not in expected:
            raise SpecError(
                f"returns: oracle {oracle.name!r} has no output {name!r}", spec.location
            )
        want = expected[name]
        got = squeeze_leading(np.asarray(actual), np.ndim(want))
        dims = oracle.tensor(name).dims if any(t.name == name for t in oracle.outputs) else ()
        # the full tolerance takes four float32 runs of the oracle and their references; the
        # bound from the first is never above it, and enough for code within it
        verdict = None
        if BOUND_FIRST:
            first = _tolerance(plan, name, want, samples(1), params, bound=True)
            verdict = _judged(name, got, want, dims, first, regime)
        if verdict is None or (not verdict.ok and not stated):
            full = _tolerance(plan, name, want, samples(SAMPLES), params)
            verdict = _judged(name, got, want, dims, full, regime)
        if not verdict.ok and not verdict.problem:
            verdict = dataclasses.replace(verdict, hint=_hint(plan, name, got, want))
        verdicts.append(verdict)
        shown[name] = got
    return verdicts, shown


BOUND_FIRST = True
"""Judge first against the bound one rounding draw gives (see :func:`.tolerance.derive`).
``bench/tolerance_model.py`` turns it off to measure every check against its full tolerance."""


def _judged(
    name: str,
    actual: Array,
    expected: Array,
    dims: Sequence[str],
    tolerance: Tolerance,
    regime: str,
) -> Verdict:
    return compare(
        name,
        actual,
        expected,
        dims,
        tolerance.allowed,
        tolerance.rtol,
        how=tolerance.how,
        regime=regime,
    )


def _notes(
    plan: Plan,
    names: Sequence[str],
    outputs: Sequence[Array],
    dtypes: Sequence[str],
    keys: Sequence[str] | None = None,
) -> list[str]:
    notes = []
    if keys and list(keys) != list(names[: len(keys)]):
        notes.append(
            f"the code returned a dict whose keys ({', '.join(keys)}) are not all among the "
            f"outputs compared: compared in order, as {', '.join(names)}"
        )
    if len(outputs) > len(names):
        notes.append(
            f"the code returned {len(outputs)} values; "
            f"compared the first {len(names)} ({', '.join(names)})"
        )
    for index, (name, actual) in enumerate(zip(names, outputs, strict=False)):
        dtype = dtypes[index] if index < len(dtypes) else np.asarray(actual).dtype.name
        if dtype != "float32" and name not in {"_", ""}:
            notes.append(f"{name} came back as {dtype}, not float32")
    return notes


def _shapes(
    plan: Plan, weights: Mapping[str, Array], names: Sequence[str], outputs: Sequence[Array]
) -> tuple[ShapeInfo, ...]:
    oracle = plan.oracle
    shapes = [
        ShapeInfo(t.name, "input", np.shape(plan.inputs[t.name]), t.dims)
        for t in oracle.inputs
        if t.name in plan.inputs
    ]
    shapes += [
        ShapeInfo(t.name, "weight", np.shape(weights[t.name]), t.dims)
        for t in oracle.weights
        if t.name in weights
    ]
    declared = {t.name: t.dims for t in oracle.outputs}
    shapes += [
        ShapeInfo(n, "output", np.shape(o), declared.get(n, ()))
        for n, o in zip(names, outputs, strict=False)
    ]
    return tuple(shapes)


def _heatmap_arrays(
    plan: Plan,
    expected: Mapping[str, Array],
    shown: Mapping[str, Array],
    verdicts: Sequence[Verdict],
) -> dict[str, Array]:
    """What the heatmaps draw: ``name`` holds the code's values of output ``name`` (the
    oracle's for an intermediate the code does not return, such as the FFN's hidden layer);
    on a mismatch ``name:oracle`` holds the oracle's next to them, and only it when the
    code's shape is wrong. ``delta`` and ``delta_worst``: where they differ."""
    wanted = plan.spec.heatmaps if plan.spec.heatmaps is not None else plan.oracle.heatmaps
    failed = {v.name for v in verdicts if not v.ok}
    picked: dict[str, Array] = {}
    for name in wanted:
        code, reference = shown.get(name), expected.get(name)
        fits = code is not None and (reference is None or np.shape(code) == np.shape(reference))
        if fits:
            picked[name] = np.asarray(code, dtype=np.float32)
        elif reference is not None and code is None:
            picked[name] = np.asarray(reference, dtype=np.float32)
        if reference is not None and code is not None and (name in failed or not fits):
            picked[f"{name}:oracle"] = np.asarray(reference, dtype=np.float32)
    for verdict in verdicts:
        if not verdict.ok and verdict.name in shown and verdict.name in expected:
            delta = delta_array(shown[verdict.name], expected[verdict.name])
            if delta is not None:
                picked["delta"] = delta
                picked["delta_worst"] = np.asarray(verdict.worst_index, dtype=np.int64)
                break
    return picked


HALVES = (
    "the code's values are the formula's with every sine first and every cosine after (the "
    "halves layout, concatenated, as the TensorFlow tutorial builds it); the formula "
    "interleaves them, sines in even columns and cosines in odd ones: interleave them in the "
    "code, or state the halves layout in the formula and its own oracle"
)


def _hint(plan: Plan, name: str, actual: Array, expected: Array) -> str:
    """Where a known mistake explains the difference, say so."""
    if plan.oracle.name == "positional_encoding" and np.ndim(expected) >= 2:
        actual = np.asarray(actual, dtype=np.float64)
        halves = np.concatenate([expected[..., 0::2], expected[..., 1::2]], axis=-1)
        if actual.shape == halves.shape and np.max(np.abs(actual - halves), initial=0.0) < 1e-3:
            return HALVES
    return ""


def _regime_notes(plan: Plan, skipped: Mapping[str, str]) -> list[str]:
    """Which input regimes ran besides the standard one, and which could not, and why."""
    notes = []
    ran = [f"{r.name} ({r.says})" for r in plan.regimes if r.name not in skipped]
    if ran:
        notes.append(f"also checked on other inputs: {'; '.join(ran)}")
    for regime in plan.regimes:
        if regime.name in skipped:
            why = skipped[regime.name]
            notes.append(
                f"not checked on the {regime.name} inputs ({regime.says}): they need other "
                f"sizes{', and ' + why if why else ''}"
            )
    return notes


def _tolerance_notes(verdicts: Sequence[Verdict]) -> list[str]:
    """How the tolerances came about, once each."""
    ways = dict.fromkeys(v.tolerance for v in verdicts if v.tolerance and not v.regime)
    return [f"tolerance: {how}" for how in ways]


def _untraced(runs: Sequence[TimingResult]) -> list[str]:
    """Why a run has no ``tf.function`` timing: the code ran eagerly but could not be traced."""
    notes = []
    for run in runs:
        if run.graph_error and not run.label.startswith("sweep"):
            which = "" if run.label == "check" else f" ({run.label})"
            notes.append(
                f"no tf.function timing{which}: the code does not trace into a graph "
                f"({run.graph_error})"
            )
    return notes


def _stats(label: str, samples: Sequence[float], first: float = 0.0) -> TimingStats:
    values = np.asarray(samples, dtype=np.float64)
    q1, median, q3 = np.percentile(values, [25, 50, 75])
    return TimingStats(label, float(median), float((q3 - q1) / 2), len(values), first)


def _timings(runs: Sequence[TimingResult]) -> list[TimingStats]:
    stats: list[TimingStats] = []
    for run in runs:
        if run.label.startswith("sweep"):
            continue
        suffix = "" if run.label == "check" else f" ({run.label})"
        stats.append(_stats(f"eager{suffix}", run.eager))
        if run.graph is not None:
            stats.append(_stats(f"tf.function{suffix}", run.graph, first=run.trace or 0.0))
    return stats


def _sweep(runs: Sequence[TimingResult]) -> tuple[SweepPoint, ...]:
    points = []
    for run in runs:
        label = run.label
        if label.startswith("sweep"):
            stats = _stats(label, run.eager)
            points.append(SweepPoint(int(label.rsplit("=", 1)[1]), stats.median, stats.spread))
    return tuple(points)


def _oracle_timing(
    plan: Plan, arrays: Mapping[str, Array], params: Mapping[str, Any], repeats: int = 5
) -> TimingStats:
    samples = []
    for _ in range(repeats):
        start = time.perf_counter()
        plan.oracle.compute(arrays, params)
        samples.append(time.perf_counter() - start)
    return _stats("oracle (NumPy float64)", samples)
