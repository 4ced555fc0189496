"""One check, in its own process: load the snippet, call its entry, trace it under
``tf.function`` (:mod:`.graph_mode`), read weights back, run the input regimes and the timing
runs; answer with what it returned eagerly and as a graph, or what it raised."""

from __future__ import annotations

import contextlib
import dataclasses
import io
import sys
import time
from collections.abc import Iterator, Mapping
from typing import Any

import numpy as np
import tensorflow as tf

from formula_check.execution import artifacts, graph_mode, layer_weights, native_reads
from formula_check.execution.entry_call import (
    Runner,
    arguments,
    bind,
    keywords_not_passed,
    resolve_kind,
)
from formula_check.execution.graph_mode import Traced
from formula_check.execution.moved_weights import moved_call
from formula_check.execution.project_reads import READS, Reads, changed, folder_state, note_written
from formula_check.execution.snippet_failure import (
    MAX_TEXT,
    SnippetRaised,
    clean,
    failure,
    phase,
    said,
)
from formula_check.execution.snippet_module import (
    WorkerState,
    forget_local_modules,
    load_entry,
    modules_now,
)
from formula_check.execution.timing_runs import outputs, reply_arrays, returned_keys, time_all
from formula_check.messages import (
    FIRST,
    GRAPH,
    Call,
    CheckReply,
    CheckRequest,
    RegimeRequest,
    SnippetFailed,
    TimingResult,
)
from formula_check.model import Array

Answer = tuple[CheckReply | SnippetFailed, dict[str, Array]]
"""A check's reply, and the arrays that go with it."""


def check(session: WorkerState, request: CheckRequest, arrays: Mapping[str, Array]) -> Answer:
    """Answer one check request: outputs, weights, timings; or the snippet's error."""
    session.counter += 1
    stdout = io.StringIO()
    before = modules_now(session)
    if str(session.root) not in sys.path:  # the project's own modules are importable
        sys.path.insert(0, str(session.root))
    tf.keras.utils.set_random_seed(request.seed)
    files = Reads()
    native_reads.watch()  # TensorFlow's own reads, told to the hook as Python's are
    folder_before = folder_state(session.root, request.page_folder)
    try:
        with contextlib.redirect_stdout(stdout), READS.recording(session.root, files):
            reply, out = _run(session, request, arrays)
    except SnippetRaised as raised:
        reply, out = failure(raised, request), {}
    finally:  # also when the checker itself failed: the next check must import afresh
        imported = forget_local_modules(session, before)
    for path in sorted(changed(folder_before, folder_state(session.root, request.page_folder))):
        if path not in files.written:
            files.written.add(path)
            note_written(path)
    reply = dataclasses.replace(
        reply,
        stdout=stdout.getvalue()[-MAX_TEXT:],
        local_files=tuple(sorted((set(imported) | files.read) - files.written)),
        written_files=tuple(sorted(files.written)),
        outside_files=tuple(sorted(files.outside)),
        listed_folders=tuple(sorted(files.listed)),
        unseen_reads=tuple(sorted(files.unseen)),
    )
    return reply, out


