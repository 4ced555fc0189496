"""formula-check vs what users do today: a Jupyter notebook holding the same checks.

A generated site (``--pages`` x 4 blocks) and a notebook with the same blocks as cells (each
cell: the block's snippet, then a NumPy float64 comparison against the formula, written out
by hand as a notebook author would), executed with nbclient. Prints, from one run, medians
over ``--repeats`` with the sides interleaved:

* cold: ``mkdocs build`` with an empty cache vs executing the notebook in a fresh process and
  kernel (``jupyter execute``, what CI does). Target: we are faster.
* warm: ``mkdocs build`` with every check cached vs re-executing the notebook, both from a
  fresh process (CI) and as "Run All" again in a kernel that already imported TensorFlow
  (an author's edit loop). Target: >= 10x faster.

The same two comparisons are also made with ``formula-check check``: like executing the
notebook, it verifies the checks and builds no site, so MkDocs' own rendering (about 1.5 s
for these pages with Material) is not counted against the checker.

Bench-only dependencies (not in pyproject): ``pip install nbclient nbformat ipykernel``.
Run from the project root: ``python bench/notebook_compare.py --repeats 3``.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
from pathlib import Path

import nbformat

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import sitegen  # noqa: E402
from site_speed import (  # noqa: E402
    Timing,
    build_timing,
    interleaved,
    load_average,
    median,
    medians,
    report_counts,
    run_timed,
    runs,
)

EXECUTE = """
import json, sys, time
from pathlib import Path
import nbformat
from nbclient import NotebookClient

path, count = Path(sys.argv[1]), int(sys.argv[2])
client = NotebookClient(
    nbformat.read(path, as_version=4),
    kernel_name="python3",
    timeout=600,
    resources={"metadata": {"path": str(path.parent)}},
)
times = []
for run in range(count):
    start = time.perf_counter()
    client.execute(cleanup_kc=run == count - 1)
    times.append(time.perf_counter() - start)
print(json.dumps(times))
"""


def write_notebook(path: Path, pages: list[list[sitegen.Block]]) -> int:
    """The notebook of ``pages``' blocks; returns its number of code cells."""
    cells = [
        nbformat.v4.new_code_cell(source)
        if kind == "code"
        else nbformat.v4.new_markdown_cell(source)
        for kind, source in sitegen.notebook_cells(pages)
    ]
    notebook = nbformat.v4.new_notebook(cells=cells)
    notebook.metadata["kernelspec"] = {
        "name": "python3",
        "display_name": "Python 3",
        "language": "python",
    }
    nbformat.write(notebook, path)
    return sum(cell.cell_type == "code" for cell in cells)


def execute(notebook: Path, count: int) -> tuple[Timing, list[float]]:
    """A fresh process running the notebook ``count`` times in one kernel, and the wall time
    of each run (the first one includes starting the kernel)."""
    timing, stdout = run_timed([sys.executable, "-c", EXECUTE, str(notebook), str(count)])
    return timing, [float(t) for t in json.loads(stdout.strip().splitlines()[-1])]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--pages", type=int, default=10, help="pages of 4 blocks each")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="fc-notebook-") as scratch:
        pages = sitegen.generate(args.pages)
        config = sitegen.write_site(Path(scratch) / "site", pages, plugin={"workers": 1})
        cache, site_dir = config.parent / ".cache", config.parent / "site"
        notebook = Path(scratch) / "checks.ipynb"
        code_cells = write_notebook(notebook, pages)
        load_before = load_average()
        problems: list[str] = []

        def cold_build() -> Timing:
            shutil.rmtree(cache, ignore_errors=True)
            return build_timing(config)

        def cli() -> Timing:
            command = [str(Path(sys.executable).parent / "formula-check"), "check", str(config)]
            return run_timed(command, cwd=config.parent)[0]

        def cold_cli() -> Timing:
            shutil.rmtree(cache, ignore_errors=True)
            return cli()

        def warm_cli() -> Timing:
            if not cache.exists():
                cli()
            return cli()

        def warm_build() -> Timing:
            if not cache.exists():
                build_timing(config)  # this repeat started here: fill the cache first
            return build_timing(config)

        def verify(name: str) -> None:
            if name.startswith(("notebook", "cli")):
                return
            cached, ok, total = report_counts(site_dir)
            expected = total if name == "warm build" else 0
            if ok != total or cached != expected:
                problems.append(f"{name}: {ok}/{total} verified, {cached} cached")

        times = interleaved(
            {
                "cold build": cold_build,
                "warm build": warm_build,
                "cli, cold": cold_cli,
                "cli, warm": warm_cli,
                "notebook, fresh": lambda: execute(notebook, 1)[0],
            },
            args.repeats,
            verify,
        )
        _, kernel_runs = execute(notebook, args.repeats + 1)
        load_after = load_average()
    rerun = median(kernel_runs[1:])
    cold, warm, fresh, cli_cold, cli_warm = (
        medians(times[k])
        for k in ("cold build", "warm build", "notebook, fresh", "cli, cold", "cli, warm")
    )
    blocks = sum(len(p) for p in pages)
    print(
        f"{args.pages} pages, {blocks} blocks; notebook: {code_cells} code cells (setup + 1/block)"
    )
    print(
        f"{'median of ' + str(args.repeats) + ', wall (CPU)':<42}{'ours':>15}{'notebook':>16}  speed-up"
    )
    rows = (
        ("cold: empty cache vs fresh kernel", cold, fresh, 1.0),
        ("warm: all cached vs fresh kernel (CI)", warm, fresh, 10.0),
        ("warm: all cached vs Run All, warm kernel", warm, Timing(rerun, float("nan")), 10.0),
        ("CLI cold: empty cache vs fresh kernel", cli_cold, fresh, 1.0),
        ("CLI warm: all cached vs fresh kernel (CI)", cli_warm, fresh, 10.0),
    )
    for label, ours, theirs, target in rows:
        ratio = theirs.wall / ours.wall
        verdict = "met" if ratio > target or (target > 1 and ratio >= target) else "MISSED"
        print(
            f"{label:<42}{ours.wall:>6.2f}s ({ours.cpu:>5.2f}){theirs.wall:>7.2f}s ({theirs.cpu:>5.2f})"
            f"{ratio:>7.2f}x (target {'> 1' if target == 1 else '>= 10'}: {verdict})"
        )
    for name, values in times.items():
        print(f"  runs {name:<16}: {runs(values)}")
    print(f"  runs in one kernel  : {runs(kernel_runs)} (the first starts the kernel)")
    print(
        "every block verified, cache as expected"
        if not problems
        else "PROBLEMS: " + "; ".join(problems)
    )
    print(f"load average (1/5/15 min) before {load_before}, after {load_after}")


if __name__ == "__main__":
    main()
