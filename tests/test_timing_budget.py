"""How many timed runs a card's figures come from, and what runs before them.

With no ``repeats=`` stated a run is timed three times, a fourth and fifth time only while the
runs disagree (and fit the budget); a stated count is that count whatever the runs do. The
check's own runner, already called, is timed as it is rather than built again, and its calls
stand for the eager warm-up; the graph keeps its warm-up after the trace. The worker's side
runs in a new interpreter (it imports TensorFlow), on a clock the test sets."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
import textwrap
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from formula_check.checking import timing_stats
from formula_check.messages import AUTO_REPEATS
from formula_check.messages.requests import STEADY, enough_runs, median_and_spread, steady
from formula_check.planning.plan import plan_check
from support import spec_for

FEWEST, MOST, BUDGET = AUTO_REPEATS


# -- the rule, pure --------------------------------------------------------------------------


@pytest.mark.parametrize("count", range(1, 10))
def test_the_median_and_spread_are_numpys_percentiles(count: int) -> None:
    rng = np.random.default_rng(count)
    for _ in range(50):
        samples = list(rng.lognormal(-5.0, 1.0, size=count))
        q1, median, q3 = np.percentile(samples, [25, 50, 75])
        got_median, got_spread = median_and_spread(samples)
        assert got_median == pytest.approx(median, rel=1e-12, abs=0.0)
        assert got_spread == pytest.approx((q3 - q1) / 2, rel=1e-12, abs=1e-18)


def test_the_median_and_spread_do_not_depend_on_the_order_and_refuse_no_samples() -> None:
    assert median_and_spread([3.0, 1.0, 2.0]) == median_and_spread([1.0, 2.0, 3.0]) == (2.0, 0.5)
    assert median_and_spread([7.0]) == (7.0, 0.0)
    with pytest.raises(ValueError, match="no samples"):
        median_and_spread([])


def test_runs_are_steady_only_when_their_spread_is_within_the_fraction_of_their_median() -> None:
    assert STEADY == 0.05
    assert steady([10.0, 10.0, 10.0])
    assert steady([10.0, 10.0, 11.0])  # spread 0.25: 2.5 %
    assert not steady([10.0, 10.0, 13.0])  # spread 0.75: 7.5 %
    assert not steady([1.0, 2.0, 3.0])
    # the spread is the quartiles', so one far run among five still leaves them steady
    assert steady([10.0, 10.0, 10.0, 10.0, 40.0])
    assert not steady([10.0, 10.0, 14.0, 14.0, 14.0])


def test_a_stated_count_is_that_count_whatever_the_runs_do() -> None:
    for count in (1, 2, 4, 7):
        for runs in ([1.0] * 9, [0.001, 5.0] * 5):
            stops = [n for n in range(10) if enough_runs(runs[:n], count, count, 0.0)]
            assert stops[0] == count, (count, runs)


def test_automatic_runs_stop_at_the_fewest_when_steady_and_go_on_while_not() -> None:
    def made(durations: list[float]) -> int:
        samples: list[float] = []
        for duration in durations:
            if enough_runs(samples, FEWEST, MOST, BUDGET):
                break
            samples.append(duration)
        return len(samples)

    assert (FEWEST, MOST, BUDGET) == (3, 5, 0.25)
    assert made([0.010] * 9) == FEWEST
    assert made([0.010, 0.020] * 5) == MOST  # never steady: as many as allowed
    assert made([0.010, 0.013, 0.010, 0.010, 0.010]) == 4  # steady at four
    assert made([0.100, 0.200, 0.100, 0.100]) == FEWEST  # unsteady, but the budget is spent
    assert made([0.0001, 0.0003] * 5) == MOST  # a fast call: the budget is no excuse
    assert not enough_runs([0.010] * (FEWEST - 1), FEWEST, MOST, BUDGET)  # never fewer
    assert not enough_runs([1.0] * (FEWEST - 1), FEWEST, MOST, BUDGET)  # even past the budget


# -- the oracle's runs, in the build process -------------------------------------------------


def _oracle_on_clock(
    durations: list[float], monkeypatch: pytest.MonkeyPatch
) -> tuple[Any, list[float]]:
    """A plan whose oracle takes ``durations`` seconds, one after the other, on a clock the
    test sets; the seconds of the runs it made."""
    clock = [0.0]
    made: list[float] = []
    monkeypatch.setattr(timing_stats.time, "perf_counter", lambda: clock[0])

    def compute(arrays: Mapping[str, Any], params: Mapping[str, Any]) -> dict[str, Any]:
        seconds = durations[len(made)]
        made.append(seconds)
        clock[0] += seconds
        return {"output": np.zeros(1)}

    plan = plan_check(spec_for("softmax", "def f(x):\n    return x\n"), ".", with_timing=False)
    oracle = dataclasses.replace(plan.oracle, compute=compute)
    return dataclasses.replace(plan, oracle=oracle), made


def test_the_oracle_timed_steadily_stops_at_the_fewest_runs(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    plan, made = _oracle_on_clock([0.002] * 9, monkeypatch)
    stats = timing_stats.oracle_timing(plan, {}, {}, done=[0.002])
    fewest, _ = timing_stats.ORACLE_RUNS
    assert stats.repeats == fewest and len(made) == fewest - 1
    assert (stats.median, stats.spread) == (0.002, 0.0)


def test_the_oracle_timed_unsteadily_goes_on_to_the_most_runs(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    plan, made = _oracle_on_clock([0.001, 0.004] * 5, monkeypatch)
    stats = timing_stats.oracle_timing(plan, {}, {}, done=[0.002])
    _, most = timing_stats.ORACLE_RUNS
    assert stats.repeats == most and len(made) == most - 1
    assert (stats.median, stats.spread) == median_and_spread([0.002, *made])


def test_the_oracle_unsteady_past_its_budget_stops_at_the_fewest(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    slow = timing_stats.ORACLE_BUDGET
    plan, made = _oracle_on_clock([slow, slow / 2, slow, slow], monkeypatch)
    stats = timing_stats.oracle_timing(plan, {}, {}, done=[slow / 4])
    assert stats.repeats == timing_stats.ORACLE_RUNS[0] and made == [slow]


# -- the worker's runs, in a new interpreter -------------------------------------------------

WORKER_SIDE = r"""
import dataclasses, json, sys
sys.path.insert(0, TESTS)
from formula_check.model import TimingSpec
from formula_check.planning.plan import plan_check
from formula_check.execution import graph_mode
from formula_check.execution import timing_runs
from formula_check.execution.entry_call import bind, resolve_kind
from support import spec_for

