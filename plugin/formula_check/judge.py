"""Judge a worker's answer against the oracle: verdicts, shapes, timings, heatmap arrays.

Pure NumPy: runs in the calling process, never touches TensorFlow.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from .compare import Difference, delta_array, squeeze_leading
from .errors import OracleError, SpecError
from .formula import judge_formula
from .messages import FIRST, FLOAT16_WEIGHTS, GRAPH, NOT_A_TENSOR, CheckReply, SnippetFailed
from .model import (
    GRAPH_MODE,
    Array,
    CheckResult,
    Environment,
    Location,
    ShapeInfo,
    SnippetFailure,
    Status,
    Verdict,
    frozen_map,
)
from .option_values import spoken_call
from .oracle_weights import (
    described,
    oracle_weights,
    param_check,
    unmoved_notes,
    unused_verdict,
)
from .planning import Plan, attribute_outputs
from .result_notes import (
    blind_spots,
    graph_notes,
    output_notes,
    regime_notes,
    tolerance_notes,
    unmapped_notes,
    untraced,
)
from .timing_stats import oracle_timing, sweep_points, timing_stats
from .tolerance import SAMPLES, Derivation, Pair, Singles, Tolerance, fixed, rounding_samples

_PHASES = {
    "call": "",
    "load": "",
    "entry": "looking up the entry",
    "import": "importing the module",
    "construct": "constructing the layer",
    "output": "reading the outputs",
    "timing": "timing",
}

_ONE_NUMBER = (
    "truth value of an array",
    "arrays can be converted",
    "as a Python `bool`",
    "must be rank 0",
)
"""What NumPy and TensorFlow say of an array used as one number: ``if``, ``min()``,
``float()``; in a graph, an ``if`` (AutoGraph's ``tf.cond`` takes one truth value)."""


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
    if plan.oracle.vector_hint and any(said in failed.message for said in _ONE_NUMBER):
        message = f"{message}. {plan.oracle.vector_hint}"
    return SnippetFailure(failed.type, message, location, failed.traceback)


def evaluate(
    plan: Plan,
    reply: CheckReply,
    arrays: Mapping[str, Array],
    env: Environment,
) -> CheckResult:
    """Compare the code's outputs with the oracle's and build the result."""
    spec, oracle = plan.spec, plan.oracle
    returned = [arrays[f"out/{i}"] for i in range(reply.outputs)]
    unused = [unused_verdict(plan, name) for name in reply.unused_weights]
    if unused:  # the oracle cannot even be evaluated without those weights
        return _before_judging(plan, reply, env, Status.MISMATCH, verdicts=tuple(unused))
    _options_took_effect(plan, reply)
    plan = dataclasses.replace(plan, artifact=reply.artifact)  # its precision: its tolerance
    unjudged = _unjudged_precision(plan.artifact)
    if unjudged:
        return _before_judging(
            plan, reply, env, Status.ERROR, failure=SnippetFailure("ArtifactError", unjudged)
        )
    weights, read_params = oracle_weights(plan, reply, arrays)
    if plan.artifact.get("dtype") == FLOAT16_WEIGHTS:  # the numbers it computes with
        weights = {name: _as_float16(value) for name, value in weights.items()}
    params = dict(plan.params)  # the formula's: what the code says of them is checked below
    oracle_arrays = {**plan.inputs, **weights}
    if plan.keep is not None:
        oracle_arrays["mask"] = plan.keep
    positional = _output_names(plan, len(returned), reply.output_keys)
    outputs = [v for v in _values(plan, arrays, "", len(positional)) if v is not None]
    names = [*positional, *attribute_outputs(spec)]
    skipped = dict(reply.regimes_skipped)
    untensored = _not_tensors(positional, reply.output_dtypes)
    if untensored:  # the code ran, but gave no array where an output is compared
        failure = SnippetFailure("TypeError", "; ".join(untensored))
        return _before_judging(plan, reply, env, Status.ERROR, failure=failure)
    # the oracle on the block's own inputs, once: its values are the code's reference and
    # the formula's, and the run is the first of those timed for the card
    started = time.perf_counter()
    expected = _expected(plan, oracle_arrays, params)
    ran = time.perf_counter() - started
    # a weight the check could not move was not scaled for the regimes either
    scaled = {k: v for k, v in weights.items() if k not in dict(reply.unmoved_weights)}
    verdicts, pictured = _judge_outputs(
        plan, names, outputs, (scaled, oracle_arrays, params, expected), arrays, skipped
    )
    verdicts += _first_call(plan, reply, arrays, names, params) if reply.first_call else []
    verdicts += _other_keys(plan, reply)
    verdicts, pictured = _graph_mode(
        plan, reply, arrays, (positional, verdicts, pictured), (oracle_arrays, params, expected)
    )
    dropped = _dropped_training(reply)
    if dropped:
        verdicts = [
            dataclasses.replace(v, hint=dropped) if not (v.ok or v.problem or v.hint) else v
            for v in verdicts
        ]
    _heatmaps_drawable(plan, pictured[1])
    if _by_name(plan, reply.output_keys):
        verdicts += _missing_keys(plan, reply.output_keys or ())
    else:
        verdicts += _unreturned(plan, names, len(outputs))
    checked = [param_check(plan, name, value) for name, value in read_params.items()]
    verdicts += [verdict for verdict, _ in checked if verdict is not None]
    formula = judge_formula(spec, oracle_arrays, params, known=(oracle, expected))
    if not oracle.builtin and not _stated(plan):  # its tolerance came from its own runs
        _still_computes(plan, oracle_arrays, params, expected)
    code_ok = bool(verdicts) and all(v.ok for v in verdicts)
    status = Status.VERIFIED if code_ok and not (formula and formula.failed) else Status.MISMATCH
    notes = (
        list(plan.notes)
        + output_notes(plan, positional, returned, reply.output_dtypes, reply.output_keys)
        + ([dropped] if dropped and not any(v.hint == dropped for v in verdicts) else [])
        + _preset_note(plan, reply)
        + _fold_notes(plan, names, outputs)
        + [note for _, note in checked if note]
        + unmapped_notes(plan, reply)
        + unmoved_notes(plan, reply, weights)
        + artifact_notes(reply.artifact, weights, plan)
        + blind_spots(plan)
        + graph_notes(reply)
        + untraced(reply.timings, reply.graph_error)
        + regime_notes(plan, skipped, reply.first_call)
        + tolerance_notes(verdicts)
    )
    timings = tuple(timing_stats(reply.timings))
    if spec.timing.enabled:
        timings += (oracle_timing(plan, oracle_arrays, params, done=[ran]),)
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
        sweep=sweep_points(reply.timings),
        notes=tuple(notes),
        stdout=reply.stdout,
        formula=formula,
    )


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


