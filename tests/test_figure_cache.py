"""Figures are drawn once per content: memory first, then disk; damage means a redraw."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from formula_check.model import Location, Status, frozen_map
from formula_check.render import labels_for
from formula_check.render.figure_cache import FigureCache, figure_key
from formula_check.results import CheckResult, ShapeInfo


def result(scale: float = 1.0) -> CheckResult:
    weights = np.linspace(0, scale, 2 * 3 * 4, dtype=np.float32).reshape(2, 3, 4)
    return CheckResult(
        block_id="b",
        location=Location("docs/p.md", 3),
        oracle="attention",
        status=Status.VERIFIED,
        shapes=(ShapeInfo("weights", "output", (2, 3, 4), ("b", "n", "m")),),
        arrays=frozen_map({"weights": weights}),
    )


def test_draws_once_then_reuses_memory_and_disk(tmp_path: Path) -> None:
    labels = labels_for("en")
    first = FigureCache(tmp_path)
    drawn = first(result(), None, labels)
    assert drawn and first.drawn == 1
    assert first(result(), None, labels) == drawn and first.drawn == 1
    second = FigureCache(tmp_path)  # a new process: nothing in memory
    assert second(result(), None, labels) == drawn and second.drawn == 0
    assert [f.media_type for f in drawn] == [f.media_type for f in second(result(), None, labels)]


def test_key_follows_content_language_and_selection() -> None:
    en, zh = labels_for("en"), labels_for("zh")
    base = figure_key(result(), None, en, "n")
    assert base == figure_key(result(), None, en, "n")
    assert base != figure_key(result(2.0), None, en, "n")
    assert base != figure_key(result(), None, zh, "n")
    assert base != figure_key(result(), ("weights",), en, "n")


def test_damaged_entry_is_redrawn(tmp_path: Path) -> None:
    labels = labels_for("en")
    FigureCache(tmp_path)(result(), None, labels)
    [stored] = list(tmp_path.glob("*/*.fcf"))
    stored.write_bytes(stored.read_bytes()[:-10])
    again = FigureCache(tmp_path)
    assert again(result(), None, labels) and again.drawn == 1
