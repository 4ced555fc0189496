"""The CI gate against the full site build, on this project's own docs, cold and warm.

``formula-check check`` runs every block without rendering a site; ``mkdocs build`` checks
the same blocks and renders the pages, figures and MathJax assets. Both run as fresh
processes on a private copy of the docs, interleaved, medians over ``--repeats``:

* cold: an empty result cache (every snippet runs, TensorFlow is imported);
* warm: the cache filled by the cold run (no snippet runs, TensorFlow is never imported);
* kept: ``formula-check check --no-cache --keep-alive``, after a first such run left the
  process that imported TensorFlow running: every snippet runs, nothing is imported; and the
  same for the few blocks ``-k sdpa`` selects (an edit-and-check loop), against a cold run.
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

from formula_check.runtime.pool import kept_address, stop_kept

ROOT = Path(__file__).resolve().parents[1]
os.environ["NO_MKDOCS_2_WARNING"] = "1"  # the same environment here and in the runs
ENV = dict(os.environ)


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


CLI = [sys.executable, "-m", "formula_check.faces.cli", "check", "mkdocs.yml"]
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
        "cli kept": [],
        "cli -k cold": [],
        "cli -k kept": [],
    }
    kept = [*CLI, "--no-cache", "--keep-alive", "300"]
    for _ in range(args.repeats):
        for tool, argv in (("cli", CLI), ("build", BUILD)):
            with tempfile.TemporaryDirectory() as tmp:
                project = project_copy(Path(tmp))
                runs[f"{tool} cold"].append(timed(argv, project))
                runs[f"{tool} warm"].append(timed(argv, project))
        with tempfile.TemporaryDirectory() as tmp:
            project = project_copy(Path(tmp))
            runs["cli -k cold"].append(timed([*CLI, "--no-cache", "-k", "sdpa"], project))
            timed(kept, project)  # imports TensorFlow and leaves it running
            try:
                runs["cli kept"].append(timed(kept, project))
                runs["cli -k kept"].append(timed([*kept, "-k", "sdpa"], project))
            finally:
                stop_kept(kept_address(project.resolve(), sys.executable, 300))
    median = {name: statistics.median(values) for name, values in runs.items()}
    for name, values in runs.items():
        print(f"{name:<11}: {median[name]:6.2f} s  (runs: {', '.join(f'{v:.2f}' for v in values)})")
    print(f"cold ratio cli / build : {median['cli cold'] / median['build cold']:.2f}")
    print(f"warm ratio cli / build : {median['cli warm'] / median['build warm']:.2f}")
    print(
        f"cold cli, TensorFlow kept loaded / imported: {median['cli kept'] / median['cli cold']:.2f}"
    )


if __name__ == "__main__":
    main()
