"""``workers: 0``, the default: one worker per usable core, at most four, where workers are
forked from one TensorFlow import; one elsewhere."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from formula_check.faces import cli
from formula_check.session.options import AUTO_WORKERS_MOST, DEFAULTS, Options, auto_workers

LINUX = sys.platform.startswith("linux")


@pytest.mark.parametrize(
    ("cores", "wanted"), [(1, 1), (2, 2), (3, 3), (4, 4), (16, AUTO_WORKERS_MOST), (0, 1)]
)
def test_auto_workers_is_one_per_core_up_to_the_most(cores: int, wanted: int) -> None:
    assert auto_workers(fork=True, cores=cores) == (wanted if LINUX else 1)


def test_auto_workers_is_one_when_every_worker_would_import_tensorflow() -> None:
    assert auto_workers(fork=False, cores=8) == 1


def test_the_default_follows_this_process_cpu_affinity() -> None:
    cores = len(__import__("os").sched_getaffinity(0)) if LINUX else 1
    assert DEFAULTS.workers == 0
    assert DEFAULTS.worker_count() == (min(cores, AUTO_WORKERS_MOST) if LINUX else 1)
    assert DEFAULTS.engine(Path(".")).workers == DEFAULTS.worker_count()


def test_a_stated_count_is_kept_and_not_forking_does_not_change_it() -> None:
    assert Options(workers=3).worker_count() == 3
    assert Options(workers=3, fork_workers=False).engine(Path(".")).workers == 3
    assert Options(workers=0, fork_workers=False).worker_count() == 1


@pytest.mark.parametrize(("value", "problem"), [(0, ""), (1, ""), (7, "")])
def test_zero_and_counts_are_valid(value: int, problem: str) -> None:
    assert Options(workers=value).problem() == problem


def test_a_negative_count_names_what_is_allowed() -> None:
    assert Options(workers=-2).problem() == (
        "option 'workers' has a bad value -2 (0 for one per core, or a number of workers)"
    )


def test_the_command_line_takes_zero_and_refuses_a_negative(
    capsys: pytest.CaptureFixture[str],
) -> None:
    parser = cli.build_parser()
    assert parser.parse_args(["check", "--workers", "0"]).workers == 0
    assert parser.parse_args(["check", "--workers", "3"]).workers == 3
    assert parser.parse_args(["check"]).workers is None
    with pytest.raises(SystemExit):
        parser.parse_args(["check", "--workers", "-1"])
    assert "must be 0 or more: '-1'" in capsys.readouterr().err
