"""A warm ``mkdocs build`` (every check cached) against plain MkDocs on the same site.

A workload folder holds ``ours/`` (a site checked by formula-check) and ``plain/`` (the same
pages built by MkDocs alone, the code only displayed), each with its ``mkdocs.yml``: what the
issue's shared anchors generator writes. Without one, a site of ``--pages`` pages is generated
(``sitegen.py``) and "plain" is the same site with the plugin dropped from ``plugins:``.

The workload is copied to a scratch folder; ``ours`` is built once cold (it fills the result
and figure caches), then every round runs ``plain`` and ``ours`` as fresh
``python -m mkdocs build --strict`` processes, interleaved (the starting side alternates), and
the medians of wall and CPU seconds (the process and the processes it waited for) are printed.
Target: ours warm <= 1.10 x plain. Each warm build's report must say every block was cached.

``ours`` imports ``formula_check`` from this checkout's ``plugin/``; ``--with LABEL=DIR`` adds
a side that imports it from ``DIR`` (another checkout's ``plugin/``): before/after in one run. Each such side gets its own copy of
the site and its own cold priming build (the cache key holds the checker's source digest).

Python modules without bytecode are compiled from source on every import; an installed
package has its bytecode, so by default the ``formula_check`` packages measured are compiled
first (``--no-compile``: measure them as found, e.g. under ``PYTHONDONTWRITEBYTECODE``).

Run from the project root::

    python bench/warm_build.py WORKLOAD --repeats 7
    python bench/warm_build.py --pages 10 --repeats 7
"""

from __future__ import annotations

import argparse
import compileall
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple

import yaml

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))

import sitegen  # noqa: E402

REPORT_JSON = "formula-check-report.json"


class Timing(NamedTuple):
    """Wall seconds and CPU seconds (user + system, children included)."""

    wall: float
    cpu: float


class Side(NamedTuple):
    """One kind of build: its config and the folder its ``formula_check`` is imported from
    (None: wherever the environment finds it, for plain MkDocs)."""

    config: Path
    plugin_path: Path | None
    checked: bool


def build(side: Side) -> Timing:
    """One fresh ``python -m mkdocs build --strict -q`` of ``side``."""
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    if side.plugin_path is not None:
        env["PYTHONPATH"] = os.pathsep.join([str(side.plugin_path), env.get("PYTHONPATH", "")])
    argv = [sys.executable, "-m", "mkdocs", "build", "--strict", "-q", "-f", str(side.config)]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(
        argv, cwd=side.config.parent, env=env, capture_output=True, text=True, check=False
    )
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode:
        raise SystemExit(f"building {side.config} failed:\n{done.stderr[-3000:]}")
    cpu = after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime
    return Timing(wall, cpu)


def all_cached(side: Side) -> bool:
    """Whether the last build of ``side`` took every block from the cache."""
    site_dir = side.config.parent / "site"
    blocks = json.loads((site_dir / REPORT_JSON).read_text(encoding="utf-8"))["blocks"]
    return bool(blocks) and all(block["cached"] for block in blocks)


def without_plugin(config: Path, name: str) -> Path:
    """A sibling of ``config`` with formula-check left out of ``plugins:``."""
    data = yaml.safe_load(config.read_text(encoding="utf-8"))
    data["plugins"] = [
        entry
        for entry in data.get("plugins", [])
        if (entry if isinstance(entry, str) else next(iter(entry))) != "formula-check"
    ]
    path = config.with_name(name)
    path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    return path


