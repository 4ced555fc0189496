"""Drawing the figures of a card: milliseconds per figure set and the size of each SVG.

Times :func:`formula_check.render.figures_for` in this process on the results a site
typically shows, median over ``--repeats`` after one warm-up call:

* attention weights of shape (2, 5, 7), and (2, 8, 5, 7) for eight heads;
* a (50, 64) positional-encoding matrix and (2, 5, 64) feed-forward activations;
* a |Δ| map of a (2, 5, 16) mismatch with a NaN cell;
* a five-point scaling sweep.

No TensorFlow and no worker: only the drawing code.
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "plugin"))

import numpy as np  # noqa: E402

from formula_check.model import Location, Status  # noqa: E402
from formula_check.render import figures_for, labels_for  # noqa: E402
from formula_check.results import CheckResult, ShapeInfo, SweepPoint, Verdict  # noqa: E402


def result(**changes: object) -> CheckResult:
    base = CheckResult("bench", Location("docs/bench.md", 1), "oracle", Status.VERIFIED)
    return dataclasses.replace(base, **changes)  # type: ignore[arg-type]


def attention(heads: int | None) -> CheckResult:
    rng = np.random.default_rng(0)
    weights = rng.random((2, 5, 7) if heads is None else (2, heads, 5, 7))
    weights /= weights.sum(axis=-1, keepdims=True)
    return result(arrays={"weights": weights})


def encoding() -> CheckResult:
    position = np.arange(50)[:, np.newaxis]
    rates = 1.0 / 10000 ** (2 * (np.arange(64) // 2) / 64)
    angles = position * rates
    matrix = np.where(np.arange(64) % 2 == 0, np.sin(angles), np.cos(angles))
    shape = ShapeInfo("output", "output", (50, 64), ("position", "d_model"))
    return result(arrays={"output": matrix}, shapes=(shape,))


def hidden() -> CheckResult:
    rng = np.random.default_rng(1)
    return result(arrays={"hidden": np.maximum(rng.normal(size=(2, 5, 64)), 0.0)})


def delta() -> CheckResult:
    rng = np.random.default_rng(2)
    difference = rng.random((2, 5, 16)) * 1e-6
    difference[1, 3, 7] = 3.1e-2
    difference[0, 2, 2] = np.nan
    verdict = Verdict(
        "output", False, ("b", "n", "d_v"), (2, 5, 16), (2, 5, 16), 3.1e-2, 0.2, (1, 3, 7)
    )
    arrays = {"delta": difference, "delta_worst": np.array([1, 3, 7])}
    return result(status=Status.MISMATCH, verdicts=(verdict,), arrays=arrays)


def sweep() -> CheckResult:
    points = tuple(
        SweepPoint(size, 2e-5 * (size / 16) ** 1.8, 3e-6 * size / 16)
        for size in (16, 32, 64, 128, 256)
    )
    return result(sweep=points)


CASES = {
    "attention 5×7": attention(None),
    "attention 8 heads": attention(8),
    "encoding 50×64": encoding(),
    "hidden 5×64": hidden(),
    "delta (2, 5, 16)": delta(),
    "sweep 5 points": sweep(),
}


def timed(case: CheckResult, language: str, repeats: int) -> tuple[float, list[tuple[str, int]]]:
    """Median milliseconds for one figure set, and (name, bytes) of each figure."""
    labels = labels_for(language)
    figures = figures_for(case, None, labels)  # warm-up: imports and first-call caches
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        figures_for(case, None, labels)
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1e3, [(f.name, len(f.data)) for f in figures]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--language", default="en", help="labels to draw with (en, zh)")
    args = parser.parse_args()
    print(f"{'result':<20} {'figures':<10} {'ms / set':>9} {'SVG bytes':>10}")
    total = 0.0
    for name, case in CASES.items():
        milliseconds, sizes = timed(case, args.language, args.repeats)
        total += milliseconds
        names = ", ".join(figure for figure, _ in sizes)
        size = ", ".join(str(count) for _, count in sizes)
        print(f"{name:<20} {names:<10} {milliseconds:9.2f} {size:>10}")
    print(f"{'all six':<20} {'':<10} {total:9.2f}")


if __name__ == "__main__":
    main()
