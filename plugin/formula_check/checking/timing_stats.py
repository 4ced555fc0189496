"""Timings as a result shows them: the worker's samples summed up (median and spread), the
sweep's points, and the oracle's own time. Pure NumPy, part of judging a reply."""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Any

from formula_check.messages import TimingResult
from formula_check.messages.requests import enough_runs, median_and_spread
from formula_check.model import Array
from formula_check.planning.plan import Plan
from formula_check.results import SweepPoint, TimingStats


def _stats(label: str, samples: Sequence[float], first: float = 0.0) -> TimingStats:
    median, spread = median_and_spread(samples)
    return TimingStats(label, median, spread, len(samples), first)


def timing_stats(runs: Sequence[TimingResult]) -> list[TimingStats]:
    """The card's timings: eager and ``tf.function`` medians of each timed run (the
    size sweep's runs are the scaling plot's, not these)."""
    stats: list[TimingStats] = []
    for run in runs:
        if run.label.startswith("sweep"):
            continue
        suffix = "" if run.label == "check" else f" ({run.label})"
        stats.append(_stats(f"eager{suffix}", run.eager))
        if run.graph is not None:
            stats.append(_stats(f"tf.function{suffix}", run.graph, first=run.trace or 0.0))
    return stats


def sweep_points(runs: Sequence[TimingResult]) -> tuple[SweepPoint, ...]:
    """One point per size of a ``sweep=`` run: the size and its eager median and spread."""
    points = []
    for run in runs:
        label = run.label
        if label.startswith("sweep"):
            stats = _stats(label, run.eager)
            points.append(SweepPoint(int(label.rsplit("=", 1)[1]), stats.median, stats.spread))
    return tuple(points)


ORACLE_RUNS = (2, 5)
"""The fewest and the most runs of the oracle timed for a card."""
ORACLE_BUDGET = 0.05
"""Seconds of oracle runs after which no more are timed (once the fewest are in): a NumPy
reference at a tutorial's sizes takes tens of milliseconds a run, and its median is no
less honest for two runs than for five; the card says how many."""


def oracle_timing(
    plan: Plan,
    arrays: Mapping[str, Array],
    params: Mapping[str, Any],
    done: Sequence[float] = (),
) -> TimingStats:
    """How long the float64 oracle takes on the block's inputs: the median of at least the
    fewest of :data:`ORACLE_RUNS`, more (up to the most) only while they are not steady (as
    the code's automatic repeats: :func:`~formula_check.messages.requests.steady`) and add
    up to less than :data:`ORACLE_BUDGET`. ``done``: the seconds of runs already made of this
    very call (the one that gave the expected values, timed as it ran), counted among them
    rather than made again."""
    fewest, most = ORACLE_RUNS
    samples: list[float] = list(done)[:most]
    while not enough_runs(samples, fewest, most, ORACLE_BUDGET):
        start = time.perf_counter()
        plan.oracle.compute(arrays, params)
        samples.append(time.perf_counter() - start)
    return _stats("oracle (NumPy float64)", samples)
