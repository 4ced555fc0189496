"""The build's lines about its checks as a whole: start, progress on a long run, summary."""

from __future__ import annotations

import dataclasses
import logging

import pytest

from formula_check.faces.mkdocs_plugin.tally import Tally
from formula_check.model import Location, Status
from formula_check.results import CheckResult, FormulaVerdict

FAIL_ON = frozenset({"mismatch", "error", "timeout"})


def result(status: Status, *, expect: str = "verified", cached: bool = False) -> CheckResult:
    return CheckResult(
        "b", Location("docs/a.md", 1), "softmax", status, expect=expect, cached=cached
    )  # type: ignore[arg-type]


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_summary_counts_each_kind_and_the_cache() -> None:
    clock = Clock()
    tally = Tally(FAIL_ON, clock=clock)
    tally.total = 6
    for each in (
        result(Status.VERIFIED, cached=True),
        result(Status.VERIFIED),
        result(Status.MISMATCH, expect="mismatch", cached=True),
        result(Status.MISMATCH),
        result(Status.SKIPPED),
        result(Status.TIMEOUT, expect="verified"),
    ):
        tally.add(each)
    clock.now += 2.5
    assert tally.summary() == (
        "formula-check: 6 blocks in 2.50 s: 2 verified, 1 expected failures, 2 failing, "
        "1 skipped; 2 from the cache"
    )


def test_formulas_not_checked_are_counted_whether_their_block_passed_or_failed() -> None:
    """A block verified on its code alone is still said, in the line every build ends with;
    so is one that failed because its formula had to be checked."""
    clock = Clock()
    tally = Tally(FAIL_ON, clock=clock)
    tally.total = 3
    unchecked = FormulaVerdict("not_executable", message="primes (x') name no executable ...")
    required = dataclasses.replace(unchecked, required=True)
    for status, formula in (
        (Status.VERIFIED, unchecked),
        (Status.MISMATCH, required),
        (Status.VERIFIED, FormulaVerdict("agrees", "softmax(x)")),
    ):
        tally.add(dataclasses.replace(result(status), formula=formula))
    assert tally.summary() == (
        "formula-check: 3 blocks in 0 µs: 2 verified, 1 failing; 2 formulas not checked"
    )


def test_a_status_fail_on_leaves_out_is_counted_apart() -> None:
    tally = Tally(frozenset({"mismatch"}))
    tally.total = 1
    tally.add(result(Status.TIMEOUT))
    assert "1 not verified, with a status fail_on lets pass" in tally.summary()


def test_no_block_no_summary() -> None:
    assert Tally(FAIL_ON).summary() == ""


def test_progress_only_on_a_long_run(caplog: pytest.LogCaptureFixture) -> None:
    clock = Clock()
    tally = Tally(FAIL_ON, clock=clock, every=10.0)
    tally.total = 4
    with caplog.at_level(logging.INFO):
        tally.add(result(Status.VERIFIED))
        clock.now += 11
        tally.add(result(Status.VERIFIED))
        clock.now += 3
        tally.add(result(Status.VERIFIED))
        clock.now += 20
        tally.add(result(Status.VERIFIED))  # the last: the summary says the rest
    lines = [r.getMessage() for r in caplog.records]
    assert lines == ["formula-check: 2 of 4 blocks checked (11.00 s)"]
