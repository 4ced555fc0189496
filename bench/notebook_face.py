"""The notebook face, timed: one ``%%formula`` check in a warm kernel against the same check
in a page build, and ``formula-check check`` on a folder of notebooks against executing those
notebooks with nbclient (what a team runs in CI today). One run, the sides interleaved,
medians over ``--rounds``.

* **warm kernel**: a kernel that has loaded the magic and run one check (so the worker that
  imported TensorFlow is up), then each block's ``%%formula`` cell, timed around the magic
  inside the kernel: the check, its card and the display.
* **page build**: the same blocks, the same headers and seeds, on one page checked by
  ``formula-check check --no-cache``: each block's own time (the engine's, from the JSON
  report), and the whole run's wall time per block, TensorFlow's import included.
* **folder**: ``--notebooks`` notebooks of ``--blocks`` checks each (a formula in a Markdown
  cell, its code in the cell below), checked by ``formula-check check --no-cache`` and
  executed cell by cell by nbclient (a fresh kernel per notebook, a ``%%formula`` cell per
  block, so the kernel runs the same checks).

Every check is made with a seed of its round, so no result comes from a cache. Run from the
project root: ``python bench/notebook_face.py --rounds 3`` (about 3 minutes on 2 cores).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import nbformat
from jupyter_client.manager import start_new_kernel
from nbclient import NotebookClient

LATEX = r"\text{softmax}(x)_i = \frac{e^{x_i}}{\sum_j e^{x_j}}"
CODE = """import tensorflow as tf


def softmax(x):
    shifted = x - tf.reduce_max(x, axis=-1, keepdims=True)
    return tf.exp(shifted) / tf.reduce_sum(tf.exp(shifted), axis=-1, keepdims=True)"""


def header(block: int, seed: int) -> str:
    """The block's options: its own id and sizes, and the round's seed."""
    return (
        f'id="sm-{block}" oracle="softmax" dims="b={2 + block % 3} n={5 + block} m=7" seed={seed}'
    )


def page(blocks: int, seed: int) -> str:
    """A page holding every block, each a formula and its code."""
    parts = ["# Softmax, many times", ""]
    for block in range(blocks):
        parts += [
            f"```formula {header(block, seed)}",
            LATEX,
            "```",
            "",
            "```python",
            CODE,
            "```",
            "",
        ]
    return "\n".join(parts)


def notebook(blocks: int, seed: int, *, magic: bool) -> nbformat.NotebookNode:
    """The blocks as a notebook: Markdown formula + code cell (read by the CLI), or
    ``%%formula`` cells (run by a kernel)."""
    cells = [nbformat.v4.new_code_cell("%load_ext formula_check")] if magic else []
    for block in range(blocks):
        if magic:
            source = f'%%formula {header(block, seed)} latex="{LATEX}"\n{CODE}'
            cells.append(nbformat.v4.new_code_cell(source))
        else:
            fence = f"```formula {header(block, seed)}\n{LATEX}\n```"
            cells += [nbformat.v4.new_markdown_cell(fence), nbformat.v4.new_code_cell(CODE)]
    made = nbformat.v4.new_notebook()
    made.cells = cells
    return made


def warm_kernel_checks(folder: Path, blocks: int, seeds: list[int]) -> list[float]:
    """Seconds per check in one warm kernel, for every seed and block."""
    manager, client = start_new_kernel(kernel_name="python3", cwd=str(folder))
    timed: list[float] = []
    try:

        def run(code: str) -> str:
            said: list[str] = []

            def keep(message: dict) -> None:
                if message["msg_type"] == "stream":
                    said.append(message["content"]["text"])

            reply = client.execute_interactive(code, output_hook=keep, timeout=600)
            if reply["content"]["status"] != "ok":
                raise RuntimeError(f"the kernel refused {code[:60]!r}: {reply['content']}")
            return "".join(said)

        run("%load_ext formula_check\nimport time")
        warm = header(0, 999_999)  # the first check starts the worker: not timed
        run(f"get_ipython().run_cell_magic('formula', {warm!r}, {CODE!r})")
        for seed in seeds:
            for block in range(blocks):
                line = f"{header(block, seed)} latex={LATEX!r}".replace("'", '"')
                said = run(
                    "_started = time.perf_counter()\n"
                    f"get_ipython().run_cell_magic('formula', {line!r}, {CODE!r})\n"
                    "print('seconds', time.perf_counter() - _started)"
                )
                timed.append(float(said.rsplit("seconds", 1)[1]))
    finally:
        client.stop_channels()
        manager.shutdown_kernel(now=True)
    return timed


def check_command(folder: Path, target: str, report: Path) -> list[str]:
    return [
        sys.executable,
        "-m",
        "formula_check.faces.cli",
        "check",
        "--no-cache",
        "--json",
        str(report),
        target,
    ]


def page_build(folder: Path, blocks: int, seed: int) -> tuple[float, list[float]]:
    """Wall seconds of checking the page, and each block's own seconds."""
    (folder / "page.md").write_text(page(blocks, seed), encoding="utf-8")
    report = folder / "page.json"
    started = time.perf_counter()
    subprocess.run(
        check_command(folder, "page.md", report), cwd=folder, check=True, capture_output=True
    )
    wall = time.perf_counter() - started
    results = json.loads(report.read_text(encoding="utf-8"))["blocks"]
    if any(result["status"] != "verified" for result in results):
        raise RuntimeError(f"a block did not verify: {results}")
    return wall, [result["seconds"] for result in results]


