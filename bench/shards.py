"""``formula-check check --shard I/N`` on a generated site: are the shards balanced, and is
their merge the unsharded run?

A site of ``--pages`` pages of 4 blocks (``sitegen.py``; 100 pages: 400 blocks) is checked
once whole, which gives every block's time; then as 1, 2 and 4 shards, one after the other
(each shard a fresh process, ``--no-cache``, balanced by the whole run's report). For each
shard: its wall time and the time of its own blocks, against the total over N (target
within ±15 %). Each N's shards are merged and the merged report compared with the whole
run's, less each block's own time.

    python bench/shards.py --pages 100
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import sitegen  # noqa: E402

TARGET = 0.15
"""How far a shard's time may be from the total over N."""


def formula_check(site: Path, *argv: str) -> tuple[int, float]:
    """Run the command in ``site``; its exit code and wall seconds."""
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "formula_check.faces.cli", *argv],
        cwd=site,
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode not in (0, 1):
        raise SystemExit(f"formula-check {' '.join(argv)} failed:\n{done.stderr}")
    return done.returncode, time.perf_counter() - started


def timeless(path: Path) -> Any:
    """A report less what differs between two runs of the same blocks: their times."""
    document = json.loads(path.read_text(encoding="utf-8"))
    document.pop("shard", None)
    for block in document["blocks"]:
        block["seconds"] = None
        block["timings"] = {}
    return document


def block_seconds(path: Path, by: Path | None = None) -> float:
    """The seconds of the blocks of report ``path``, as it measured them or as report ``by``
    did (the times the shards were balanced by: the split's own balance, without the noise
    of a second measurement)."""
    blocks = json.loads(path.read_text("utf-8"))["blocks"]
    if by is None:
        return sum(block["seconds"] for block in blocks)
    known = {
        (block["page"], block["id"], block["line"]): block["seconds"]
        for block in json.loads(by.read_text("utf-8"))["blocks"]
    }
    return sum(known[block["page"], block["id"], block["line"]] for block in blocks)


def run_shards(
    site: Path, count: int, whole: Path
) -> tuple[list[tuple[float, float, float]], bool]:
    """Each shard's (wall, blocks' own, blocks' by the whole run) seconds; whether their
    merge is the whole run."""
    times, reports = [], []
    for index in range(1, count + 1):
        report = site / f"shard-{index}-of-{count}.json"
        shard = f"--shard={index}/{count}"
        _, wall = formula_check(
            site, "check", "--no-cache", shard, "--timings", str(whole), "--json", str(report)
        )
        times.append((wall, block_seconds(report), block_seconds(report, whole)))
        reports.append(str(report))
    merged = site / f"merged-{count}.json"
    formula_check(site, "merge", "--json", str(merged), *reports)
    return times, timeless(merged) == timeless(whole)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pages", type=int, default=100, help="4 blocks a page (default 100)")
    parser.add_argument("--shards", type=int, nargs="+", default=[1, 2, 4])
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="fc-shards-") as folder:
        site = Path(folder)
        sitegen.write_site(site, sitegen.generate(args.pages), heatmaps=False)
        whole = site / "whole.json"
        formula_check(site, "check", "--no-cache", "--json", str(whole))
        blocks = len(json.loads(whole.read_text("utf-8"))["blocks"])
        print(f"site: {args.pages} pages, {blocks} blocks; load {os.getloadavg()[0]:.1f}")
        print(f"whole run: blocks' own time {block_seconds(whole):.1f} s")
        worst = 0.0
        for count in args.shards:
            times, same = run_shards(site, count, whole)
            walls = sum(wall for wall, _, _ in times)
            owns = sum(own for _, own, _ in times)
            planned = sum(plan for _, _, plan in times)
            print(f"{count} shard{'s' if count > 1 else ''}: merged report = whole run: {same}")
            for index, (wall, own, plan) in enumerate(times, 1):
                off_wall = wall / (walls / count) - 1
                off_own = own / (owns / count) - 1
                off_plan = plan / (planned / count) - 1
                worst = max(worst, abs(off_wall))
                print(
                    f"  shard {index}/{count}: wall {wall:6.1f} s ({off_wall:+.1%} of "
                    f"{walls / count:.1f}), its blocks {own:6.1f} s ({off_own:+.1%}), "
                    f"as the whole run timed them {plan:6.1f} s ({off_plan:+.1%})"
                )
        verdict = "within" if worst <= TARGET else "OUTSIDE"
        print(f"worst shard wall time {worst:.1%} from total/N: {verdict} ±{TARGET:.0%}")


if __name__ == "__main__":
    main()
