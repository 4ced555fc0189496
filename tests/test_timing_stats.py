"""The oracle's own timing on a card: as many runs as its budget allows, within bounds."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Mapping
from typing import Any

import numpy as np

from formula_check.checking import timing_stats
from formula_check.messages.requests import STEADY
from formula_check.oracles import get_oracle
from formula_check.planning.plan import plan_check
from support import spec_for


def _planned_with(compute: Any) -> Any:
    plan = plan_check(spec_for("softmax", "def f(x):\n    return x\n"), ".", with_timing=False)
    return dataclasses.replace(
        plan, oracle=dataclasses.replace(get_oracle("softmax"), compute=compute)
    )


def test_a_slow_oracle_is_timed_the_fewest_times_a_fast_one_until_steady() -> None:
    calls: list[float] = []

    def slow(arrays: Mapping[str, Any], params: Mapping[str, Any]) -> dict[str, Any]:
        calls.append(time.perf_counter())
        time.sleep(timing_stats.ORACLE_BUDGET)
        return {"output": np.zeros(1)}

    stats = timing_stats.oracle_timing(_planned_with(slow), {}, {})
    assert stats.repeats == len(calls) == timing_stats.ORACLE_RUNS[0]
    assert stats.median >= timing_stats.ORACLE_BUDGET

    def fast(arrays: Mapping[str, Any], params: Mapping[str, Any]) -> dict[str, Any]:
        return {"output": np.zeros(1)}

    # far within the budget: fewer than the most only once the runs are steady
    quick = timing_stats.oracle_timing(_planned_with(fast), {}, {})
    fewest, most = timing_stats.ORACLE_RUNS
    assert fewest <= quick.repeats <= most
    assert quick.repeats == most or quick.spread <= STEADY * quick.median