def _fold_notes(plan: Plan, names: Sequence[str], outputs: Sequence[Array]) -> list[str]:
    """Which outputs were read with their heads folded into the batch axis."""
    notes = []
    for name, actual in zip(names, outputs, strict=False):
        if not any(t.name == name for t in plan.oracle.outputs):
            continue
        tensor = plan.oracle.tensor(name)
        want = tensor.shape(plan.sizes)
        got = squeeze_leading(np.asarray(actual), len(want))
        if got.shape != want and unfolded(got, np.empty(want), tensor.dims).shape == want:
            first, second = tensor.dims[0], tensor.dims[1]
            notes.append(
                f"{name} came back as {got.shape}: its first axis read as ({first}, {second}) "
                f"= {want[:2]}, {first}-major (heads folded into the batch)"
            )
    return notes


def _values(plan: Plan, arrays: Mapping[str, Array], prefix: str, count: int) -> list[Array | None]:
    """The code's first ``count`` returned values, then the outputs it keeps on the layer
    (``returns="output weights=attention_weights"``), on the arrays under ``prefix``."""
    returned = [arrays.get(f"{prefix}out/{i}") for i in range(count)]
    return returned + [arrays.get(f"{prefix}attr/{name}") for name in attribute_outputs(plan.spec)]


def _options_took_effect(plan: Plan, reply: CheckReply) -> None:
    """A function is called, never built: what a block says of building (``init=``, weights
    ``perturb=false``) would be ignored, and a weight its ``call=`` never passes never
    reaches the code. Each is an error at the block's place."""
    spec = plan.spec
    if reply.kind != "function":
        return
    kept = attribute_outputs(spec)
    if kept:
        raise SpecError(
            f"returns: {', '.join(f'{k}={v}' for k, v in kept.items())} reads an attribute of "
            "a layer, but this code is called as a function",
            spec.location,
        )
    if reply.created_variables and plan.oracle.weights:
        made = described(reply.created_variables)
        raise SpecError(
            f"the code creates weights of its own while it runs ({made}), so the weights of "
            f"oracle {plan.oracle.name!r} it is given "
            f"({', '.join(t.name for t in plan.oracle.weights)}) never decide its result: "
            'check what it builds as a layer or factory (kind="factory") with a weight map',
            spec.location,
        )
    own_init = [k for k, said in plan.request.init_sources.items() if said.get("origin") == "init"]
    if own_init:
        raise SpecError(
            f"init: {', '.join(own_init)} cannot take effect: this code is called as a "
            'function, never constructed (kind="layer" or "factory" builds it)',
            spec.location,
        )
    # a page's perturb: applies to the blocks that are layers; a spec made in code states
    # every value, so only a perturb that is not the default counts there
    stated = "perturb" in spec.stated if spec.stated is not None else not spec.perturb_weights
    if stated:
        said = "true" if spec.perturb_weights else "false"
        raise SpecError(
            f"perturb={said} cannot take effect: this code is a function, given its weights as "
            "arguments; only a layer's own weights are moved",
            spec.location,
        )
    call = plan.request.calls.function
    passed = set(call.arrays())
    missing = [t.name for t in plan.oracle.weights if f"wt/{t.name}" not in passed]
    if spec.call is not None and missing:
        raise SpecError(
            f"call={spoken_call(spec.call)!r} never passes {', '.join(missing)}, weights of oracle "
            f"{plan.oracle.name!r}: a function must be given every weight the formula uses",
            spec.location,
        )


