"""Judge a worker's answer against the oracle: verdicts, shapes, timings, heatmap arrays.

Pure NumPy: runs in the calling process, never touches TensorFlow.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from formula_check.checking.compare import delta_array
from formula_check.checking.formula import judge_formula
from formula_check.checking.oracle_weights import (
    oracle_weights,
    param_check,
    unmoved_notes,
    unused_verdict,
)
from formula_check.checking.output_verdicts import (
    Reference,
    output_verdicts,
    overflowed,
    still_computes,
    tolerance_stated,
    unmatched,
)
from formula_check.checking.reply_notes import (
    artifact_notes,
    as_float16,
    dropped_training,
    heatmaps_drawable,
    options_took_effect,
    preset_note,
    unjudgeable,
)
from formula_check.checking.result_notes import (
    blind_spots,
    graph_notes,
    output_notes,
    regime_notes,
    tolerance_notes,
    unmapped_notes,
    untraced,
)
from formula_check.checking.returned import (
    by_name,
    fold_notes,
    missing_keys,
    output_names,
    returned_count,
    returned_values,
    unreturned,
)
from formula_check.checking.timing_stats import oracle_timing, sweep_points, timing_stats
from formula_check.messages import FIRST, FLOAT16_WEIGHTS, GRAPH, CheckReply, SnippetFailed
from formula_check.model import Array, Location, Status, frozen_map
from formula_check.oracles.tolerance import Singles
from formula_check.planning.plan import Plan, attribute_outputs
from formula_check.results import (
    CheckResult,
    Environment,
    ShapeInfo,
    SnippetFailure,
    Verdict,
    graph_regime,
    regime_words,
)

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
    unused = [unused_verdict(plan, name) for name in reply.unused_weights]
    if unused:  # the oracle cannot even be evaluated without those weights
        return _before_judging(plan, reply, env, Status.MISMATCH, verdicts=tuple(unused))
    options_took_effect(plan, reply)
    plan = dataclasses.replace(plan, artifact=reply.artifact)  # its precision: its tolerance
    positional = output_names(plan, reply.outputs, reply.output_keys)
    failure = unjudgeable(plan, positional, reply.output_dtypes)
    if failure is not None:
        return _before_judging(plan, reply, env, Status.ERROR, failure=failure)
    oracle_arrays, weights, read_params = _weights(plan, reply, arrays)
    # the oracle on the block's own inputs, once: its values are the code's reference and
    # the formula's, and the run is the first of those timed for the card
    singles: Singles | None = {} if oracle.builtin else None
    main = Reference(plan, oracle_arrays, dict(plan.params), singles)
    started = time.perf_counter()
    expected = main.expected
    ran = time.perf_counter() - started
    judged = _Judged(plan, reply, arrays, positional, weights, dict(reply.regimes_skipped))
    pictured = _judge_calls(judged, _calls(judged, main), read_params)
    verdicts, params = judged.verdicts, main.params
    formula = judge_formula(spec, oracle_arrays, params, known=(oracle, expected))
    if not oracle.builtin and not tolerance_stated(plan):  # its tolerance came from its own runs
        still_computes(plan, oracle_arrays, params, expected)
    code_ok = bool(verdicts) and all(v.ok for v in verdicts)
    status = Status.VERIFIED if code_ok and not (formula and formula.failed) else Status.MISMATCH
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
        shapes=_shapes(plan, weights, judged.names, judged.outputs),
        timings=timings,
        environment=env,
        arrays=frozen_map(_heatmap_arrays(plan, pictured[1], pictured[0], verdicts)),
        sweep=sweep_points(reply.timings),
        notes=tuple(note for source in NOTE_SOURCES for note in source(judged)),
        stdout=reply.stdout,
        formula=formula,
    )


@dataclasses.dataclass
class _Judged:
    """What judging a reply found so far, and what the card's notes are drawn from: the
    main call's returned values (``positional`` names them), the weights the oracle took,
    the regimes skipped (and why), the verdicts and the notes judging itself gave."""

    plan: Plan
    reply: CheckReply
    arrays: Mapping[str, Array]
    positional: list[str]
    weights: Mapping[str, Array]
    skipped: dict[str, str]
    verdicts: list[Verdict] = dataclasses.field(default_factory=list)
    notes: list[str] = dataclasses.field(default_factory=list)

    def __post_init__(self) -> None:
        self.returned = [self.arrays[f"out/{i}"] for i in range(self.reply.outputs)]
        self.names = [*self.positional, *attribute_outputs(self.plan.spec)]
        got = returned_values(self.plan, self.arrays, "", len(self.positional))
        self.outputs = [value for value in got if value is not None]


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


Pictured = tuple[Mapping[str, Array], Mapping[str, Array]]
"""What the heatmaps show: the code's values, and the oracle's, on the same inputs."""


@dataclasses.dataclass(frozen=True)
class _Call:
    """One call of the code judged: where its arrays are (``prefix``), the regime its
    verdicts name, the input regime it ran on (``inputs``; empty: the standard ones), if it
    ran as a traced graph, the oracle's side it is judged against. An eager call at a
    regime's sizes (``resized``) is skipped where its shapes are wrong: code that stops at
    a maximum length cannot be judged there."""

    prefix: str
    regime: str
    reference: Reference
    inputs: str = ""
    graph: bool = False
    resized: bool = False


def _calls(judged: _Judged, main: Reference) -> list[_Call]:
    """Every call judged, in order: the main one, each input regime's, a layer's first call
    (made before its weights moved, on the weights it ran with), then the traced graph's on
    the standard inputs and on each regime's, against its eager twin's oracle values."""
    plan, reply = judged.plan, judged.reply
    calls = [_Call("", "", main)]
    # a weight the check could not move was not scaled for the regimes either
    unmoved = dict(reply.unmoved_weights)
    for regime in plan.regimes:
        scale = regime.weight_scale
        grown = {k: v * scale for k, v in judged.weights.items() if k not in unmoved}
        arrays = {**main.arrays, **(grown if scale != 1.0 else {}), **regime.inputs}
        reference = Reference(plan, arrays, {**main.params, **regime.sizes}, main.singles)
        resized = dict(regime.sizes) != dict(plan.sizes)
        calls.append(_Call(regime.prefix, regime.name, reference, regime.name, resized=resized))
    eager = list(calls)
    if reply.first_call:
        first = {k.removeprefix(FIRST): v for k, v in judged.arrays.items() if k.startswith(FIRST)}
        reference = Reference(plan, _weights(plan, reply, first)[0], main.params, main.singles)
        calls.append(_Call(FIRST, FIRST_CALL, reference))
    if reply.graph_outputs is not None:  # else: an artifact, or code that does not trace
        calls += [
            _Call(GRAPH + c.prefix, graph_regime(c.inputs), c.reference, c.inputs, graph=True)
            for c in eager
        ]
    return calls


def _judge_calls(
    judged: _Judged, calls: Sequence[_Call], read_params: Mapping[str, Any]
) -> Pictured:
    """Judge each call in turn into ``judged``, each by the same steps (:func:`_judge_call`);
    a regime the eager code could not be judged at is skipped for its graph too. Then what
    only the main call says: outputs it did not return, the parameters the weight map read
    (``read_params``). What the heatmaps show: the first call that differs where all before
    it agreed, else the main one."""
    pictured = _judge_each(judged, calls)
    _hint_dropped_training(judged)
    heatmaps_drawable(judged.plan, pictured[1])
    _judge_main_only(judged, read_params)
    return pictured


def _judge_each(judged: _Judged, calls: Sequence[_Call]) -> Pictured:
    """Each call's verdicts into ``judged`` (or why its regime is skipped); what the
    heatmaps show."""
    pictured: Pictured | None = None
    for call in calls:
        if call.inputs in judged.skipped:
            continue
        more, shown = _judge_call(judged, call)
        if isinstance(more, str):
            judged.skipped[call.inputs] = more
            continue
        agreed = all(v.ok for v in judged.verdicts)
        if pictured is None or (shown and agreed and not all(v.ok for v in more)):
            pictured = (shown, call.reference.expected)
        judged.verdicts.extend(more)
    assert pictured is not None  # the main call is never skipped
    return pictured


def _hint_dropped_training(judged: _Judged) -> None:
    """Where ``training=`` never reached the layer's own ``call()`` (:func:`dropped_training`),
    each plain difference says so as its hint; a note says it where no verdict does."""
    dropped = dropped_training(judged.reply)
    if not dropped:
        return
    judged.verdicts[:] = [
        v if v.ok or v.problem or v.hint else dataclasses.replace(v, hint=dropped)
        for v in judged.verdicts
    ]
    if not any(v.hint == dropped for v in judged.verdicts):
        judged.notes.append(dropped)


def _judge_main_only(judged: _Judged, read_params: Mapping[str, Any]) -> None:
    """What only the main call says: the outputs it did not return (or the keys its dict
    lacks), and the parameters the weight map read."""
    plan, reply = judged.plan, judged.reply
    if by_name(plan, reply.output_keys):
        judged.verdicts += missing_keys(plan, reply.output_keys or ())
    else:
        judged.verdicts += unreturned(plan, judged.names, len(judged.outputs))
    checked = [param_check(plan, name, value) for name, value in read_params.items()]
    judged.verdicts += [verdict for verdict, _ in checked if verdict is not None]
    judged.notes += [note for _, note in checked if note]


def _judge_call(judged: _Judged, call: _Call) -> tuple[list[Verdict] | str, dict[str, Array]]:
    """One call's verdicts and its values as a heatmap shows them, by the steps every call
    takes: its outputs against the oracle's, then :func:`_returned_less`, then
    :func:`overflowed`, then, for a graph, :data:`ONLY_GRAPH` (a graph keeps no attribute
    outputs: a trace leaves symbolic tensors on the layer). Instead of verdicts, why it is
    skipped: a ``resized`` call that returned shapes of its own."""
    plan, arrays, reference = judged.plan, judged.arrays, call.reference
    names = judged.positional if call.graph else judged.names
    got = returned_values(plan, arrays, call.prefix, len(judged.positional))[: len(names)]
    widened = [arrays.get(f"tol/{call.prefix}out/{i}") for i in range(len(names))]
    more, shown = output_verdicts(plan, names, got, reference, call.regime, widened)
    if call.resized and any(v.actual_shape != v.expected_shape for v in more):
        shapes = ", ".join(f"{v.name} {v.actual_shape}" for v in more if v.problem)
        return f"the code returned {shapes} at these sizes", shown
    more += _returned_less(judged, call, names, got)
    more = [overflowed(plan, v, judged.verdicts, reference) for v in more]
    if call.graph:  # where its eager twin agreed with the oracle, it says so
        agreed = {v.name for v in judged.verdicts if v.ok and v.regime == call.inputs}
        more = [
            dataclasses.replace(v, hint=ONLY_GRAPH) if not v.ok and v.name in agreed else v
            for v in more
        ]
    return more, shown


def _returned_less(
    judged: _Judged, call: _Call, names: Sequence[str], got: Sequence[Array | None]
) -> list[Verdict]:
    """A failed verdict, naming the call's regime, where it raised (a graph on a regime), for
    each output compared that it did not return, one where it returned another number of
    values than the main call, and one where its dict has other keys than the main call's
    (or where only one returned a dict): every output is judged on every call, or it fails."""
    where, reply = regime_words(call.regime), judged.reply
    raised = dict(reply.graph_regimes_failed).get(call.inputs) if call.graph else None
    if raised:  # so it returned nothing there
        said = f"the code raised {where}: {raised}"
        return [dataclasses.replace(unmatched("outputs", said), regime=call.regime)]
    failed = [
        unmatched(name, f"the code returned no value for it {where}")
        for name, value in zip(names, got, strict=True)
        if value is None and name not in {"_", ""}
    ]
    count, main = returned_count(judged.arrays, call.prefix), returned_count(judged.arrays)
    if count != main and not failed:
        said = f"{count} value{'' if count == 1 else 's'} {where}, {main}"
        failed.append(unmatched("outputs", f"the code returned {said} {_OTHERS[call.graph]}"))
    keys = dict(reply.other_keys)
    if call.prefix in keys:
        said = f"{_said_keys(keys[call.prefix])} {where}, {_said_keys(reply.output_keys)}"
        failed.append(unmatched("outputs", f"the code returned {said} on the others"))
    return [dataclasses.replace(verdict, regime=call.regime) for verdict in failed]


_OTHERS = {False: "on the others", True: "eagerly"}
"""What an eager call's count is set against, and a graph's."""


def _said_keys(keys: Sequence[str] | None) -> str:
    return "no dict" if keys is None else f"a dict of {', '.join(keys) or 'no keys'}"


ONLY_GRAPH = (
    "only under tf.function: eagerly the code agrees with the oracle, its traced graph does "
    "not (Python runs once, while tracing: what it read or decided then stays in the graph)"
)


def _weights(
    plan: Plan, reply: CheckReply, arrays: Mapping[str, Array]
) -> tuple[dict[str, Array], dict[str, Array], dict[str, Any]]:
    """What the oracle computes on for the call whose weights ``arrays`` hold (the block's
    inputs, the weights, rounded as a float16-weight artifact computes with them, and the
    mask); the weights; and the parameters the weight map read."""
    weights, read_params = oracle_weights(plan, reply, arrays)
    if plan.artifact.get("dtype") == FLOAT16_WEIGHTS:  # the numbers it computes with
        weights = {name: as_float16(value) for name, value in weights.items()}
    mask = {"mask": plan.keep} if plan.keep is not None else {}
    return {**plan.inputs, **weights, **mask}, weights, read_params


FIRST_CALL = "first call"
"""The verdicts' regime for a layer's first call, made before its weights were moved."""


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


NOTE_SOURCES: tuple[Callable[[_Judged], list[str]], ...] = (
    lambda j: list(j.plan.notes),
    lambda j: output_notes(
        j.plan, j.positional, j.returned, j.reply.output_dtypes, j.reply.output_keys
    ),
    lambda j: j.notes,  # judging's own: training= dropped, the parameters the layer holds
    lambda j: preset_note(j.plan, j.reply),
    lambda j: fold_notes(j.plan, j.names, j.outputs),
    lambda j: unmapped_notes(j.plan, j.reply),
    lambda j: unmoved_notes(j.plan, j.reply, j.weights),
    lambda j: artifact_notes(j.reply.artifact, j.weights, j.plan),
    lambda j: blind_spots(j.plan),
    lambda j: graph_notes(j.reply),
    lambda j: untraced(j.reply.timings, j.reply.graph_error),
    lambda j: regime_notes(j.plan, j.skipped, j.reply.first_call),
    lambda j: tolerance_notes(j.verdicts),
)
"""Where a result's notes come from, in the order the card shows them: each reads what
judging found (:class:`_Judged`) and says what it has to say, or nothing."""