facts = {}

# timed_runs on a clock the script sets: each call of the runner takes the next duration
clock = [0.0]
timing_runs.time.perf_counter = lambda: clock[0]

def on_clock(durations):
    calls = []
    def runner():
        calls.append(durations[len(calls)])
        clock[0] += calls[-1]
    return runner, calls

def timed(durations, warmup, repeats):
    runner, calls = on_clock(durations)
    samples = timing_runs.timed_runs(runner, warmup, repeats)
    return {"samples": list(samples), "calls": len(calls)}

facts["stated"] = timed([8.0, 2**-10, 0.5, 2**-9, 0.25, 0.125, 0.125], 2, 4)
facts["stated_one"] = timed([2**-10, 4.0, 4.0], 0, 1)
facts["auto_steady"] = timed([0.5] + [2**-7] * 9, 1, 0)
facts["auto_unsteady"] = timed([0.5] + [2**-7, 2**-6] * 5, 1, 0)
facts["auto_slow"] = timed([0.5, 0.125, 0.25, 0.125, 0.125, 0.125], 1, 0)

# time_all: the check's own runner, or the entry built again
SOURCE = '''
import tensorflow as tf

BUILT = []
TRACED = []

class LayerNorm(tf.keras.layers.Layer):
    def __init__(self):
        super().__init__()
        BUILT.append(self)

    def build(self, shape):
        self.gamma = self.add_weight(shape=shape[-1:], initializer="ones")
        self.beta = self.add_weight(shape=shape[-1:], initializer="zeros")

    def call(self, x):
        if not tf.executing_eagerly():  # Python runs here once per trace
            TRACED.append(self)
        mean, variance = tf.nn.moments(x, axes=[-1], keepdims=True)
        return self.gamma * (x - mean) / tf.sqrt(variance + 1e-6) + self.beta
'''
timing_runs.time.perf_counter = __import__("time").perf_counter
seen = []
real_timed_runs = timing_runs.timed_runs

def spying(runner, warmup, repeats):
    seen.append((runner, warmup, repeats))
    return real_timed_runs(runner, warmup, repeats)

timing_runs.timed_runs = spying

def timed_all(timing, use_ready, trace_first=False):
    namespace = {}
    exec(SOURCE, namespace)
    spec = spec_for("layer_norm", SOURCE, weights={"gamma": "gamma", "beta": "beta"})
    plan = plan_check(dataclasses.replace(spec, timing=timing), ".")
    request, arrays = plan.request, dict(plan.arrays)
    entry = namespace["LayerNorm"]
    kind = resolve_kind(entry, request)
    call = request.calls.of(kind)
    ready = bind(entry, kind, call, arrays, request.init, sources=request.init_sources)
    ready()  # the check's own call: builds the layer
    traced = graph_mode.trace(ready) if trace_first else None  # the check's own trace
    seen.clear()
    results = timing_runs.time_all(
        entry, kind, request, arrays, ready if use_ready else None, traced
    )
    return {
        "kind": kind,
        "built": len(namespace["BUILT"]),
        "traces": len(namespace["TRACED"]),
        "first_is_the_checks": traced is not None and results[0].trace == traced.seconds,
        "runs": [
            {"label": r.label, "eager": len(r.eager), "graph": len(r.graph or ()),
             "trace": r.trace is not None, "error": r.graph_error}
            for r in results
        ],
        "timed": [
            {"ready": runner is ready, "warmup": warmup, "repeats": repeats}
            for runner, warmup, repeats in seen
        ],
    }