def _preset_note(plan: Plan, reply: CheckReply) -> list[str]:
    """Where the preset's weights were found, when not on the layer itself."""
    if not reply.preset_root:
        return []
    name = (plan.spec.preset or "").partition("@")[0]
    return [
        f"preset {name}'s weight map read under {reply.preset_root}, the one sub-layer of "
        f'this layer that holds its weights (preset="{name}@{reply.preset_root}" says so)'
    ]


def _heatmaps_drawable(plan: Plan, expected: Mapping[str, Array]) -> None:
    """A heatmap the block asks for by name must have values to draw."""
    for name in plan.spec.heatmaps or ():
        if name not in expected:
            raise SpecError(
                f"heatmaps: oracle {plan.oracle.name!r} has no {name!r} to draw (it has "
                f"{', '.join(sorted(expected))})",
                plan.spec.location,
            )


def _before_judging(
    plan: Plan, reply: CheckReply, env: Environment, status: Status, **found: Any
) -> CheckResult:
    """The result of a check that ends before its outputs are judged: ``found`` says why
    (the verdicts of weights never used, or the failure)."""
    spec = plan.spec
    return CheckResult(
        block_id=spec.block_id,
        location=spec.location,
        oracle=plan.oracle.name,
        status=status,
        expect=spec.expect,
        environment=env,
        stdout=reply.stdout,
        **found,
    )


def _unjudged_precision(artifact: Mapping[str, str]) -> str:
    """Why an artifact's precision cannot be judged yet, or nothing. One that computes in
    float16 (a ``.keras`` model's float16 policy; the worker refuses a SavedModel or TFLite
    file working in float16 itself, naming the op) needs a tolerance derived from what it
    rounds, tensor by tensor; a multiple of float32's rounding proved far too loose (formula
    drifts passed inside it), so it is refused rather than passed. What an int8 model's
    rounding explains, and the rounding of float16 outputs cast at the end of a float32
    graph, come with the outputs (``tol/out/I``)."""
    dtype = artifact.get("dtype", "")
    if dtype != "float16":  # an int8 model's rounding comes with its outputs (tol/out/I)
        return ""
    kind = "an int8 model" if dtype == "int8" else "an artifact computing in float16"
    return (
        f"{kind} cannot be judged yet: the tolerance its roundings allow is not derived, and "
        "a fixed multiple let formula drifts pass; check the float32 SavedModel or TFLite "
        "conversion (a float16-weight TFLite file is judged: its weights are rounded as it "
        "rounds them; so is an artifact computing in float32 that casts its outputs to "
        "float16)"
    )