def prepare(args: argparse.Namespace, scratch: Path) -> tuple[str, dict[str, Side]]:
    """Copy or generate the workload; the sides by name, ``plain`` first."""
    extra = dict(item.split("=", 1) for item in args.with_)
    if args.workload is not None:
        plain = scratch / "plain"
        shutil.copytree(args.workload / "plain", plain)
        label = f"workload {args.workload.name}"
        sides = {"plain": Side(plain / "mkdocs.yml", None, checked=False)}
        for name, path in {"ours": ROOT / "plugin", **extra}.items():
            folder = scratch / f"ours-{name}"
            shutil.copytree(args.workload / "ours", folder, ignore=shutil.ignore_patterns(".cache"))
            sides[name] = Side(folder / "mkdocs.yml", Path(path).resolve(), checked=True)
        return label, sides
    pages = sitegen.generate(args.pages)
    label = f"generated, {args.pages} pages, {args.pages * 4} blocks; plain = plugin left out"
    sides = {}
    for name, path in {"ours": ROOT / "plugin", **extra}.items():
        config = sitegen.write_site(scratch / f"ours-{name}", pages, plugin={"workers": 1})
        sides[name] = Side(config, Path(path).resolve(), checked=True)
    plain = without_plugin(sides["ours"].config, "mkdocs-plain.yml")
    return label, {"plain": Side(plain, None, checked=False), **sides}


def compile_packages(sides: dict[str, Side]) -> None:
    """Write the bytecode of every ``formula_check`` measured (an installed one has it)."""
    for folder in {side.plugin_path for side in sides.values() if side.plugin_path is not None}:
        compileall.compile_dir(str(folder / "formula_check"), quiet=1)


def interleaved(
    sides: dict[str, Side], repeats: int, after: Callable[[str], None]
) -> dict[str, list[Timing]]:
    """Each round builds every side once, starting from a different side each round."""
    names = list(sides)
    times: dict[str, list[Timing]] = {name: [] for name in names}
    for repeat in range(repeats):
        shift = repeat % len(names)
        for name in names[shift:] + names[:shift]:
            times[name].append(build(sides[name]))
            after(name)
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("workload", nargs="?", type=Path, help="folder with ours/ and plain/")
    parser.add_argument("--pages", type=int, default=10, help="without a workload: generate")
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument(
        "--with",
        dest="with_",
        action="append",
        default=[],
        metavar="LABEL=DIR",
        help="another side importing formula_check from DIR (a checkout's plugin/ folder)",
    )
    parser.add_argument("--no-compile", dest="compile", action="store_false")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="fc-warm-build-") as folder:
        label, sides = prepare(args, Path(folder))
        if args.compile:
            compile_packages(sides)
        load_before = "/".join(f"{v:.1f}" for v in os.getloadavg())
        primes = {name: build(side).wall for name, side in sides.items() if side.checked}
        missed: list[str] = []

        def check(name: str) -> None:
            if sides[name].checked and not all_cached(sides[name]):
                missed.append(name)

        times = interleaved(sides, args.repeats, check)
        load_after = "/".join(f"{v:.1f}" for v in os.getloadavg())
    bytecode = "compiled first" if args.compile else "as found"
    if os.environ.get("PYTHONDONTWRITEBYTECODE"):
        bytecode += ", PYTHONDONTWRITEBYTECODE set"
    print(f"site: {label}; formula_check bytecode: {bytecode}")
    print("cold priming builds: " + ", ".join(f"{n} {s:.1f} s" for n, s in primes.items()))
    print(
        f"every block cached in every warm build: {'yes' if not missed else 'NO: ' + str(missed)}"
    )
    plain_wall = statistics.median(t.wall for t in times["plain"])
    plain_cpu = statistics.median(t.cpu for t in times["plain"])
    print(
        f"{'median of ' + str(args.repeats):<16}{'wall s':>8}{'CPU s':>8}{'wall/plain':>12}"
        f"{'CPU/plain':>11}"
    )
    for name, runs in times.items():
        wall = statistics.median(t.wall for t in runs)
        cpu = statistics.median(t.cpu for t in runs)
        print(
            f"{name:<16}{wall:>8.3f}{cpu:>8.3f}{wall / plain_wall:>12.3f}{cpu / plain_cpu:>11.3f}"
        )
    for name, runs in times.items():
        print(f"  runs {name:<10} wall {', '.join(f'{t.wall:.2f}' for t in runs)}")
        print(f"  {'':<15} CPU  {', '.join(f'{t.cpu:.2f}' for t in runs)}")
    print("target: ours / plain <= 1.10")
    print(f"load average (1/5/15 min) before {load_before}, after {load_after}")


if __name__ == "__main__":
    main()