def folder_check(folder: Path, notebooks: int, blocks: int, seed: int) -> float:
    """Wall seconds of ``formula-check check`` on the folder of notebooks."""
    where = folder / f"cli-{seed}"
    where.mkdir()
    for index in range(notebooks):
        nbformat.write(notebook(blocks, seed + index, magic=False), where / f"nb{index}.ipynb")
    started = time.perf_counter()
    subprocess.run(
        check_command(folder, where.name, folder / "nb.json"),
        cwd=folder,
        check=True,
        capture_output=True,
    )
    return time.perf_counter() - started


def folder_execute(folder: Path, notebooks: int, blocks: int, seed: int) -> float:
    """Wall seconds of executing each notebook with nbclient, a fresh kernel each."""
    started = time.perf_counter()
    for index in range(notebooks):
        made = notebook(blocks, seed + index, magic=True)
        NotebookClient(
            made, kernel_name="python3", timeout=600, resources={"metadata": {"path": str(folder)}}
        ).execute()
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--blocks", type=int, default=4)
    parser.add_argument("--notebooks", type=int, default=3)
    args = parser.parse_args()
    seeds = [100 * (round_ + 1) for round_ in range(args.rounds)]
    with tempfile.TemporaryDirectory() as temporary:
        folder = Path(temporary)
        kernel = warm_kernel_checks(folder, args.blocks, seeds)
        walls, own, cli, executed = [], [], [], []
        for seed in seeds:
            wall, each = page_build(folder, args.blocks, seed)
            walls.append(wall / args.blocks)
            own += each
            cli_first = seed % 200 == 0  # the two folder sides alternate which goes first
            for side in ("cli", "nbclient") if cli_first else ("nbclient", "cli"):
                if side == "cli":
                    cli.append(folder_check(folder, args.notebooks, args.blocks, seed))
                else:
                    executed.append(folder_execute(folder, args.notebooks, args.blocks, seed))
    med = statistics.median
    print(f"{args.rounds} rounds, {args.blocks} blocks per page or notebook, medians")
    print(f"one check, warm kernel (%%formula, card shown):   {med(kernel) * 1000:8.1f} ms")
    print(f"one check, page build, the block's own time:       {med(own) * 1000:8.1f} ms")
    print(f"one check, page build, wall per block (TF import): {med(walls) * 1000:8.1f} ms")
    print(
        f"{args.notebooks} notebooks x {args.blocks} checks: formula-check check "
        f"{med(cli):.2f} s, nbclient {med(executed):.2f} s ({med(executed) / med(cli):.1f}x)"
    )


if __name__ == "__main__":
    main()