def _as_float16(value: Array) -> Array:
    """A weight as a float16-weight artifact computes with it: rounded to float16."""
    rounded: Array = np.asarray(value).astype(np.float16).astype(np.float64)
    return rounded


def _dropped_training(reply: CheckReply) -> str:
    """What to say when ``training=`` never reached the layer's own ``call()``."""
    kept = dict(reply.keywords_not_passed)
    if "training" not in kept:
        return ""
    return (
        f"training= never reached {kept['training']}, which takes it only through **kwargs: "
        "Keras 3 passes training on to a call() that names it (its sub-layers still see it), "
        "so code that reads kwargs['training'] runs as if it were not given"
    )


def _not_tensors(names: Sequence[str], dtypes: Sequence[str]) -> list[str]:
    """What to say of each output ``returns=`` (or the oracle's order) names at a place where
    the code returned something other than an array (a list, a dict, None, a string)."""
    return [
        f"the code returned a {dtype.removeprefix(NOT_A_TENSOR).strip()} as value {index + 1} "
        f"({name}), not a tensor: return the array there, or skip the value with _ in returns="
        for index, (name, dtype) in enumerate(zip(names, dtypes, strict=False))
        if name not in {"_", ""} and dtype.startswith(NOT_A_TENSOR)
    ]


def _unreturned(plan: Plan, names: Sequence[str], count: int) -> list[Verdict]:
    """``returns=`` names more values than the code returned: each missing one fails."""
    named = [word for word in plan.spec.returns or () if "=" not in word]
    return [
        _unmatched(
            name,
            f"returns= names it as value {index + 1}, but the code returned only {count}",
        )
        for index, name in enumerate(named)
        if index >= count and name != "_"
    ]


Pictured = tuple[Mapping[str, Array], Mapping[str, Array]]
"""What the heatmaps show: the code's values, and the oracle's, on the same inputs."""


def _judge_outputs(
    plan: Plan,
    names: Sequence[str],
    outputs: Sequence[Array],
    oracle_side: tuple[
        Mapping[str, Array], Mapping[str, Array], Mapping[str, Any], Mapping[str, Array]
    ],
    arrays: Mapping[str, Array],
    skipped: dict[str, str],
) -> tuple[list[Verdict], Pictured]:
    """The verdicts on the check's own inputs, then on each input regime's that ran; a regime
    the code could not be judged at is added to ``skipped``. ``oracle_side`` holds the
    oracle's weights, its arrays (inputs, weights, mask), the formula's parameters and the
    oracle's outputs on those arrays."""
    weights, oracle_arrays, params, expected = oracle_side
    widened = [arrays.get(f"tol/out/{i}") for i in range(len(names))]
    # the regimes mostly keep the block's weights: each cast to float32 once for all of
    # them, for an oracle of ours (which never writes into its arrays)
    singles: Singles | None = {} if plan.oracle.builtin else None
    verdicts, shown = _verdicts(
        plan, names, outputs, expected, oracle_arrays, params, widened=widened, singles=singles
    )
    pictured: Pictured = (shown, expected)
    for regime in plan.regimes:
        if regime.name in skipped:
            continue
        scale = regime.weight_scale
        grown = weights if scale == 1.0 else {k: v * scale for k, v in weights.items()}
        inputs = {**oracle_arrays, **grown, **regime.inputs}
        sizes = {**params, **regime.sizes}
        positional = len(names) - len(attribute_outputs(plan.spec))
        got = _values(plan, arrays, regime.prefix, positional)
        wanted = _expected(plan, inputs, sizes)
        more, seen = _verdicts(
            plan,
            [name for name, value in zip(names, got, strict=True) if value is not None],
            [g for g in got if g is not None],
            wanted,
            inputs,
            sizes,
            regime.name,
            singles=singles,
        )
        if dict(regime.sizes) != dict(plan.sizes) and any(
            v.actual_shape != v.expected_shape for v in more
        ):
            # at sizes of its own, code that stops at a maximum length cannot be judged there
            shapes = ", ".join(f"{v.name} {v.actual_shape}" for v in more if v.problem)
            skipped[regime.name] = f"the code returned {shapes} at these sizes"
            continue
        returned = _count(arrays, regime.prefix)
        more += _returned_less(names, got, returned, _count(arrays), regime.name)
        more = [_overflowed(plan, v, verdicts, wanted, inputs) for v in more]
        if all(v.ok for v in verdicts) and not all(v.ok for v in more):
            pictured = (seen, wanted)  # the heatmaps show the first inputs where it differs
        verdicts += more
    return verdicts, pictured


