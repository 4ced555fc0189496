"""Where a cold build's time goes: one ``mkdocs build`` of a site with an empty cache, run in
this process with a timer around each step of the checker, the worker's own account of each
check (the phases its reply lists), and the CPU of every process the build starts.

Prints, for the build process, the wall and CPU seconds of each step (summed over blocks;
steps on the checking thread overlap MkDocs' own work on the main thread), then the worker's
phases summed over checks, the TensorFlow import, and the CPU of the build process and of
the processes it started. Then the account of those processes: the zygote (the import), the
warm worker (its warm-up, and serving), and each check's process, phase by phase (the fork,
its new eager context, the small check of ours it runs to get ready, the wait for its request,
the check's own phases, the answer, the exit), with the threads it had at its answer and the
CPU each used. It is taken inside those processes by a ``sitecustomize`` module this script
puts on their ``PYTHONPATH`` (a variable every worker gets): it wraps a few functions of the
worker and appends one line per event to a file; nothing else changes.

A second, separate build of the same site with ``enabled: false`` gives MkDocs' and the
theme's own time, and ``--floor SCRIPT`` times a script that does the same checks without a
docs tool (the bench-anchors' ``run_all.py``), for scale; both run before the build, and
their CPU is not counted in the build's.

    python bench/cold_breakdown.py                      # a generated 10-page site
    python bench/cold_breakdown.py --site WORKLOAD/ours --floor WORKLOAD/script/run_all.py
    python bench/cold_breakdown.py --no-timing          # as with timing: false
"""

from __future__ import annotations

import argparse
import collections
import functools
import json
import os
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

HERE = Path(__file__).resolve().parent

Spent = collections.defaultdict[str, list[float]]

# -- The account kept inside the check processes ---------------------------------------------
# Runs in the zygote, the warm worker and each check's process (see account_into); only
# the standard library at the top of this file, so that loading it there costs little.

_LOG_FD = -1
"""The file every process of the build appends its records to."""
_ROLE = "build"
"""What this process is: zygote, worker or check."""
_MARKS: list[tuple[str, float]] = []
"""In a check's process: (what was done, this process's CPU seconds when it ended)."""
_STAGE = ["prepare"]
"""In a check's process: whose laps these are, the getting ready's or the check's."""


def _cpu() -> float:
    return time.process_time()  # this process's threads, in ns (os.times counts 10 ms ticks)


def _children_cpu() -> float:
    times = os.times()
    return times.children_user + times.children_system


def _threads() -> list[tuple[str, float]]:
    """Every thread of this process: its name and the CPU seconds it used."""
    tick = os.sysconf("SC_CLK_TCK")
    found = []
    for task in os.listdir("/proc/self/task"):
        try:
            text = Path(f"/proc/self/task/{task}/stat").read_text()
        except OSError:
            continue
        fields = text.rpartition(")")[2].split()
        name = text[text.index("(") + 1 : text.rindex(")")]
        found.append((name, (int(fields[11]) + int(fields[12])) / tick))
    return found


def _record(**fields: Any) -> None:
    fields.update(pid=os.getpid(), role=_ROLE)
    # Opened once as the process starts: a check's process is confined (Landlock) before it
    # answers, and may then open nothing outside its own folder; the descriptor it inherits
    # still writes
    os.write(_LOG_FD, (json.dumps(fields) + "\n").encode())


def _mark(name: str) -> None:
    _MARKS.append((name, _cpu()))


