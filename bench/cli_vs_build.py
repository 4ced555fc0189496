"""The CI gate against the full site build, on this project's own docs, cold and warm.

``formula-check check`` runs every block without rendering a site; ``mkdocs build`` checks
the same blocks and renders the pages, figures and MathJax assets. Both run as fresh
processes on a private copy of the docs, interleaved, medians over ``--repeats``:

* cold: an empty result cache (every snippet runs, TensorFlow is imported);
* warm: the cache filled by the cold run (no snippet runs, TensorFlow is never imported).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ENV = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}


def project_copy(where: Path) -> Path:
    """A copy of mkdocs.yml and docs/ with no cache: a cold start."""
    target = where / "project"
    shutil.copytree(ROOT / "docs", target / "docs", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "mkdocs.yml", target / "mkdocs.yml")
    return target


def timed(argv: list[str], cwd: Path) -> float:
    start = time.perf_counter()
    done = subprocess.run(argv, cwd=cwd, env=ENV, capture_output=True, text=True, check=False)
    elapsed = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} failed:\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}")
    return elapsed


CLI = [sys.executable, "-m", "formula_check.cli", "check", "mkdocs.yml"]
BUILD = [sys.executable, "-m", "mkdocs", "build", "--strict", "--quiet"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    runs: dict[str, list[float]] = {
        "cli cold": [],
        "build cold": [],
        "cli warm": [],
        "build warm": [],
    }
    for _ in range(args.repeats):
        for tool, argv in (("cli", CLI), ("build", BUILD)):
            with tempfile.TemporaryDirectory() as tmp:
                project = project_copy(Path(tmp))
                runs[f"{tool} cold"].append(timed(argv, project))
                runs[f"{tool} warm"].append(timed(argv, project))
    median = {name: statistics.median(values) for name, values in runs.items()}
    for name, values in runs.items():
        print(f"{name:<11}: {median[name]:6.2f} s  (runs: {', '.join(f'{v:.2f}' for v in values)})")
    print(f"cold ratio cli / build : {median['cli cold'] / median['build cold']:.2f}")
    print(f"warm ratio cli / build : {median['cli warm'] / median['build warm']:.2f}")


if __name__ == "__main__":
    main()