def _run(session: WorkerState, request: CheckRequest, arrays: Mapping[str, Array]) -> Answer:
    if request.artifact:  # an exported model instead of code (worker/artifacts.py)
        with phase("checking the exported artifact"):
            return artifacts.check(session.root, request, arrays)
    started = time.perf_counter()
    lap = _Laps()
    entry = load_entry(session, request)
    lap("loading the snippet")
    kind = resolve_kind(entry, request)
    call, sources = request.calls.of(kind), request.init_sources
    runner = bind(entry, kind, call, arrays, request.init, sources=sources)
    created: list[tuple[str, tuple[int | None, ...]]] = []
    given = [arrays[name] for name in call.arrays() if name[:3] == "wt/"]
    recorded = (created, given) if kind == "function" else None
    with phase("call"), _recording_variables(recorded):
        result = runner()
    lap("the first call")
    layer = _Moved(request, result)
    if kind != "function":
        layer = _move_weights(runner, request, result, lap)
    request, result, traced = layer.request, layer.result, layer.traced
    out, dtypes = outputs(result)
    kept = _kept_outputs(runner, kind, request, "")
    if kind == "function":
        traced = _traced_on_moved_weights(runner, call, arrays, request.seed, lap)
    traced, graph = _graph_run(runner, traced, lap)
    with contextlib.redirect_stdout(io.StringIO()):  # printed once, from the check itself
        regime_outputs, skipped, keys = _run_regimes(runner, kind, request, arrays)
        lap("input regimes")
        _graph_regimes(graph, (runner, traced), kind, request, (arrays, dict(skipped)), lap)
    snippet_seconds = time.perf_counter() - started
    read, unused = _read_weights(runner, kind, request, lap)
    timings = _timed(entry, kind, request, arrays, (runner, traced), lap)
    reply = CheckReply(
        kind=kind,
        outputs=len(out),
        output_dtypes=tuple(dtypes),
        output_keys=returned_keys(result),
        timings=timings,
        unused_weights=tuple(unused),
        unmapped_weights=tuple(layer.unmapped),
        regimes_skipped=tuple(skipped),
        snippet_seconds=snippet_seconds,
        preset_root=layer.root,
        created_variables=tuple(created),
        unmoved_weights=tuple(layer.unmoved),
        first_call=bool(layer.first.arrays),
        other_keys=_other_keys(result, {**layer.first.keys, **keys, **graph.keys}),
        graph_outputs=graph.count,
        graph_error=graph.error,
        graph_regimes_failed=tuple(graph.failed),
        keywords_not_passed=keywords_not_passed(runner.layer, call) if runner.layer else (),
        phase_seconds=tuple(lap.spent),
    )
    return reply, reply_arrays(out, read, kept, regime_outputs, layer.first.arrays, graph.arrays)


def _read_weights(
    runner: Runner, kind: str, request: CheckRequest, lap: _Laps
) -> tuple[dict[str, Array], list[str]]:
    """A layer's mapped weights as the check left them, and the names of those it never
    built; a function's: none."""
    if kind == "function":
        return {}, []
    read = layer_weights.read_weights(runner.layer, request.weights)
    lap("reading weights")
    return read


def _timed(
    entry: Any,
    kind: str,
    request: CheckRequest,
    arrays: Mapping[str, Array],
    checked: tuple[Runner, Traced],
    lap: _Laps,
) -> tuple[TimingResult, ...]:
    """The request's timing runs (none without timing), given the check's own runner and
    its trace (``checked``)."""
    if request.timing is None:
        return ()
    # What the code prints is shown once, from the check; the same lines again from each
    # warm-up and repeat of every timing run would only bury it.
    with contextlib.redirect_stdout(io.StringIO()):
        timings = time_all(entry, kind, request, arrays, *checked)
    lap("timing")
    return timings


def _traced_on_moved_weights(
    runner: Runner, call: Call, arrays: Mapping[str, Array], seed: int, lap: _Laps
) -> Traced:
    """A function traced on moved weights, after an eager call on them, and called as a graph
    on the check's own: a value the code keeps from one call (a cache, a copy read at trace
    time) then shows as stale, as when a graph is called with the weights of later steps."""
    names = [name for name in dict.fromkeys(call.arrays()) if name[:3] == "wt/"]
    names = [name for name in names if np.asarray(arrays[name]).dtype.kind == "f"]
    values = layer_weights.moved_values([arrays[name] for name in names], seed)
    moved = dict(zip(names, values, strict=True))
    args, kwargs = arguments(call, {**arrays, **moved}, "")
    other = Runner(runner.target, args, kwargs, None)
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            other()
    except Exception as exc:  # said where the graph's outputs would be
        return Traced(None, error=graph_mode.briefly(exc))
    traced = graph_mode.trace(other)
    lap("tracing under tf.function")
    if traced.runner is None:
        return traced
    return Traced(Runner(traced.runner.target, runner.args, runner.kwargs, None), traced.seconds)