EXP_LIMIT = float(np.log(np.finfo(np.float32).max))
"""88.72: exp of any larger float32 is infinite."""


def _overflowed(
    plan: Plan,
    verdict: Verdict,
    standard: Sequence[Verdict],
    expected: Mapping[str, Array],
    inputs: Mapping[str, Array],
) -> Verdict:
    """``verdict`` on a regime, saying so where the code overflowed float32 there: NaN or Inf
    in its result where the oracle's values are all finite, and none in the same output on
    the standard inputs. Where the regime's inputs are past :data:`EXP_LIMIT` themselves,
    exp of them is infinite in float32, and the usual cure is said."""
    want = expected.get(verdict.name)
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


FIRST_CALL = "first call"
"""The verdicts' regime for a layer's first call, made before its weights were moved."""


def _first_call(
    plan: Plan,
    reply: CheckReply,
    arrays: Mapping[str, Array],
    names: Sequence[str],
    params: Mapping[str, Any],
) -> list[Verdict]:
    """The layer's first call, judged on the weights it ran with: the weights are moved
    before the call judged on the standard inputs, and a layer whose first call is wrong
    (zeros while it builds its weights) would pass on the second alone."""
    first = {key.removeprefix(FIRST): v for key, v in arrays.items() if key.startswith(FIRST)}
    weights, _ = oracle_weights(plan, reply, first)
    inputs = {**plan.inputs, **weights}
    if plan.keep is not None:
        inputs["mask"] = plan.keep
    positional = len(names) - len(attribute_outputs(plan.spec))
    got = _values(plan, first, "", positional)
    verdicts, _ = _verdicts(
        plan,
        [name for name, value in zip(names, got, strict=True) if value is not None],
        [g for g in got if g is not None],
        _expected(plan, inputs, params),
        inputs,
        params,
        FIRST_CALL,
    )
    return verdicts + _returned_less(names, got, _count(first), _count(arrays), FIRST_CALL)


def _other_keys(plan: Plan, reply: CheckReply) -> list[Verdict]:
    """A failed verdict, naming the regime (or the first call), for each call that returned
    a dict with other keys than the main call's, or a dict where it did not."""

    def said(keys: Sequence[str] | None) -> str:
        return "no dict" if keys is None else f"a dict of {', '.join(keys) or 'no keys'}"

    names = {regime.prefix: regime.name for regime in plan.regimes} | {FIRST: FIRST_CALL}
    return [
        dataclasses.replace(
            _unmatched(
                "outputs",
                f"the code returned {said(keys)} on the {names.get(prefix, prefix)} inputs, "
                f"{said(reply.output_keys)} on the others",
            ),
            regime=names.get(prefix, prefix),
        )
        for prefix, keys in reply.other_keys
    ]


def _returned_less(
    names: Sequence[str], got: Sequence[Array | None], count: int, main: int, regime: str
) -> list[Verdict]:
    """A failed verdict, naming ``regime``, for each output compared that it did not return,
    and one where it returned another number of values (``count``) than the main call
    (``main``): every output is judged on every regime, or the regime fails."""
    failed = [
        _unmatched(name, f"the code returned no value for it on the {regime} inputs")
        for name, value in zip(names, got, strict=True)
        if value is None and name not in {"_", ""}
    ]
    if count != main and not failed:
        said = (
            f"the code returned {count} value{'' if count == 1 else 's'} on the {regime} "
            f"inputs, {main} on the others"
        )
        failed.append(_unmatched("outputs", said))
    return [dataclasses.replace(verdict, regime=regime) for verdict in failed]


def _count(arrays: Mapping[str, Array], prefix: str = "") -> int:
    """How many values the call whose arrays are under ``prefix`` returned."""
    start = f"{prefix}out/"
    return sum(1 for key in arrays if key.startswith(start) and key[len(start) :].isdigit())


ONLY_GRAPH = (
    "only under tf.function: eagerly the code agrees with the oracle, its traced graph does "
    "not (Python runs once, while tracing: what it read or decided then stays in the graph)"
)


