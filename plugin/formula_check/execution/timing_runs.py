"""Timing the entry (eager, then under ``tf.function``: the check's own trace, when the run
calls it as the check did), and reading what it returned."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from formula_check.execution.entry_call import Runner, bind
from formula_check.execution.graph_mode import Traced, as_sequence, briefly, sync, trace
from formula_check.execution.snippet_failure import phase
from formula_check.messages import (
    AUTO_REPEATS,
    NOT_A_TENSOR,
    CheckRequest,
    TimingRequest,
    TimingResult,
    TimingRun,
)
from formula_check.messages.requests import enough_runs
from formula_check.model import Array


def time_all(
    entry: Any,
    kind: str,
    request: CheckRequest,
    arrays: Mapping[str, Array],
    ready: Runner | None = None,
    traced: Traced | None = None,
) -> tuple[TimingResult, ...]:
    """Each of the request's timing runs, timed. ``ready``: the check's own runner, already
    called on the check's arrays, and ``traced`` its trace under ``tf.function``. A run that
    calls the entry as the check did (its own arrays, its own ``init``) times that runner,
    whose calls so far count as one warm-up, and that trace (its first call is the card's
    "first"), rather than building and tracing the entry again: a new layer's first call
    builds its weights, a cold run the warm-up would only repeat."""
    timing = request.timing
    if timing is None:
        return ()
    results = []
    for run in timing.runs:
        call = run.calls.of(kind)
        if ready is not None and _as_checked(run, kind, request):
            runner, warmed, done = ready, 1, traced
        else:
            sources = request.init_sources
            runner = bind(entry, kind, call, arrays, run.init, prefix=run.prefix, sources=sources)
            warmed, done = 0, None
        results.append(_time_runner(runner, run.label, timing, run.eager_only, (warmed, done)))
    return tuple(results)


def _as_checked(run: TimingRun, kind: str, request: CheckRequest) -> bool:
    """Whether ``run`` calls the entry exactly as the check itself did."""
    same_call = run.calls.of(kind) == request.calls.of(kind)
    return not run.prefix and same_call and dict(run.init) == dict(request.init)


def _time_runner(
    runner: Runner,
    label: str,
    spec: TimingRequest,
    eager_only: bool,
    done: tuple[int, Traced | None],
) -> TimingResult:
    """Eager runs, then the trace under ``tf.function`` (timed on its own, as the card's
    "first") and graph runs, each kind's after ``spec.warmup`` untimed runs. ``done``: the
    calls already made eagerly, which count among the eager ones, and the trace already made
    (None: traced here). The trace does not count among the graph's: the call after it still
    runs cold (twice as long as the next ones for a small function), and would be the first
    timed."""
    warmed, traced = done
    warmup, repeats = spec.warmup, spec.repeats
    eager = timed_runs(runner, max(0, warmup - warmed), repeats)
    if eager_only:
        return TimingResult(label, eager)
    if traced is None:
        traced = trace(runner)
    if traced.runner is None:  # code that cannot be traced still has its eager timing
        return TimingResult(label, eager, graph_error=traced.error)
    try:
        graph = timed_runs(traced.runner, warmup, repeats)
    except Exception as exc:  # said as the check said it: one note for both
        return TimingResult(label, eager, traced.seconds, graph_error=briefly(exc))
    return TimingResult(label, eager, traced.seconds, graph)


def timed_runs(runner: Callable[[], Any], warmup: int, repeats: int) -> tuple[float, ...]:
    """``repeats`` timed runs after ``warmup`` untimed ones; ``0``: as :data:`AUTO_REPEATS`
    says (three, and up to five while they are not steady and within its budget)."""
    fewest, most, budget = AUTO_REPEATS if repeats == 0 else (repeats, repeats, 0.0)
    with phase("timing"):
        for _ in range(warmup):
            sync(runner())
        samples: list[float] = []
        while not enough_runs(samples, fewest, most, budget):
            start = time.perf_counter()
            sync(runner())
            samples.append(time.perf_counter() - start)
    return tuple(samples)


def returned_keys(result: Any) -> tuple[str, ...] | None:
    """The keys of a returned dict, in order (compared by name where they name the oracle's
    outputs); ``None`` when the code returned no dict."""
    return tuple(str(key) for key in result) if isinstance(result, dict) else None


def reply_arrays(
    out: list[Any], read: Mapping[str, Array], *more: Mapping[str, Array]
) -> dict[str, Array]:
    """The arrays that travel with a reply: ``more`` (regimes', kept outputs), then what
    the code returned (``out/I``) and the weights read back (``w/NAME``)."""
    arrays: dict[str, Array] = {}
    for extra in more:
        arrays.update(extra)
    arrays.update({f"out/{i}": value for i, value in enumerate(out)})
    arrays.update({f"w/{name}": value for name, value in read.items()})
    return arrays


def outputs(result: Any) -> tuple[list[Any], list[str]]:
    """The returned values as arrays, and the dtype each came back in (bfloat16 and the
    other types NumPy has no number kind for are compared as float32). A value that is no
    array at all (the state list a decoder hands back) keeps its place as an empty array,
    its dtype ``not a tensor:`` and its type: judging says so if
    ``returns=`` names it, and nothing if it skips it with ``_``."""
    out, dtypes = [], []
    for index, item in enumerate(as_sequence(result)):
        with phase("output"):
            dtype = getattr(item, "dtype", None)
            try:
                value = np.asarray(item.numpy() if hasattr(item, "numpy") else item)
            except (TypeError, ValueError):  # a ragged list, a dict of lists
                value = np.asarray(None)
            name = str(getattr(dtype, "name", None) or value.dtype.name)
            if value.dtype.kind not in "biuf":
                if dtype is None:
                    out.append(np.zeros((0,), np.float32))
                    dtypes.append(f"{NOT_A_TENSOR} {type(item).__name__}")
                    continue
                if not getattr(dtype, "is_floating", False):
                    raise TypeError(
                        f"returned value {index} is a {type(item).__name__} of {name}, "
                        "not of numbers"
                    )
                value = value.astype(np.float32)
        out.append(value)
        dtypes.append(name)
    return out, dtypes