facts["ready"] = timed_all(TimingSpec(), True)
facts["built_again"] = timed_all(TimingSpec(), False)
facts["ready_stated"] = timed_all(TimingSpec(warmup=3, repeats=2), True)
facts["ready_other_sizes"] = timed_all(TimingSpec(dims={"n": 6}), True)
facts["ready_traced"] = timed_all(TimingSpec(), True, trace_first=True)
facts["other_sizes_traced"] = timed_all(TimingSpec(dims={"n": 6}), True, trace_first=True)
print(json.dumps(facts))
"""


@pytest.fixture(scope="module")
def worker_side() -> dict[str, Any]:
    tests = str(Path(__file__).resolve().parent)
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2", "TF_ENABLE_ONEDNN_OPTS": "0"}
    code = f"TESTS = {tests!r}\n" + textwrap.dedent(WORKER_SIDE)
    done = subprocess.run(
        [sys.executable, "-c", code], check=False, capture_output=True, text=True, env=env
    )
    assert done.returncode == 0, done.stderr[-4000:]
    facts: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return facts


@pytest.mark.tf
def test_stated_repeats_are_made_exactly_after_the_stated_warm_ups(
    worker_side: dict[str, Any],
) -> None:
    stated = worker_side["stated"]
    assert stated["calls"] == 2 + 4  # unsteady and past any budget: still four
    assert stated["samples"] == [0.5, 2**-9, 0.25, 0.125]  # the two warm-ups are not among them
    assert worker_side["stated_one"] == {"samples": [2**-10], "calls": 1}


@pytest.mark.tf
def test_automatic_repeats_follow_the_runs_steadiness_and_budget(
    worker_side: dict[str, Any],
) -> None:
    assert worker_side["auto_steady"] == {"samples": [2**-7] * FEWEST, "calls": 1 + FEWEST}
    unsteady = worker_side["auto_unsteady"]
    assert unsteady["calls"] == 1 + MOST and len(unsteady["samples"]) == MOST
    assert worker_side["auto_slow"] == {"samples": [0.125, 0.25, 0.125], "calls": 1 + FEWEST}


@pytest.mark.tf
def test_the_checks_own_layer_is_timed_its_call_standing_for_the_eager_warm_up(
    worker_side: dict[str, Any],
) -> None:
    ready = worker_side["ready"]
    assert ready["kind"] == "layer"
    assert ready["built"] == 1, "the layer the check built and called is the one timed"
    (run,) = ready["runs"]
    assert run["label"] == "check" and run["trace"] and not run["error"]
    assert FEWEST <= run["eager"] <= MOST and FEWEST <= run["graph"] <= MOST
    eager, graph = ready["timed"]
    assert eager == {"ready": True, "warmup": 0, "repeats": 0}
    # the call after the trace still runs cold: the graph keeps its warm-up
    assert graph["ready"] is False and graph["warmup"] == 1


@pytest.mark.tf
def test_without_the_checks_runner_the_entry_is_built_again_and_warmed_up(
    worker_side: dict[str, Any],
) -> None:
    again = worker_side["built_again"]
    assert again["built"] == 2
    eager, graph = again["timed"]
    assert eager["ready"] is False and eager["warmup"] == 1 and graph["warmup"] == 1


@pytest.mark.tf
def test_stated_warm_ups_count_the_checks_call_and_stated_repeats_are_exact(
    worker_side: dict[str, Any],
) -> None:
    stated = worker_side["ready_stated"]
    (run,) = stated["runs"]
    assert (run["eager"], run["graph"]) == (2, 2)
    eager, graph = stated["timed"]
    assert (eager["ready"], eager["warmup"], eager["repeats"]) == (True, 2, 2)
    assert (graph["warmup"], graph["repeats"]) == (3, 2)


@pytest.mark.tf
def test_a_run_at_other_sizes_builds_its_own_layer(worker_side: dict[str, Any]) -> None:
    other = worker_side["ready_other_sizes"]
    assert other["built"] == 2, "timing_dims: a layer built for the check's sizes is not reused"
    (run,) = other["runs"]
    assert run["label"] == "timing" and run["trace"]
    eager, _ = other["timed"]
    assert eager["ready"] is False and eager["warmup"] == 1


@pytest.mark.tf
def test_the_checks_own_trace_is_timed_and_not_traced_again(worker_side: dict[str, Any]) -> None:
    traced = worker_side["ready_traced"]
    assert traced["traces"] == 1, "the check traced its layer once; the timing reuses it"
    assert traced["first_is_the_checks"], "the card's first graph call is the check's trace"
    (run,) = traced["runs"]
    assert run["trace"] and not run["error"] and FEWEST <= run["graph"] <= MOST
    assert worker_side["ready"]["traces"] == 1  # without the check's trace: one of its own
    # at other sizes the run builds and traces a layer of its own
    assert worker_side["other_sizes_traced"]["traces"] == 2