def _graph_mode(
    plan: Plan,
    reply: CheckReply,
    arrays: Mapping[str, Array],
    eager: tuple[Sequence[str], list[Verdict], Pictured],
    oracle_side: tuple[Mapping[str, Array], Mapping[str, Any], Mapping[str, Array]],
) -> tuple[list[Verdict], Pictured]:
    """The verdicts and heatmaps so far (``eager``'s, with the names of the returned
    values: the graph keeps no attribute a check could read), and after them what the code
    returned as a traced ``tf.function`` graph on the standard inputs, judged as its eager
    values are: against the same oracle values and tolerance. Where only the graph's values
    differ, their verdict says so, and the heatmaps show them."""
    names, judged, pictured = eager
    count = reply.graph_outputs
    if count is None:  # an artifact (a graph already), or code that does not trace: noted
        return judged, pictured
    if count != reply.outputs:
        said = f"the code returned {count} values under {GRAPH_MODE}, {reply.outputs} eagerly"
        failed = dataclasses.replace(_unmatched("outputs", said), regime=GRAPH_MODE)
        return [*judged, failed], pictured
    oracle_arrays, params, expected = oracle_side
    got = [arrays[f"{GRAPH}out/{index}"] for index in range(count)]
    graph, shown = _verdicts(plan, names, got, expected, oracle_arrays, params, GRAPH_MODE)
    agreed = {v.name for v in judged if v.ok and not v.regime}
    graph = [
        dataclasses.replace(v, hint=ONLY_GRAPH) if not v.ok and v.name in agreed else v
        for v in graph
    ]
    if all(v.ok for v in judged) and not all(v.ok for v in graph):
        pictured = (shown, expected)
    return [*judged, *graph], pictured


def _output_names(plan: Plan, count: int, keys: Sequence[str] | None = None) -> list[str]:
    """The oracle output each returned value is compared with. In a returned dict read by
    name (:func:`_by_name`), a key naming an output is compared with it and one naming none
    is left out (a SavedModel signature's extra outputs, in whatever order they come back).
    Otherwise, and for a tuple or list, the values are compared in order with those wanted
    (``returns=``'s, else the oracle's)."""
    if _by_name(plan, keys):
        wanted = _wanted(plan)
        return [key if key in wanted else "_" for key in keys or ()]
    return _declared(plan)[:count]


def _declared(plan: Plan) -> list[str]:
    """``returns=``'s names of returned values (``_`` included), else the oracle's outputs."""
    named = plan.spec.returns
    if named is not None:
        return [word for word in named if "=" not in word]
    return [t.name for t in plan.oracle.outputs]


def _wanted(plan: Plan) -> list[str]:
    return [name for name in _declared(plan) if name != "_"]


def _by_name(plan: Plan, keys: Sequence[str] | None) -> bool:
    """Whether a returned dict is read by name. With ``returns=``, when a key names one of
    its outputs (one it names that the dict lacks then fails, named); without, when a key
    names the oracle's first output, so a misspelt one (``{"Output": …}``) is read in order,
    never left out unchecked."""
    wanted = _wanted(plan)
    if not keys or not wanted:
        return False
    if plan.spec.returns is not None:
        return bool(set(keys) & set(wanted))
    return wanted[0] in keys


def _missing_keys(plan: Plan, keys: Sequence[str]) -> list[Verdict]:
    """A dict read by name that lacks an output ``returns=`` names: that output fails, named
    (without ``returns=``, code may return fewer outputs than the oracle has)."""
    if plan.spec.returns is None:
        return []
    return [
        _unmatched(
            name,
            f"returns= names it, but the dict the code returned has no key {name!r} "
            f"(its keys: {', '.join(keys)})",
        )
        for name in _wanted(plan)
        if name not in keys
    ]


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


def _stated(plan: Plan) -> bool:
    """Whether the block or its oracle states the tolerance (none is derived from rounding)."""
    spec, oracle = plan.spec, plan.oracle
    return spec.atol is not None or spec.rtol is not None or oracle.tolerance is not None


