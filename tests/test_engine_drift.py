"""The drift matrix: for every oracle, realistic wrong code must fail, and say where."""

from __future__ import annotations

from collections import Counter

import pytest

from drifts import DRIFTS
from formula_check.model import Status
from formula_check.results import GRAPH_MODE
from implementations import CORRECT
from support import run

pytestmark = pytest.mark.tf


def test_every_oracle_has_at_least_four_drifts() -> None:
    per_oracle = Counter(CORRECT[case][0] for case, *_ in DRIFTS.values())
    assert set(per_oracle) == {oracle for oracle, *_ in CORRECT.values()}
    assert min(per_oracle.values()) >= 4, per_oracle


@pytest.mark.parametrize("name", sorted(DRIFTS))
def test_drift_is_caught(name: str) -> None:
    case, old, new, extra = DRIFTS[name]
    oracle, source, options = CORRECT[case]
    assert old in source, f"the drift {name!r} no longer applies to {case}"
    result = run(oracle, source.replace(old, new, 1), **{**options, **extra})
    assert result.status is Status.MISMATCH, result.headline()
    bad = [v for v in result.verdicts if not v.ok]
    assert bad
    text = result.headline()
    assert text.startswith("docs/page.md:6 [")
    # the headline gives the standard inputs' numbers, and only names the other regimes
    # that differ too (a graph's after "under tf.function"); where only another regime
    # differs, it gives that one's
    shown = [v for v in bad if not v.regime] or bad
    for regime in {v.regime for v in bad if v.regime and shown[0].regime == ""}:
        _, graph, inputs = regime.rpartition(f"{GRAPH_MODE}, ")
        said = f"under {GRAPH_MODE} on the " if graph else "also differs on the "
        assert inputs in text.rsplit(said, 1)[-1]
    for verdict in shown:
        if verdict.problem:
            assert verdict.problem in text
        else:
            assert verdict.used > 1  # some element beyond its own tolerance
            assert verdict.n_bad > 0
            assert f"at ({', '.join(map(str, verdict.max_index))})" in text
            assert f"({', '.join(map(str, verdict.worst_index))})" in text


def test_transposed_shape_is_named_in_dims() -> None:
    oracle, source, options = CORRECT["attention"]
    wrong = source.replace(
        "return output, attention_weights",
        "return tf.transpose(output, [0, 2, 1]), attention_weights",
    )
    result = run(oracle, wrong, **options)
    assert result.status is Status.MISMATCH
    assert (
        "expected (b, n, d_v) = (2, 5, 4), got (2, 4, 5) — read as (b, d_v, n)" in result.headline()
    )


def test_expected_failure_is_honoured() -> None:
    oracle, source, options = CORRECT["attention"]
    result = run(oracle, source.replace("tf.math.sqrt(dk)", "dk"), expect="mismatch", **options)
    assert result.status is Status.MISMATCH and result.outcome_ok
    assert "expected failure" in result.headline()
    passing = run(oracle, source, expect="mismatch", **options)
    assert passing.status is Status.VERIFIED and not passing.outcome_ok
    assert "expected mismatch but got verified" in passing.headline()
