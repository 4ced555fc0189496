"""Figures are drawn once per content: memory first, then disk; damage means a redraw."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from formula_check.model import CheckResult, Location, ShapeInfo, Status, frozen_map
from formula_check.render import labels_for
from formula_check.render.figure_cache import FigureCache, figure_key


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


def test_prefetch_draws_a_batch_in_processes_with_the_same_bytes(tmp_path: Path) -> None:
    labels = labels_for("en")
    results = [result(1.0 + i) for i in range(9)]
    cache = FigureCache(tmp_path)
    cache.prefetch([(r, None, labels, "n") for r in results], processes=2)
    assert cache.drawn == 9
    inline = FigureCache()(results[3], None, labels)
    assert cache(results[3], None, labels) == inline, "a drawing process gives the same PNG bytes"
    assert cache.drawn == 9
    again = FigureCache(tmp_path)
    again.prefetch([(r, None, labels, "n") for r in results], processes=2)
    assert again.drawn == 0, "everything came from disk"


def test_small_batches_are_left_to_the_build_process(tmp_path: Path) -> None:
    cache = FigureCache(tmp_path)
    cache.prefetch([(result(), None, labels_for("en"), "n")], processes=2)
    assert cache.drawn == 0 and not list(tmp_path.glob("*/*.fcf"))
