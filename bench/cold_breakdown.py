"""Where a cold build's time goes: one ``mkdocs build`` of a site with an empty cache, run in
this process with a timer around each step of the checker, and the worker's own account of
each check (the phases its reply lists).

Prints, for the build process, the wall and CPU seconds of each step (summed over blocks;
steps on the checking thread overlap MkDocs' own work on the main thread), then the worker's
phases summed over checks, the TensorFlow import, and the CPU of the build process and of
the processes it started. A second, separate build of the same site with ``enabled: false``
gives MkDocs' and the theme's own time, and ``--floor SCRIPT`` times a script that does the
same checks without a docs tool (the bench-anchors' ``run_all.py``), for scale.

    python bench/cold_breakdown.py                      # a generated 10-page site
    python bench/cold_breakdown.py --site WORKLOAD/ours --floor WORKLOAD/script/run_all.py
    python bench/cold_breakdown.py --no-timing          # as with timing: false
"""

from __future__ import annotations

import argparse
import collections
import functools
import resource
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import sitegen  # noqa: E402

Spent = collections.defaultdict[str, list[float]]


def timed(spent: Spent, name: str, function: Callable[..., Any]) -> Callable[..., Any]:
    """``function``, adding its wall and thread-CPU seconds to ``spent[name]``."""

    @functools.wraps(function)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        wall, cpu = time.perf_counter(), time.thread_time()
        try:
            return function(*args, **kwargs)
        finally:
            totals = spent[name]
            totals[0] += time.perf_counter() - wall
            totals[1] += time.thread_time() - cpu
            totals[2] += 1

    return wrapper


def instrument(spent: Spent, worker: Spent, engines: list[Any]) -> None:
    """Put the timers in place (this process only)."""
    from formula_check import cache, engine, judge, pages
    from formula_check.render import card, figure_cache
    from formula_check.worker import pool

    engine.plan_check = timed(spent, "planning (inputs, weights, masks)", engine.plan_check)
    pages._page_block = timed(spent, "reading blocks (fences, options)", pages._page_block)
    judge.rounding_samples = timed(
        spent, "oracle in float32 (the tolerance's samples)", judge.rounding_samples
    )
    judge.judge_formula = timed(spent, "formula (compile, evaluate)", judge.judge_formula)
    card.figures_for = timed(spent, "figures (heatmaps, drawn)", card.figures_for)
    figure_cache.figures_for = timed(spent, "figures (heatmaps, drawn)", figure_cache.figures_for)
    cache.ResultCache.put = timed(spent, "cache writes", cache.ResultCache.put)
    pool.WorkerPool.request = timed(spent, "waiting for the worker", pool.WorkerPool.request)
    evaluate = timed(spent, "judging (all of it)", judge.evaluate)

    def evaluating(plan: Any, reply: Any, arrays: Any, env: Any) -> Any:
        for name, seconds in reply.phase_seconds:
            worker[name][0] += seconds
            worker[name][2] += 1
        return evaluate(plan, reply, arrays, env)

    judge.evaluate = evaluating
    opened = engine.Engine.__init__

    def opening(self: Any, *args: Any, **kwargs: Any) -> None:
        opened(self, *args, **kwargs)
        engines.append(self)

    engine.Engine.__init__ = opening


def site_with(source: Path, into: Path, **options: Any) -> Path:
    """A copy of the site whose formula-check options are laid over with ``options``."""
    shutil.copytree(source, into, ignore=shutil.ignore_patterns("site", ".cache"))
    config_file = into / "mkdocs.yml"
    config = yaml.safe_load(config_file.read_text(encoding="utf-8"))
    plugins = config.setdefault("plugins", [])
    for index, entry in enumerate(plugins):
        name = entry if isinstance(entry, str) else next(iter(entry))
        if name == "formula-check":
            settings = {} if isinstance(entry, str) else dict(entry[name] or {})
            plugins[index] = {name: {**settings, **options}}
            break
    else:
        plugins.append({"formula-check": options})
    config_file.write_text(yaml.safe_dump(config, sort_keys=False), encoding="utf-8")
    return into


def build_here(project: Path) -> float:
    """``mkdocs build`` of ``project`` in this process; its wall seconds."""
    from mkdocs.commands.build import build
    from mkdocs.config import load_config

    config = load_config(config_file=str(project / "mkdocs.yml"))
    plugin = config.plugins["formula-check"]
    plugin.on_startup(command="build", dirty=False)
    started = time.perf_counter()
    try:
        build(config)
    finally:
        plugin.on_shutdown()
    return time.perf_counter() - started


def wall_of(command: list[str], cwd: Path) -> float:
    started = time.perf_counter()
    subprocess.run(command, cwd=cwd, check=True, capture_output=True)
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--site", type=Path, help="a site folder (default: a generated one)")
    parser.add_argument("--pages", type=int, default=10, help="pages of the generated site")
    parser.add_argument("--floor", type=Path, help="a script doing the same checks, timed too")
    parser.add_argument("--no-timing", action="store_true", help="timing: false")
    args = parser.parse_args()
    spent: Spent = collections.defaultdict(lambda: [0.0, 0.0, 0])
    worker: Spent = collections.defaultdict(lambda: [0.0, 0.0, 0])
    engines: list[Any] = []
    with tempfile.TemporaryDirectory() as temporary:
        where = Path(temporary)
        source = args.site
        if source is None:
            source = where / "generated"
            sitegen.write_site(source, sitegen.generate(args.pages), plugin={"timing": True})
        options: dict[str, Any] = {"keep_alive": 0, "cache_dir": ".cache-cold"}
        if args.no_timing:
            options["timing"] = False
        project = site_with(source, where / "cold", **options)
        off = site_with(source, where / "off", enabled=False)
        mkdocs_only = wall_of([sys.executable, "-m", "mkdocs", "build", "-q"], off)
        floor = (
            wall_of([sys.executable, str(args.floor)], args.floor.parent) if args.floor else None
        )
        instrument(spent, worker, engines)
        cpu_before = resource.getrusage(resource.RUSAGE_SELF)
        wall = build_here(project)
        cpu_self = resource.getrusage(resource.RUSAGE_SELF)
        children = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = sum(engine.startup_seconds for engine in engines)
    own_cpu = cpu_self.ru_utime + cpu_self.ru_stime - cpu_before.ru_utime - cpu_before.ru_stime
    kids_cpu = children.ru_utime + children.ru_stime
    print(
        f"cold build: {wall:.2f} s wall; build process {own_cpu:.2f} s CPU, "
        f"the processes it started {kids_cpu:.2f} s CPU; "
        f"threads alive now: {threading.active_count()}"
    )
    print(f"the same site, checks off (MkDocs and the theme): {mkdocs_only:.2f} s wall")
    if floor is not None:
        print(f"the floor script: {floor:.2f} s wall")
    print(f"starting workers (the TensorFlow import): {started:.2f} s wall")
    print("\nbuild process, summed over blocks          wall s    CPU s   calls")
    for name, (seconds, cpu, calls) in sorted(spent.items(), key=lambda item: -item[1][0]):
        print(f"  {name:<42}{seconds:8.2f}{cpu:9.2f}{int(calls):8d}")
    print("\nworker, summed over checks                 wall s           checks")
    for name, (seconds, _, calls) in sorted(worker.items(), key=lambda item: -item[1][0]):
        print(f"  {name:<42}{seconds:8.2f}{'':9}{int(calls):8d}")


if __name__ == "__main__":
    main()