def account_into(log: str) -> None:
    """In a process of the build (the ``sitecustomize`` of :func:`hook_folder` calls it):
    if it is the zygote or a worker, wrap the functions whose CPU is accounted; each process
    appends its records to ``log``."""
    if not any(arg.startswith("formula_check.runtime.") for arg in sys.orig_argv):
        return
    global _LOG_FD  # noqa: PLW0603  (set once, as the process starts)
    _LOG_FD = os.open(log, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    import atexit

    from formula_check.runtime import child, zygote_server

    serve_client = zygote_server.serve_client

    def serving(*args: Any) -> Any:
        global _ROLE  # noqa: PLW0603
        _ROLE = "zygote"  # TensorFlow and the package are imported by now
        faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
        _record(event="imported", cpu=_cpu(), threads=_threads(), faults=faults)
        atexit.register(lambda: _record(event="exit", cpu=_cpu(), children=_children_cpu()))
        return serve_client(*args)

    zygote_server.serve_client = serving  # before the zygote's module imports it
    run_worker = child.run_worker

    def working(*args: Any) -> Any:
        global _ROLE  # noqa: PLW0603
        _ROLE = "worker"
        _record(event="forked", cpu=_cpu())
        _wrap_worker()
        try:
            return run_worker(*args)
        finally:
            _record(event="end", cpu=_cpu(), children=_children_cpu(), threads=_threads())

    child.run_worker = working
    os.waitpid = _waiting


def _waiting(pid: int, options: int) -> tuple[int, int]:
    """``os.waitpid``, recording the CPU of the child it reaps."""
    got, status, usage = os.wait4(pid, options)
    if got:
        cpu = usage.ru_utime + usage.ru_stime
        _record(event="reaped", child=got, cpu=cpu, sys=usage.ru_stime, faults=usage.ru_minflt)
    return got, status


def _wrap_worker() -> None:
    """In a warm worker, TensorFlow imported: wrap what it and its check processes run."""
    from formula_check.execution import one_check
    from formula_check.runtime import isolation
    from formula_check.runtime import warm_worker as execution

    begin, check = execution.begin, execution.check
    prepare, fresh = execution.prepare_check_process, isolation.fresh_runtime
    in_child, write_all, lap = (
        isolation.CheckProcesses._child,
        isolation._write_all,
        one_check._Laps.__call__,
    )

    def beginning(*args: Any) -> Any:
        before = _cpu()
        try:
            return begin(*args)
        finally:
            _record(event="begin", cpu=_cpu() - before, threads=_threads())

    def checking(session: Any, request: Any, arrays: Any) -> Any:
        if _ROLE == "check" and _STAGE[0] == "check":
            _mark("waiting for the request")
        try:
            return check(session, request, arrays)
        finally:
            if _ROLE == "check":
                _mark(f"{_STAGE[0]}: the rest (seed, reads, modules)")

    def preparing(*args: Any) -> None:
        prepare(*args)
        _STAGE[0] = "check"

    def renewing() -> None:
        _mark("fork, then to the check's code")
        fresh()
        _mark("fresh_runtime (a new eager context)")

    def starting(self: Any, *args: Any) -> None:
        global _ROLE  # noqa: PLW0603
        _ROLE = "check"
        return in_child(self, *args)

    def answering(fd: int, *parts: Any) -> None:
        if _ROLE == "check":
            _mark("encoding the answer")
            _record(event="answer", marks=_MARKS, threads=_threads())
        write_all(fd, *parts)

    def lapping(self: Any, name: str) -> None:
        lap(self, name)
        if _ROLE == "check":
            _mark(f"{_STAGE[0]}: {name}")

    execution.begin, execution.check = beginning, checking
    execution.prepare_check_process, isolation.fresh_runtime = preparing, renewing
    isolation.CheckProcesses._child = starting  # type: ignore[method-assign]
    isolation._write_all = answering
    one_check._Laps.__call__ = lapping  # type: ignore[method-assign]


def hook_folder(folder: Path, log: Path) -> str:
    """A folder holding the ``sitecustomize`` that keeps the account; the ``PYTHONPATH`` the
    build's processes get to load it."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "sitecustomize.py").write_text(
        f"import cold_breakdown\ncold_breakdown.account_into({str(log)!r})\n",
        encoding="utf-8",
    )
    return os.pathsep.join(p for p in (str(folder), str(HERE), os.environ.get("PYTHONPATH")) if p)


def print_account(log: Path, children_cpu: float) -> None:
    """What the records in ``log`` say about the ``children_cpu`` seconds the processes the
    build started used."""
    records = [json.loads(line) for line in log.read_text(encoding="utf-8").splitlines()]
    by = collections.defaultdict(list)
    for record in records:
        by[(record["role"], record["event"])].append(record)
    reaped_by = {
        role: {r["child"]: r["cpu"] for r in by[(role, "reaped")]}
        for role in ("zygote", "worker", "check")
    }
    workers, checks = reaped_by["zygote"], reaped_by["worker"]
    imported = sum(r["cpu"] for r in by[("zygote", "imported")])
    begun = sum(r["cpu"] for r in by[("worker", "begin")])
    in_checks = sum(checks.values())
    answered = {r["pid"] for r in by[("check", "answer")]}
    print(f"\nthe processes the build started: {children_cpu:.2f} s CPU")
    rows = [
        ("zygote: importing TensorFlow and the package", imported),
        ("zygote: the rest (serving forks)", children_cpu - sum(workers.values()) - imported),
        (f"warm workers ({len(workers)}): getting ready (the warm-up)", begun),
        (
            "warm workers: serving (forks, pipes, reaping)",
            sum(workers.values()) - in_checks - begun,
        ),
        (
            f"check processes that answered ({len(answered & set(checks))})",
            sum(cpu for pid, cpu in checks.items() if pid in answered),
        ),
        (
            f"check processes that did not (spares, {len(set(checks) - answered)})",
            sum(cpu for pid, cpu in checks.items() if pid not in answered),
        ),
        ("processes the checks started", sum(reaped_by["check"].values())),
    ]
    for name, cpu in rows:
        print(f"  {name:<52}{cpu:7.2f}")
    print_faults(by, answered)
    phases: dict[str, list[float]] = collections.defaultdict(list)
    threads: dict[str, list[float]] = collections.defaultdict(list)
    most: collections.Counter[str] = collections.Counter()
    for record in by[("check", "answer")]:
        last = 0.0
        for name, cpu in record["marks"]:
            phases[name].append(cpu - last)
            last = cpu
        if record["pid"] in checks:
            phases["after the answer (until reaped)"].append(checks[record["pid"]] - last)
        counts: collections.Counter[str] = collections.Counter()
        for name, cpu in record["threads"]:
            threads[name].append(cpu)
            counts[name] += 1
        for name, count in counts.items():
            most[name] = max(most[name], count)
    print(f"\n  per check process ({len(answered)} answered)                  sum CPU s   mean ms")
    for name, values in phases.items():
        print(f"    {name:<52}{sum(values):7.2f}{sum(values) / len(values) * 1e3:10.1f}")
    print("\n  their threads at the answer                          sum CPU s   most a process")
    for name, values in sorted(threads.items()):
        print(f"    {name:<52}{sum(values):7.2f}{most[name]:10d}")
    for record in by[("zygote", "imported")] + by[("worker", "begin")]:
        busy = ", ".join(f"{n} {c:.2f}" for n, c in record["threads"])
        print(f"  {record['role']} threads (CPU s) after {record['event']}: {busy}")


def print_faults(by: dict[tuple[str, str], list[dict[str, Any]]], answered: set[int]) -> None:
    """Minor page faults and system CPU of each kind of process (as its parent reaped it,
    less what it reaped of its own): copies of inherited pages, and memory touched first."""
    reaped = {role: {r["child"]: r for r in by[(role, "reaped")]} for role in ("zygote", "worker")}
    checks = reaped["worker"]
    imported = sum(r.get("faults", 0) for r in by[("zygote", "imported")])
    print("\n  minor page faults, system CPU                      faults    sys s")
    print(f"    {'zygote: importing':<48}{imported:10d}")
    for pid, record in reaped["zygote"].items():
        mine = [r for r in checks.values() if r["pid"] == pid and "faults" in r]
        faults = record.get("faults", 0) - sum(r["faults"] for r in mine)
        system = record.get("sys", 0.0) - sum(r.get("sys", 0.0) for r in mine)
        print(f"    {f'warm worker {pid} (without its checks)':<48}{faults:10d}{system:9.2f}")
    kept = [r for pid, r in checks.items() if pid in answered and "faults" in r]
    if kept:
        faults = sorted(r["faults"] for r in kept)
        system = sum(r.get("sys", 0.0) for r in kept)
        print(
            f"    {f'check processes that answered ({len(kept)})':<48}{sum(faults):10d}"
            f"{system:9.2f}"
        )
        mean = sum(faults) / len(faults)
        print(f"      each: median {faults[len(faults) // 2]}, mean {mean:.0f}, most {faults[-1]}")


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
    from formula_check.checking import judge, output_verdicts
    from formula_check.pages import blocks as pages
    from formula_check.planning import plan as planning
    from formula_check.render import card, figure_cache
    from formula_check.runtime import pool
    from formula_check.session import engine
    from formula_check.store import cache

    # The engine imports these when it first checks a block: wrapped where they are defined
    planning.plan_check = timed(spent, "planning (inputs, weights, masks)", planning.plan_check)
    pages._page_block = timed(spent, "reading blocks (fences, options)", pages._page_block)
    output_verdicts.rounding_samples = timed(
        spent, "oracle in float32 (the tolerance's samples)", output_verdicts.rounding_samples
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
    import yaml

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


def run_of(command: list[str], cwd: Path) -> tuple[float, float]:
    """Run ``command``; its wall seconds and the CPU seconds of its processes."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    subprocess.run(command, cwd=cwd, check=True, capture_output=True)
    wall = time.perf_counter() - started
    return wall, _children_seconds() - before.ru_utime - before.ru_stime


def _children_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--site", type=Path, help="a site folder (default: a generated one)")
    parser.add_argument("--pages", type=int, default=10, help="pages of the generated site")
    parser.add_argument("--floor", type=Path, help="a script doing the same checks, timed too")
    parser.add_argument("--no-timing", action="store_true", help="timing: false")
    parser.add_argument("--keep-log", type=Path, help="keep the processes' records there")
    args = parser.parse_args()
    spent: Spent = collections.defaultdict(lambda: [0.0, 0.0, 0])
    worker: Spent = collections.defaultdict(lambda: [0.0, 0.0, 0])
    engines: list[Any] = []
    with tempfile.TemporaryDirectory() as temporary:
        where = Path(temporary)
        source = args.site
        if source is None:
            sys.path.insert(0, str(HERE))
            import sitegen

            source = where / "generated"
            sitegen.write_site(source, sitegen.generate(args.pages), plugin={"timing": True})
        options: dict[str, Any] = {"keep_alive": 0, "cache_dir": ".cache-cold"}
        if args.no_timing:
            options["timing"] = False
        project = site_with(source, where / "cold", **options)
        off = site_with(source, where / "off", enabled=False)
        mkdocs_only = run_of([sys.executable, "-m", "mkdocs", "build", "-q"], off)
        floor = run_of([sys.executable, str(args.floor)], args.floor.parent) if args.floor else None
        instrument(spent, worker, engines)
        log = where / "account.jsonl"
        os.environ["PYTHONPATH"] = hook_folder(where / "hook", log)
        cpu_before = resource.getrusage(resource.RUSAGE_SELF)
        children_before = _children_seconds()
        wall = build_here(project)
        cpu_self = resource.getrusage(resource.RUSAGE_SELF)
        kids_cpu = _children_seconds() - children_before
        started = sum(engine.startup_seconds for engine in engines)
        own_cpu = cpu_self.ru_utime + cpu_self.ru_stime - cpu_before.ru_utime - cpu_before.ru_stime
        print(
            f"cold build: {wall:.2f} s wall; build process {own_cpu:.2f} s CPU, "
            f"the processes it started {kids_cpu:.2f} s CPU; "
            f"threads alive now: {threading.active_count()}"
        )
        print(
            f"the same site, checks off (MkDocs and the theme): {mkdocs_only[0]:.2f} s wall, "
            f"{mkdocs_only[1]:.2f} s CPU"
        )
        if floor is not None:
            print(f"the floor script: {floor[0]:.2f} s wall, {floor[1]:.2f} s CPU")
        print(f"starting workers (the TensorFlow import): {started:.2f} s wall")
        print("\nbuild process, summed over blocks          wall s    CPU s   calls")
        for name, (seconds, cpu, calls) in sorted(spent.items(), key=lambda item: -item[1][0]):
            print(f"  {name:<42}{seconds:8.2f}{cpu:9.2f}{int(calls):8d}")
        print("\nworker, summed over checks                 wall s           checks")
        for name, (seconds, _, calls) in sorted(worker.items(), key=lambda item: -item[1][0]):
            print(f"  {name:<42}{seconds:8.2f}{'':9}{int(calls):8d}")
        print_account(log, kids_cpu)
        if args.keep_log:
            shutil.copy(log, args.keep_log)


if __name__ == "__main__":
    main()