@dataclasses.dataclass
class _Graph:
    """What the traced graph returned: ``count`` values on the check's arguments (None:
    ``error`` says why not); its arrays under :data:`GRAPH` and a regime's prefix
    (``graph/r1/out/I``) and each dict's keys by that prefix; the regimes it raised on and
    those it was not called on, each with why. No attribute outputs: a trace leaves symbolic
    tensors on the layer."""

    count: int | None = None
    error: str = ""
    arrays: dict[str, Array] = dataclasses.field(default_factory=dict)
    keys: dict[str, tuple[str, ...] | None] = dataclasses.field(default_factory=dict)
    failed: list[tuple[str, str]] = dataclasses.field(default_factory=list)

    def add(self, prefix: str, result: Any) -> int:
        """What one call of the graph returned, read as the eager result is (a returned
        dict keeps its order), kept under ``GRAPH`` and ``prefix``: how many values."""
        got, _ = outputs(result)
        self.arrays.update({f"{GRAPH}{prefix}out/{i}": value for i, value in enumerate(got)})
        self.keys[f"{GRAPH}{prefix}"] = returned_keys(result)
        return len(got)


def _graph_run(runner: Runner, traced: Traced | None, lap: _Laps) -> tuple[Traced, _Graph]:
    """The trace (``traced``, or made now: after the call whose kept outputs were read, as
    a trace leaves symbolic tensors on the layer), and what the graph returns on the check's
    arguments."""
    if traced is None:
        traced = graph_mode.trace(runner)
        lap("tracing under tf.function")
    result, error = graph_mode.graph_result(traced)
    graph = _Graph(error=error)
    if not error:
        try:
            graph.count = graph.add("", result)
        except SnippetRaised as raised:
            graph = _Graph(error=graph_mode.briefly(raised))
    lap("the graph's call")
    return traced, graph


def _graph_regimes(
    graph: _Graph,
    checked: tuple[Runner, Traced],
    kind: str,
    request: CheckRequest,
    regimes: tuple[Mapping[str, Array], Mapping[str, str]],
    lap: _Laps,
) -> None:
    """Into ``graph``: the traced graph on each regime the eager code ran on (``regimes``:
    the check's arrays, and the regimes it skipped), weights scaled as for the eager call; no
    trace but those ``tf.function`` makes for new sizes, and, where a regime scales a layer's
    weight held as a value (an array, a constant), which a graph keeps as it was traced, one
    made while it is scaled."""
    (runner, traced), (arrays, skipped) = checked, regimes
    if graph.count is None or traced.runner is None:  # not judged as a graph at all
        return
    held = kind != "function" and any(
        layer_weights.held_as_value(holder)
        for _, holder, _ in layer_weights.variables(runner.layer, request.weights, tensor_like)[0]
    )
    for regime in [regime for regime in request.regimes if regime.name not in skipped]:
        target = traced.runner.target
        if held and regime.weight_scale != 1.0:  # traced afresh on the values scaled
            target = tf.function(runner.target)
        try:
            with graph_mode.unfolded(), contextlib.redirect_stdout(io.StringIO()):
                result = _run_regime(runner, kind, request, regime, arrays, target)
            graph.add(regime.prefix, result)
        except SnippetRaised as raised:
            graph.failed.append((regime.name, graph_mode.briefly(raised)))
    lap("the graph on the input regimes")


def tensor_like(array: Array, like: Any) -> Any:
    """A constant of ``like``'s dtype holding ``array``: a moved ``tf.constant`` weight."""
    return tf.constant(array, dtype=like.dtype)


def _other_keys(
    result: Any, keys: Mapping[str, tuple[str, ...] | None]
) -> tuple[tuple[str, tuple[str, ...] | None], ...]:
    """The calls (by prefix) whose returned keys are not those of the main call's ``result``."""
    main = returned_keys(result)
    return tuple((prefix, got) for prefix, got in keys.items() if got != main)


