"""What the CLI prints while it checks: colour only for a terminal, the time left on a long
run, the TensorFlow start named while the first block waits for it."""

from __future__ import annotations

import io

from formula_check.model import Location, Status
from formula_check.project.progress import Progress, counts_line, paint, summary, wants_colour
from formula_check.results import CheckResult


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def result(status: Status, *, cached: bool = False) -> CheckResult:
    return CheckResult("b", Location("docs/a.md", 3), "softmax", status, cached=cached, elapsed=0.5)


def test_colour_only_on_a_terminal_and_never_with_no_color() -> None:
    assert wants_colour(Terminal(), {}) is True
    assert wants_colour(Terminal(), {"NO_COLOR": "1"}) is False
    assert wants_colour(io.StringIO(), {}) is False


def test_outcomes_are_painted_by_kind_and_plain_text_stays_plain() -> None:
    assert paint("1 mismatch", "mismatch", True) == "\x1b[31m1 mismatch\x1b[0m"
    assert paint("1 mismatch", "mismatch", False) == "1 mismatch"
    line = counts_line([result(Status.VERIFIED), result(Status.MISMATCH)], colour=True)
    assert line == "\x1b[32m1 verified\x1b[0m, \x1b[31m1 mismatch\x1b[0m"
    told = summary([result(Status.MISMATCH)], pages=1, seconds=1.0, deselected=0, is_failure=bool)
    assert "\x1b[" not in told, "no colour unless asked"


def test_a_long_run_says_how_long_is_left_from_the_blocks_that_ran() -> None:
    clock = Clock()
    stream = io.StringIO()
    with Progress(stream, 4, live=False, colour=False, clock=clock) as progress:
        clock.now = 6.0
        progress.finished(result(Status.VERIFIED))
        clock.now = 12.0
        progress.finished(result(Status.VERIFIED))
    lines = stream.getvalue().splitlines()
    assert lines[0].startswith("[1/4] docs/a.md:3 [b] verified"), "a short run says no more"
    assert lines[1].startswith("[2/4, ~0:12 left] docs/a.md:3 [b] verified")


def test_cached_blocks_alone_estimate_nothing() -> None:
    clock = Clock()
    progress = Progress(io.StringIO(), 3, live=False, colour=False, clock=clock)
    clock.now = 20.0
    progress.finished(result(Status.VERIFIED, cached=True))
    assert progress.left() == ""


def test_the_live_line_names_the_tensorflow_start_while_the_first_block_waits() -> None:
    clock = Clock()
    stream = io.StringIO()
    with Progress(stream, 2, live=True, colour=False, clock=clock) as progress:
        clock.now = 3.0
        progress.checking("docs/a.md:3 [a]")
    assert "[0/2 0:03] starting TensorFlow, then docs/a.md:3 [a]" in stream.getvalue()
