"""Timing the entry (eager, then under ``tf.function``), and reading what it returned."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
import tensorflow as tf

from ..messages import AUTO_REPEATS, NOT_A_TENSOR, CheckRequest, TimingRequest, TimingResult
from ..model import Array
from .entry_call import Runner, bind
from .snippet_failure import clean, phase


def time_all(
    entry: Any, kind: str, request: CheckRequest, arrays: Mapping[str, Array]
) -> tuple[TimingResult, ...]:
    """Each of the request's timing runs, timed."""
    timing = request.timing
    if timing is None:
        return ()
    results = []
    for run in timing.runs:
        call = run.calls.of(kind)
        sources = request.init_sources
        runner = bind(entry, kind, call, arrays, run.init, prefix=run.prefix, sources=sources)
        results.append(_time_runner(runner, run.label, timing, eager_only=run.eager_only))
    return tuple(results)


def _time_runner(
    runner: Runner, label: str, spec: TimingRequest, *, eager_only: bool
) -> TimingResult:
    warmup, repeats = spec.warmup, spec.repeats
    eager = timed_runs(runner, warmup, repeats)
    if eager_only:
        return TimingResult(label, eager)
    compiled = tf.function(runner.target)
    traced = Runner(compiled, runner.args, runner.kwargs, runner.layer)
    trace = None
    try:
        start = time.perf_counter()
        _sync(traced())
        trace = time.perf_counter() - start
        graph = timed_runs(traced, warmup, repeats)
    except Exception as exc:  # code that cannot be traced still has its eager timing
        error = clean(f"{type(exc).__name__}: {exc}")[:300]
        return TimingResult(label, eager, trace, graph_error=error)
    return TimingResult(label, eager, trace, graph)


def timed_runs(runner: Callable[[], Any], warmup: int, repeats: int) -> tuple[float, ...]:
    """``repeats`` timed runs after ``warmup`` untimed ones; ``0``: as :data:`AUTO_REPEATS`
    says."""
    fewest, most, budget = AUTO_REPEATS if repeats == 0 else (repeats, repeats, 0.0)
    with phase("timing"):
        for _ in range(warmup):
            _sync(runner())
        samples: list[float] = []
        while len(samples) < most and (len(samples) < fewest or sum(samples) < budget):
            start = time.perf_counter()
            _sync(runner())
            samples.append(time.perf_counter() - start)
    return tuple(samples)


def _sync(result: Any) -> None:
    """Force the computation to finish (pull results to host), so the clock is honest."""
    for item in _as_sequence(result):
        if hasattr(item, "numpy"):
            item.numpy()


def _as_sequence(result: Any) -> list[Any]:
    if isinstance(result, (tuple, list)):
        return list(result)
    if isinstance(result, dict):
        return list(result.values())
    return [result]


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
    for index, item in enumerate(_as_sequence(result)):
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