@dataclasses.dataclass(frozen=True)
class _FirstCall:
    """A layer's first call, before its weights were moved: the arrays it returned and kept,
    and the weights it ran with, under ``first/``; and the keys of the dict it returned."""

    arrays: dict[str, Array] = dataclasses.field(default_factory=dict)
    keys: dict[str, tuple[str, ...] | None] = dataclasses.field(default_factory=dict)


def _first_call(runner: Runner, request: CheckRequest, result: Any) -> _FirstCall:
    """The first call, kept to be judged: a layer whose first call is wrong (zeros while it
    builds) is caught although the weights are moved before the call judged on them."""
    got, _ = outputs(result)
    first = {f"{FIRST}out/{i}": value for i, value in enumerate(got)}
    first.update(_kept_outputs(runner, "layer", request, FIRST))
    read, _ = layer_weights.read_weights(runner.layer, request.weights)
    first.update({f"{FIRST}w/{name}": value for name, value in read.items()})
    return _FirstCall(first, {FIRST: returned_keys(result)})


@dataclasses.dataclass
class _Moved:
    """A layer's call on moved weights (:func:`_move_weights`): the request, its weights'
    paths under the preset's sub-layer (``root``); what the call returned, and its trace
    (None: to trace after it); the weights no path maps and those left unmoved, each with
    why; the first call, before the move. A function's: its one call, no more."""

    request: CheckRequest
    result: Any
    traced: Traced | None = None
    root: str = ""
    unmapped: list[tuple[str, tuple[int | None, ...]]] = dataclasses.field(default_factory=list)
    unmoved: list[tuple[str, str]] = dataclasses.field(default_factory=list)
    first: _FirstCall = dataclasses.field(default_factory=_FirstCall)


def _move_weights(runner: Runner, request: CheckRequest, result: Any, lap: _Laps) -> _Moved:
    """A layer's weights found (under the preset's sub-layer, where it has one), moved, and
    the layer called again on them (:func:`.moved_weights.moved_call`); its first call
    (``result``) kept to be judged too."""
    with phase("reading the preset's weights"):
        root = layer_weights.preset_root(runner.layer, request.weights, request.preset_weights)
    if root:  # the preset's paths, under the one sub-layer that holds them
        under = {
            name: f"{root}.{path}" if name in request.preset_weights else path
            for name, path in request.weights.items()
        }
        request = dataclasses.replace(request, weights=under)
    found, unmoved = layer_weights.variables(runner.layer, request.weights, tensor_like)
    unmapped = [(name, tuple(v.shape)) for name, v, mapped in found if not mapped]
    layer = _Moved(request, result, None, root, unmapped, unmoved)
    if request.perturb and found:
        # the first call is judged too, on the weights it ran with
        layer.first = _first_call(runner, request, result)
        layer.traced, layer.result, folded = moved_call(runner, request, found, lap)
        layer.unmoved += folded
    lap("weights moved, called again")
    return layer


class _Laps:
    """Where a check's time in the worker went: ``lap(name)`` closes the phase since the
    previous lap (what ``bench/cold_breakdown.py`` adds up)."""

    def __init__(self) -> None:
        self.spent: list[tuple[str, float]] = []
        self._last = time.perf_counter()

    def __call__(self, name: str) -> None:
        now = time.perf_counter()
        self.spent.append((name, now - self._last))
        self._last = now


def _kept_outputs(
    runner: Runner, kind: str, request: CheckRequest, prefix: str
) -> dict[str, Array]:
    """The outputs the layer keeps on attributes (``returns="... weights=attention_weights"``),
    as they are after the call just made, under ``prefix``."""
    if kind == "function":
        return {}  # a function has no attributes to keep them on: judging says so
    kept = {}
    for name, path in request.attribute_outputs.items():
        with phase(f"reading {name}={path} after the call"):
            value = layer_weights.follow(runner.layer, path)
            if value is None:
                raise ValueError(f"{path} is None after the call")
            got, _ = outputs(value)
            if len(got) != 1:
                raise TypeError(f"{path} holds {len(got)} values, not one array")
        kept[f"{prefix}attr/{name}"] = got[0]
    return kept