def _still_computes(
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
    calls = (_expected(plan, arrays, params), _expected(plan, arrays, params))
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
    if first.shape != second.shape or first.dtype != second.dtype:
        return False
    if first.dtype.kind in "fc":
        return bool(np.array_equal(first, second, equal_nan=True))
    return bool(np.array_equal(first, second))


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
    derived = derivation.tolerance(samples, bound=bound)
    if derived is not None:
        return derived
    return fixed(oracle.atol, oracle.rtol, UNMEASURED)


_ARTIFACT_WORDS = {"saved_model": "SavedModel", "keras": "Keras model", "tflite": "TFLite file"}


def artifact_notes(
    artifact: Mapping[str, str], weights: Mapping[str, Array], plan: Plan
) -> list[str]:
    """What an exported artifact's card says: which artifact was checked, and what checking
    it with its own weights cannot see. Weights that cannot be moved (a SavedModel's, a
    TFLite file's) and hold only zeros or only ones are an error at the block, unless it
    says ``perturb="false"``: a term that left them out would give the same numbers."""
    if not artifact:
        return []
    signature = f", signature {artifact['signature']}" if artifact.get("signature") else ""
    source = (
        f"; weights read from {artifact['weights_from']}" if artifact.get("weights_from") else ""
    )
    notes = [
        f"artifact: the {_ARTIFACT_WORDS[artifact['format']]} {artifact['path']}{signature}, "
        f"computing in {artifact.get('dtype', 'float32')}{source}"
    ]
    if artifact.get("saturated"):
        notes.append(
            "int8 tensors saturated (values clipped at an end of their calibrated range, which "
            f"quantization does not explain): {artifact['saturated']}; calibrate on data like this"
        )
    if artifact.get("perturbed"):
        return notes
    plain = [
        name
        for name, value in weights.items()
        if np.size(value) > 1 and (np.all(value == 0) or np.all(value == 1))
    ]
    if plain and plan.spec.perturb_weights:
        raise SpecError(
            f"weights: the {_ARTIFACT_WORDS[artifact['format']]} {artifact['path']} is checked "
            f"with the weights it was exported with, which cannot be moved, and "
            f"{', '.join(plain)} hold only zeros or only ones there, so code that left their "
            "terms out would give the same numbers: export it after training (or with its "
            "weights moved off their initial values), or check the source, whose weights are "
            "moved",
            plan.spec.location,
        )
    notes.append(
        "weights at their exported values, not perturbed (an exported artifact is checked as "
        "shipped)"
        + (
            f"; {', '.join(plain)} hold only zeros or ones there, so a bug in their terms "
            "would not show: export it after training, or check the source with perturb"
            if plain
            else ""
        )
    )
    return notes


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
    widened: Sequence[Array | None] = (),
    singles: Singles | None = None,
) -> tuple[list[Verdict], dict[str, Array]]:
    """Each output against the oracle's; ``widened``: what the artifact's own rounding
    explains of each output (an int8 model's), added to its tolerance; ``singles``: the
    float32 casts the block's rounding draws share (see :func:`.tolerance.rounding_samples`)."""
    spec, oracle = plan.spec, plan.oracle
    stated = _stated(plan)
    draws: dict[int, list[Pair]] = {}

    def samples(count: int) -> list[Pair]:
        """The oracle's first ``count`` rounding draws, each computed once, when needed."""
        if stated:
            return []
        if count not in draws:
            taken = draws.get(1)  # the first draw, if the bound already took it
            draws[count] = rounding_samples(
                oracle.compute,
                arrays,
                params,
                expected,
                spec.seed,
                count,
                *(taken or [])[:1],
                singles=singles,
            )
        return draws[count]

    verdicts, shown = [], {}
    for place, (name, actual) in enumerate(zip(names, outputs, strict=False)):
        if name in {"_", ""}:
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
            first = _tolerance(plan, name, derivation, samples(1), params, bound=True)
            verdict = _judged(name, difference, dims, _widen(first, extra, plan), regime)
        if verdict is None or (not verdict.ok and not stated):
            full = _tolerance(plan, name, derivation, samples(SAMPLES), params)
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
"""Judge first against the bound one rounding draw gives (see :func:`.tolerance.derive`).
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


def _unmatched(name: str, problem: str) -> Verdict:
    """An output the code did not return where the block says it does: failed, no shapes."""
    return Verdict(
        name=name, ok=False, dims=(), expected_shape=(), actual_shape=(), problem=problem
    )