@contextlib.contextmanager
def _recording_variables(
    recorded: tuple[list[tuple[str, tuple[int | None, ...]]], list[Array]] | None,
) -> Iterator[None]:
    """Record the trainable variables created meanwhile (a function that builds layers of its
    own) into the list ``recorded`` holds, but those that start as one of the weights it was
    given (``tf.Variable(W_1)`` still computes with the formula's weights) or hold one when
    the call returns (a layer built in the function, then set with ``assign``); nothing when
    ``recorded`` is None."""
    if recorded is None:
        yield
        return
    made, given = recorded
    fresh: list[Any] = []

    def creator(next_creator: Any, **kwargs: Any) -> Any:
        variable = next_creator(**kwargs)
        if getattr(variable, "trainable", False) and not _holds_given(variable, given):
            fresh.append(variable)
        return variable

    with tf.variable_creator_scope(creator):
        yield
    # a weight of its own that never took a given one's value decides the result alone
    made.extend((str(v.name), tuple(v.shape)) for v in fresh if not _holds_given(v, given))


def _holds_given(variable: Any, given: list[Array]) -> bool:
    """Whether ``variable`` holds exactly one of the ``given`` weights (in its own dtype)."""
    value = np.asarray(variable.numpy())
    return any(
        value.shape == w.shape and np.array_equal(value, np.asarray(w, value.dtype)) for w in given
    )


def _run_regimes(
    runner: Runner, kind: str, request: CheckRequest, arrays: Mapping[str, Array]
) -> tuple[dict[str, Array], list[tuple[str, str]], dict[str, tuple[str, ...] | None]]:
    """The same code (the same layer, with the same weights) on each input regime's arrays.
    A regime at other sizes is skipped for a layer, which was built for the check's, and
    where the code cannot run at its sizes (a table precomputed up to a maximum length):
    ``(name, why)`` for each skipped. Also the keys each regime's returned dict has, by
    prefix (None: it returned no dict)."""
    out: dict[str, Array] = {}
    skipped: list[tuple[str, str]] = []
    keys: dict[str, tuple[str, ...] | None] = {}
    for regime in request.regimes:
        if kind != "function" and regime.resized:
            skipped.append((regime.name, "a layer is built for the check's sizes"))
            continue
        try:
            result = _run_regime(runner, kind, request, regime, arrays)
        except SnippetRaised as raised:
            if not regime.resized:
                raise  # at the check's own sizes, an error is the code's
            error = raised.error
            first = (said(error).strip().splitlines() or [""])[0]
            skipped.append((regime.name, clean(f"{type(error).__name__}: {first}")[:200]))
            continue
        got, _ = outputs(result)
        out.update({f"{regime.prefix}out/{i}": value for i, value in enumerate(got)})
        out.update(_kept_outputs(runner, kind, request, regime.prefix))
        keys[regime.prefix] = returned_keys(result)
    return out, skipped, keys


def _run_regime(
    runner: Runner,
    kind: str,
    request: CheckRequest,
    regime: RegimeRequest,
    arrays: Mapping[str, Array],
    target: Any = None,
) -> Any:
    """What the code (``target``: its traced graph; else the entry itself) returns on
    ``regime``'s arrays (a layer's weights scaled meanwhile)."""
    args, kwargs = arguments(regime.calls.of(kind), arrays, regime.prefix)
    scale = regime.weight_scale
    grown = []
    if scale != 1.0 and kind != "function":  # the layer's own weights, in place
        found, _ = layer_weights.variables(runner.layer, request.weights, tensor_like)
        grown = [v for _, v, _ in found]
    try:
        for variable in grown:
            variable.assign(variable.numpy() * scale)
        with phase(f"regime:{regime.name}"):
            return (target or runner.target)(*args, **kwargs)
    finally:
        for variable in grown:  # a power of two: exactly the weights they were
            variable.assign(variable.numpy() / scale)
