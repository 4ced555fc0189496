"""Whole-site speed: warm rebuilds, ``mkdocs serve`` edits, and cold builds as sites grow.

One subcommand per benchmark; each prints a compact table from one run, medians over
``--repeats``, the sides interleaved so that drift on the machine hits both alike:

* ``warm``: our own docs (or the good fixture, or a generated site) with every check cached
  vs the same site with ``enabled: false`` (the same math and code, no checks and no cards)
  and with no plugin at all (the formula fences then render as broken text: a floor, not a
  peer), as fresh ``python -m mkdocs build`` processes and as builds repeated in one process
  (what ``mkdocs serve`` sees). Target: cached / disabled <= 1.10.
* ``serve``: ``mkdocs serve`` on a generated site. A prose edit must run no snippet, a
  one-block edit only that block, and every run must come from the same worker pid (counted
  by a ledger the snippets themselves append to, and by the report's ``cached`` flags).
  Save-to-rebuilt latency vs the edited snippet's own run time (target <= snippet + 0.5 s),
  next to the same prose edit served with the plugin disabled (MkDocs' own floor).
* ``scale``: cold builds (cache off) of generated sites of 10, 25 and 50 pages of 4 blocks:
  seconds per block (growth should be linear), and ``workers: 2`` vs 1 on the largest
  (target >= 1.6x on 2 cores).

Run from the project root: ``python bench/site_speed.py warm --repeats 5``.
"""

from __future__ import annotations

import argparse
import itertools
import json
import logging
import math
import os
import re
import resource
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, NamedTuple

import yaml

from formula_check.runtime.pool import kept_address, stop_kept

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
GOOD_SITE = ROOT / "fixtures" / "sites" / "good"
sys.path.insert(0, str(HERE))

import sitegen  # noqa: E402

os.environ["NO_MKDOCS_2_WARNING"] = "1"  # Material's notice on every build is noise here
REPORT_JSON = "formula-check-report.json"


# Shared helpers (notebook_compare.py uses them too) -------------------------------------------


class Timing(NamedTuple):
    """Wall seconds, and CPU seconds of the process and the children it waited for (CPU time
    shifts less than wall time when other jobs share the machine)."""

    wall: float
    cpu: float


def median(values: Sequence[float]) -> float:
    return statistics.median(values)


def medians(timings: Sequence[Timing]) -> Timing:
    return Timing(median([t.wall for t in timings]), median([t.cpu for t in timings]))


def runs(values: Sequence[float] | Sequence[Timing]) -> str:
    return ", ".join(f"{v.wall:.2f}" if isinstance(v, Timing) else f"{v:.2f}" for v in values)


def load_average() -> str:
    return "/".join(f"{v:.1f}" for v in os.getloadavg())


def run_timed(argv: list[str], cwd: Path | None = None) -> tuple[Timing, str]:
    """Run ``argv`` to completion: its timing and its stdout (stderr is shown if it fails)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(argv, cwd=cwd, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode:
        raise SystemExit(f"{' '.join(argv[1:4])}... failed:\n{done.stderr[-3000:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return Timing(wall, cpu), done.stdout


def build_timing(config: Path) -> Timing:
    """A fresh ``python -m mkdocs build`` process."""
    argv = [sys.executable, "-m", "mkdocs", "build", "-q", "-f", str(config)]
    return run_timed(argv, cwd=config.parent)[0]


def config_variant(config: Path, name: str, *, drop: bool = False, **options: Any) -> Path:
    """A sibling of ``config`` with formula-check removed (``drop``) or its options changed
    (``enabled=False``: disabled)."""
    data = yaml.safe_load(config.read_text(encoding="utf-8"))
    plugins = []
    for entry in data.get("plugins", []):
        plugin = entry if isinstance(entry, str) else next(iter(entry))
        if plugin != "formula-check":
            plugins.append(entry)
        elif not drop:
            current = {} if isinstance(entry, str) else dict(entry[plugin] or {})
            plugins.append({plugin: {**current, **options}})
    data["plugins"] = plugins
    path = config.with_name(name)
    path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    return path


def with_serve_speedups(config: Path) -> Path:
    """A sibling of ``config`` with the optional ``formula-check-serve`` plugin added."""
    data = yaml.safe_load(config.read_text(encoding="utf-8"))
    data["plugins"] = [*data.get("plugins", []), "formula-check-serve"]
    path = config.with_name("mkdocs-serve-speedups.yml")
    path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    return path


def report_counts(site_dir: Path) -> tuple[int, int, int]:
    """(cached, verified-or-expected, total) from the build's JSON report."""
    blocks = json.loads((site_dir / REPORT_JSON).read_text(encoding="utf-8"))["blocks"]
    cached = sum(block["cached"] for block in blocks)
    ok = sum(block["outcome_ok"] for block in blocks)
    return cached, ok, len(blocks)


def interleaved(
    sides: dict[str, Callable[[], Timing]], repeats: int, check: Callable[[str], None]
) -> dict[str, list[Timing]]:
    """Each repeat runs every side once, starting from a different side each time."""
    names = list(sides)
    times: dict[str, list[Timing]] = {name: [] for name in names}
    for repeat in range(repeats):
        shift = repeat % len(names)
        for name in names[shift:] + names[:shift]:
            times[name].append(sides[name]())
            check(name)
    return times


# warm -----------------------------------------------------------------------------------------


def in_process_build(config: Path) -> Timing:
    """One ``build(load_config(...))`` in this process (imports and the plugin instance stay)."""
    from mkdocs.commands.build import build
    from mkdocs.config import load_config

    start, cpu = time.perf_counter(), time.process_time()
    build(load_config(config_file=str(config)))
    return Timing(time.perf_counter() - start, time.process_time() - cpu)


def warm(args: argparse.Namespace) -> None:
    with tempfile.TemporaryDirectory(prefix="fc-warm-") as scratch:
        root = Path(scratch) / "site"
        if args.pages:
            pages = sitegen.generate(args.pages)
            on = sitegen.write_site(root, pages, plugin={"workers": 1})
            label = f"generated, {args.pages} pages, {args.pages * 4} blocks"
        elif args.site == "docs":
            shutil.copytree(ROOT / "docs", root / "docs")
            on = Path(shutil.copy(ROOT / "mkdocs.yml", root / "mkdocs.yml"))
            label = "this project's docs (mkdocs.yml and docs/)"
        else:
            shutil.copytree(GOOD_SITE, root)
            on = root / "mkdocs.yml"
            label = "fixtures/sites/good (3 pages)"
        off = config_variant(on, "mkdocs-disabled.yml", enabled=False)
        bare = config_variant(on, "mkdocs-no-plugin.yml", drop=True)
        site_dir = root / "site"
        load_before = load_average()
        prime = build_timing(on).wall  # fills the cache; every timed build below only hits it
        hits: list[tuple[int, int]] = []

        def record_hits(name: str) -> None:
            if name == "cached":
                cached, _, total = report_counts(site_dir)
                hits.append((cached, total))

        fresh = interleaved(
            {
                "cached": lambda: build_timing(on),
                "disabled": lambda: build_timing(off),
                "none": lambda: build_timing(bare),
            },
            args.repeats,
            record_hits,
        )
        logging.getLogger("mkdocs").setLevel(logging.ERROR)  # as -q does for the processes
        for config in (on, off, bare):  # warm-up: imports, the plugin instance
            in_process_build(config)
        same = interleaved(
            {
                "cached": lambda: in_process_build(on),
                "disabled": lambda: in_process_build(off),
                "none": lambda: in_process_build(bare),
            },
            args.repeats,
            record_hits,
        )
        _shutdown_plugins(on)
        load_after = load_average()
    missed = [f"{c}/{t}" for c, t in hits if c != t]
    print(f"site: {label}; priming build (cold, fills the cache) {prime:.2f} s")
    print(f"cache hits in timed builds: {'all' if not missed else 'MISSES ' + ', '.join(missed)}")
    print(
        f"{'median of ' + str(args.repeats):<22}{'cached':>9}{'disabled':>10}{'no plugin':>11}"
        f"{'cached/disabled':>17}"
    )
    for name, times in (("fresh process", fresh), ("in-process", same)):
        c, d, n = (medians(times[k]) for k in ("cached", "disabled", "none"))
        verdict = "met" if c.wall / d.wall <= 1.10 else "MISSED"
        print(
            f"{name + ', wall':<22}{c.wall:>8.2f}s{d.wall:>9.2f}s{n.wall:>10.2f}s"
            f"{c.wall / d.wall:>16.2f}x  (target <= 1.10: {verdict})"
        )
        print(
            f"{name + ', CPU':<22}{c.cpu:>8.2f}s{d.cpu:>9.2f}s{n.cpu:>10.2f}s"
            f"{c.cpu / d.cpu:>16.2f}x"
        )
    for name, times in (("fresh process", fresh), ("in-process", same)):
        for side in ("cached", "disabled", "none"):
            print(f"  runs, {name}, {side:<9}: {runs(times[side])}")
    print(f"load average (1/5/15 min) before {load_before}, after {load_after}")


def _shutdown_plugins(config: Path) -> None:
    from mkdocs.config import load_config

    load_config(config_file=str(config)).plugins.on_shutdown()


# serve ----------------------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def fetch(url: str) -> str:
    with urllib.request.urlopen(url, timeout=120) as response:  # local server only
        return str(response.read().decode("utf-8"))


SERVE_WITH_CTRL_C = (
    "import runpy, signal, sys, time; sys.argv[0] = 'mkdocs'; "
    "signal.signal(signal.SIGINT, signal.default_int_handler); "
    "import mkdocs.commands.build as b; build = b.build\n"
    "def timed(*args, **kwargs):\n"
    "    start = time.perf_counter(); build(*args, **kwargs)\n"
    "    print(f'bench: built in {time.perf_counter() - start:.4f} s', file=sys.stderr, flush=True)\n"
    "b.build = timed\n"
    "runpy.run_module('mkdocs', run_name='__main__')"
)
"""``python -m mkdocs`` with Ctrl-C restored (a job started in the background inherits SIGINT
ignored, and then ``mkdocs serve`` would never run its ``on_shutdown`` hooks), each build timed
on a line of its own: MkDocs' "Documentation built in" line is dropped when its text repeats
(its build logger never logs the same message twice)."""


class Server:
    """``mkdocs serve`` in its own process group, on a free local port."""

    def __init__(self, config: Path, env: dict[str, str], log: Path, *, dirty: bool) -> None:
        self.url = f"http://127.0.0.1:{free_port()}/"
        self.log = log
        argv = [sys.executable, "-c", SERVE_WITH_CTRL_C, "serve", "-f", str(config)]
        argv += ["--dirty"] if dirty else []
        argv += ["-a", self.url.removeprefix("http://").rstrip("/")]
        with log.open("wb") as sink:
            self.process = subprocess.Popen(
                argv,
                cwd=config.parent,
                env=env,
                stdout=sink,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        self.started = time.perf_counter()

    def wait_until_served(self, timeout: float = 600) -> float:
        """Seconds from start until the first page answers (the initial build is done)."""
        while time.perf_counter() - self.started < timeout:
            if self.process.poll() is not None:
                raise SystemExit(f"mkdocs serve exited:\n{self.log.read_text()[-3000:]}")
            try:
                fetch(self.url)
                return time.perf_counter() - self.started
            except (urllib.error.URLError, ConnectionError):
                time.sleep(0.2)
        raise SystemExit(f"mkdocs serve did not answer in {timeout} s")

    def stop(self) -> None:
        """Ctrl-C to the group (so ``on_shutdown`` stops the worker), then kill if it lingers."""
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGINT)
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait()


_LIVERELOAD = re.compile(r"livereload\((\d+), (\d+)\)")


def reload_waiter(url: str) -> threading.Thread:
    """A thread asking MkDocs' livereload endpoint what the page at ``url`` asks: it returns
    once a build newer than that page's is visible (then a browser loads the page again)."""
    found = _LIVERELOAD.search(fetch(url))
    if found is None:
        raise SystemExit(f"{url} has no livereload script")
    scheme, _, host, _ = url.split("/", 3)
    ask = f"{scheme}//{host}/livereload/{found[1]}/{found[2]}"
    waiter = threading.Thread(target=fetch, args=(ask,), daemon=True)
    waiter.start()
    return waiter


def edit_latency(page: Path, old: str, new: str, url: str, timeout: float = 300) -> float:
    """Replace ``old`` by ``new`` in ``page``; seconds until a browser showing ``url`` has
    reloaded it with ``new`` in it (livereload answered, the page fetched again)."""
    text = page.read_text(encoding="utf-8")
    if old not in text:
        raise SystemExit(f"{page.name}: {old!r} not found")
    waiter = reload_waiter(url)
    time.sleep(0.05)  # the page's question is waiting before the save, as in a browser
    page.write_text(text.replace(old, new, 1), encoding="utf-8")
    saved = time.perf_counter()
    while time.perf_counter() - saved < timeout:
        waiter.join(timeout=timeout)
        if new.split("\n", 1)[0] in fetch(url):
            return time.perf_counter() - saved
        waiter = reload_waiter(url)  # a build that began before the save was seen
    raise SystemExit(f"the edit of {page.name} never showed at {url}")


_BUILT = re.compile(r"bench: built in ([0-9.]+) s")


def builds_logged(log: Path) -> list[float]:
    """Every build time ``mkdocs serve`` has logged so far, in seconds."""
    return [float(seconds) for seconds in _BUILT.findall(log.read_text(errors="replace"))]


def next_build_time(log: Path, seen: int, timeout: float = 10.0) -> float:
    """The build time logged after the first ``seen`` ones (the page can answer a moment before
    MkDocs writes its "built in" line)."""
    deadline = time.perf_counter() + timeout
    while time.perf_counter() < deadline:
        times = builds_logged(log)
        if len(times) > seen:
            return times[-1]
        time.sleep(0.02)
    return float("nan")


def read_ledger(path: Path) -> list[tuple[int, str]]:
    if not path.exists():
        return []
    rows = [line.split() for line in path.read_text(encoding="utf-8").splitlines() if line]
    return [(int(pid), block) for pid, block in rows]


def pid_alive(pid: int) -> bool:
    return Path(f"/proc/{pid}").exists()


def snippet_own_seconds(root: Path, page: str, block_id: str, repeats: int) -> tuple[float, float]:
    """Median snippet run time and whole-check time of one block in a warm engine."""
    from formula_check.messages import CheckReply
    from formula_check.pages.blocks import Settings, page_blocks
    from formula_check.planning.plan import plan_check
    from formula_check.session import open_engine
    from formula_check.session.options import Options

    lines = (root / page).read_text(encoding="utf-8").split("\n")
    blocks = page_blocks(lines, page=page, settings=Settings(root, 60.0, timing=False))
    specs = {block.block_id: block.spec for block in blocks if block.spec is not None}
    spec = specs[block_id]
    own, whole = [], []
    # the site's own env option: its snippets write to the ledger that variable names
    options = Options(cache=False, env=(sitegen.LEDGER_ENV,))
    with open_engine(options.engine(root)) as engine:
        engine.check_many(specs.values())  # warm the worker as serve's earlier builds did
        for _ in range(repeats):
            plan = plan_check(spec, str(engine.root), with_timing=False)
            reply, _ = engine.pool.request(plan.request, plan.arrays, 60)
            if not isinstance(reply.answer, CheckReply):
                raise SystemExit(f"{block_id} failed in the bench's engine: {reply}")
            own.append(reply.answer.snippet_seconds)
            start = time.perf_counter()
            engine.check(spec)
            whole.append(time.perf_counter() - start)
    return median(own), median(whole)


def serve(args: argparse.Namespace) -> None:
    with tempfile.TemporaryDirectory(prefix="fc-serve-") as scratch:
        root = Path(scratch) / "site"
        pages = sitegen.generate(args.pages)
        slow = sitegen.write_site(root, pages, plugin={"workers": 1}, ledger=True)
        on = with_serve_speedups(slow)
        off = config_variant(slow, "mkdocs-disabled.yml", enabled=False)
        ledger = Path(scratch) / "ledger.txt"
        env = dict(os.environ, **{sitegen.LEDGER_ENV: str(ledger)})
        edited = next((b for b in pages[1] if b.recipe.oracle == "attention"), pages[1][0])
        page = root / "docs" / "page-001.md"
        load_before = load_average()
        server = Server(on, env, Path(scratch) / "serve-on.log", dirty=args.dirty)
        try:
            startup = server.wait_until_served()
            page_url = server.url + "page-001/"
            steps = [("initial build", len(read_ledger(ledger)), _cached(server), 0.0)]
            current = {
                "prose": sitegen.PROSE[1],
                "block": f"# page {edited.page}, block {edited.index}",
            }
            latencies: dict[str, list[float]] = {"prose": [], "block": []}
            rebuilds: dict[str, list[float]] = {"prose": [], "block": []}

            def timed_edit(kind: str, new: str, repeat: int) -> None:
                """Replace the current text of ``kind``, time the rebuild, count snippets run."""
                before = len(read_ledger(ledger))
                seen = len(builds_logged(server.log))
                latencies[kind].append(edit_latency(page, current[kind], new, page_url))
                rebuilds[kind].append(next_build_time(server.log, seen))
                current[kind] = new
                ran = len(read_ledger(ledger)) - before
                steps.append((f"{kind} edit {repeat}", ran, _cached(server), latencies[kind][-1]))

            for repeat in range(args.repeats):
                timed_edit("prose", f"{sitegen.PROSE[1]} prose-edit-{repeat}", repeat)
                timed_edit(
                    "block",
                    f"# page {edited.page}, block {edited.index} (block-edit-{repeat})",
                    repeat,
                )
            prose_times, block_times = latencies["prose"], latencies["block"]
            pids = {pid for pid, _ in read_ledger(ledger)}
            alive_while_serving = all(pid_alive(pid) for pid in pids)
        finally:
            server.stop()
        time.sleep(1.0)
        gone_after_stop = not any(pid_alive(pid) for pid in pids)
        # the same kinds of edit on the same page, served by MkDocs with its own polling and
        # template compiling (no formula-check-serve), and with the plugin disabled (the floor)
        slow_times, slow_builds = serve_edits(
            slow, env, Path(scratch) / "serve-slow.log", args, page, current, "block"
        )
        floor_times, floor_builds = serve_edits(
            off, env, Path(scratch) / "serve-off.log", args, page, current, "prose"
        )
        os.environ[sitegen.LEDGER_ENV] = str(Path(scratch) / "ledger-bench.txt")
        own, whole = snippet_own_seconds(root, "docs/page-001.md", edited.block_id, args.repeats)
        load_after = load_average()
    blocks = sum(len(p) for p in pages)
    print(
        f"site: generated, {args.pages} pages, {blocks} blocks; mkdocs serve"
        f"{' --dirty' if args.dirty else ''}; start (cold build) {startup:.1f} s"
    )
    print(f"{'step':<16}{'snippets run':>13}{'cached/total':>14}{'latency':>10}")
    for name, executed, (cached, total), latency in steps:
        print(f"{name:<16}{executed:>13}{f'{cached}/{total}':>14}{latency:>9.2f}s")
    print(
        f"warm workers that forked the checks, by the ledger: {sorted(pids)} (no more than the"
        " workers: TensorFlow stayed loaded); "
        f"alive while serving: {alive_while_serving}; gone after Ctrl-C: {gone_after_stop}"
    )
    block_latency, prose_latency, slow_latency, floor = (
        median(times) for times in (block_times, prose_times, slow_times, floor_times)
    )
    print(
        f"edited block [{edited.block_id}]: snippet's own run {own * 1e3:.0f} ms, whole check "
        f"in a warm engine {whole * 1e3:.0f} ms"
    )
    print(
        "save-to-rebuilt, medians (from writing the page to a browser showing the edit: "
        "MkDocs' livereload answers the page, which is loaded again):"
    )
    print(
        f"  one-block edit: {block_latency:.2f} s; target <= snippet + 0.5 s = {own + 0.5:.2f} s "
        f"-> {'met' if block_latency <= own + 0.5 else 'MISSED'}; without formula-check-serve "
        f"(MkDocs' 0.5 s polling, templates compiled each time) {slow_latency:.2f} s"
    )
    print(
        f"  prose edit    : {prose_latency:.2f} s; with the plugin disabled (MkDocs alone) "
        f"{floor:.2f} s"
    )
    print(
        f"  runs: block {runs(block_times)} | prose {runs(prose_times)} | without speed-ups "
        f"{runs(slow_times)} | disabled {runs(floor_times)}"
    )
    block_build, prose_build, slow_build, floor_build = (
        median([t for t in times if math.isfinite(t)] or [math.nan])
        for times in (rebuilds["block"], rebuilds["prose"], slow_builds, floor_builds)
    )
    print(
        "the rebuild itself (MkDocs' build(), medians; the rest of save-to-rebuilt is polling, "
        "MkDocs' 0.1 s wait for more changes, and fetching the page):"
    )
    print(
        f"  one-block edit {block_build:.2f} s, prose edit {prose_build:.2f} s; without speed-ups, "
        f"one-block edit {slow_build:.2f} s; plugin disabled, prose edit {floor_build:.2f} s"
    )
    print(
        f"  runs: block {runs(rebuilds['block'])} | prose {runs(rebuilds['prose'])} | without "
        f"speed-ups {runs(slow_builds)} | disabled {runs(floor_builds)}"
    )
    print(f"load average (1/5/15 min) before {load_before}, after {load_after}")


def serve_edits(
    config: Path,
    env: dict[str, str],
    log: Path,
    args: argparse.Namespace,
    page: Path,
    current: dict[str, str],
    kind: str,
) -> tuple[list[float], list[float]]:
    """Serve ``config`` and edit ``kind`` (``prose`` or ``block``) on ``page`` ``args.repeats``
    times: save-to-rebuilt latencies and build times."""
    server = Server(config, env, log, dirty=args.dirty)
    latencies, builds = [], []
    try:
        server.wait_until_served()
        # one edit not timed: its rebuild waits for the worker that the plugin starts in the
        # background after a first build served from the cache (an author's first edit comes
        # later than the bench's, when the worker is up)
        warm_up = f"{current[kind]} ({config.stem}-warm-up)"
        edit_latency(page, current[kind], warm_up, server.url + "page-001/")
        current[kind] = warm_up
        for repeat in range(args.repeats):
            new = f"{current[kind]} ({config.stem}-{repeat})"
            seen = len(builds_logged(server.log))
            latencies.append(edit_latency(page, current[kind], new, server.url + "page-001/"))
            builds.append(next_build_time(server.log, seen))
            current[kind] = new
    finally:
        server.stop()
    return latencies, builds


def _cached(server: Server) -> tuple[int, int]:
    blocks = json.loads(fetch(server.url + REPORT_JSON))["blocks"]
    return sum(block["cached"] for block in blocks), len(blocks)


# scale ----------------------------------------------------------------------------------------


def scale(args: argparse.Namespace) -> None:
    sizes = [int(size) for size in args.sizes.split(",")]
    largest = max(sizes)
    cases = [(size, 1) for size in sizes] + [(largest, 2)]
    with tempfile.TemporaryDirectory(prefix="fc-scale-") as scratch:
        configs: dict[str, Path] = {}
        for size, workers in cases:
            root = Path(scratch) / f"site-{size}-{workers}"
            plugin = {"workers": workers, "cache": False, "timing": args.timing}
            configs[f"{size}/{workers}"] = sitegen.write_site(
                root, sitegen.generate(size), plugin=plugin
            )
        configs["disabled"] = config_variant(configs[f"{largest}/1"], "off.yml", enabled=False)
        kept_roots = []
        for workers in (1, 2):
            root = Path(scratch) / f"site-{largest}-{workers}-kept"
            plugin = {"workers": workers, "cache": False, "timing": args.timing}
            plugin["keep_alive"] = 600
            configs[f"{largest}/{workers} kept"] = sitegen.write_site(
                root, sitegen.generate(largest), plugin=plugin
            )
            build_timing(configs[f"{largest}/{workers} kept"])  # leaves TensorFlow imported
            kept_roots.append(root)
        load_before = load_average()
        failures: list[str] = []

        def verify(name: str) -> None:
            if name != "disabled":
                _, ok, total = report_counts(configs[name].parent / "site")
                failures.extend(
                    [f"{name}: {total - ok}/{total} not verified"] if ok != total else []
                )

        sides = {
            name: lambda config=config: build_timing(config) for name, config in configs.items()
        }
        try:
            times = interleaved(sides, args.repeats, verify)
        finally:
            for root in kept_roots:
                stop_kept(kept_address(root.resolve(), sys.executable, 600))
        checking = checking_throughput(configs[f"{largest}/1"].parent, args)
        load_after = load_average()
    floor = medians(times["disabled"])
    timing = (
        "timing on (the default: warm-up, repeats, tf.function)" if args.timing else "timing off"
    )
    print(f"cold builds, cache off, {timing}; medians of {args.repeats}; CPU = build + worker(s)")
    print(
        f"{'pages':>6}{'blocks':>8}{'workers':>9}{'wall':>8}{'wall/block':>12}{'CPU':>8}{'CPU/block':>11}"
    )
    cost = {}
    for size, workers in cases:
        blocks, cost[size, workers] = size * 4, medians(times[f"{size}/{workers}"])
        wall, cpu = cost[size, workers]
        print(
            f"{size:>6}{blocks:>8}{workers:>9}{wall:>7.1f}s{wall / blocks:>12.3f}{cpu:>7.1f}s{cpu / blocks:>11.3f}"
        )
    print(f"{largest:>6}{'plugin disabled':>17}{floor.wall:>7.1f}s{'':>12}{floor.cpu:>7.1f}s")
    for low, high in itertools.pairwise(sizes):
        added = (high - low) * 4
        wall = (cost[high, 1].wall - cost[low, 1].wall) / added
        cpu = (cost[high, 1].cpu - cost[low, 1].cpu) / added
        print(f"marginal cost {low}->{high} pages: {wall:.3f} s/block wall, {cpu:.3f} s/block CPU")
    speedup = cost[largest, 1].wall / cost[largest, 2].wall
    print(
        f"2 workers vs 1 on {largest} pages: {speedup:.2f}x faster (target >= 1.6x) -> "
        f"{'met' if speedup >= 1.6 else 'MISSED'}"
    )
    kept = {w: medians(times[f"{largest}/{w} kept"]) for w in (1, 2)}
    print(
        f"with TensorFlow kept loaded (keep_alive, after a first build): 1 worker "
        f"{kept[1].wall:.1f}s, 2 workers {kept[2].wall:.1f}s -> {kept[1].wall / kept[2].wall:.2f}x "
        "(CPU of kept workers is not counted: they are not children of the build)"
    )
    for name, values in times.items():
        print(f"  runs {name:<8}: {runs(values)}")
    one, two = median(checking[1]), median(checking[2])
    print(
        f"checking alone, once the workers are up (the engine, no MkDocs; {largest * 4} blocks): "
        f"1 worker {one:.1f} s, 2 workers {two:.1f} s -> {one / two:.2f}x"
    )
    print(f"  runs 1 worker: {runs(checking[1])} | 2 workers: {runs(checking[2])}")
    # Amdahl: what a second worker can shorten is the checking; the rest of the one-worker
    # build (MkDocs' start, the TensorFlow import, each worker's warm-up) stays serial.
    serial = cost[largest, 1].wall - one
    ceiling = cost[largest, 1].wall / (serial + one / 2)
    print(
        f"ceiling for 2 workers vs 1: {serial:.1f} s of the one-worker build is not checking; "
        f"with the checking exactly halved the build would be {ceiling:.2f}x faster"
    )
    print("all blocks verified" if not failures else "FAILURES: " + "; ".join(failures))
    print(f"load average (1/5/15 min) before {load_before}, after {load_after}")


def checking_throughput(root: Path, args: argparse.Namespace) -> dict[int, list[float]]:
    """Seconds to check every block of the site at ``root`` with 1 and with 2 workers already
    started (TensorFlow imported, workers forked): what a second worker adds to the checking,
    apart from the start-up both pay once."""
    from formula_check.pages.blocks import Settings, page_blocks
    from formula_check.session import open_engine
    from formula_check.session.options import Options

    specs = []
    for page in sorted((root / "docs").glob("*.md")):
        lines = page.read_text(encoding="utf-8").split("\n")
        settings = Settings(root, 60.0, timing=args.timing)
        found = page_blocks(lines, page=page.relative_to(root).as_posix(), settings=settings)
        specs += [block.spec for block in found if block.spec is not None]
    seconds: dict[int, list[float]] = {1: [], 2: []}
    for _ in range(args.repeats):
        for workers in (1, 2):
            with open_engine(Options(workers=workers, cache=False).engine(root)) as engine:
                engine.check_many(specs[:workers])  # import TensorFlow, start every worker
                start = time.perf_counter()
                results = engine.check_many(specs)
                seconds[workers].append(time.perf_counter() - start)
            bad = [r.block_id for r in results if not r.outcome_ok]
            if bad:
                raise SystemExit(f"checking alone: not verified: {bad}")
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    for name, runner, repeats in (("warm", warm, 11), ("serve", serve, 5), ("scale", scale, 2)):
        sub = commands.add_parser(name, help=runner.__name__)
        sub.add_argument("--repeats", type=int, default=repeats)
        sub.set_defaults(run=runner)
    commands.choices["warm"].add_argument(
        "--site",
        choices=("docs", "good"),
        default="docs",
        help="this project's own docs (default) or the good fixture site",
    )
    commands.choices["warm"].add_argument(
        "--pages", type=int, default=0, help="use a generated site of this many pages instead"
    )
    commands.choices["serve"].add_argument("--pages", type=int, default=10)
    commands.choices["serve"].add_argument(
        "--dirty", action="store_true", help="mkdocs serve --dirty: rebuild only edited pages"
    )
    commands.choices["scale"].add_argument("--sizes", default="10,25,50", help="pages per site")
    commands.choices["scale"].add_argument(
        "--no-timing",
        dest="timing",
        action="store_false",
        help="timing: false on every block (by default each snippet is timed, as on a site)",
    )
    args = parser.parse_args()
    if args.command == "serve" and args.pages < 2:
        parser.error("serve edits a block of the second page: --pages must be at least 2")
    args.run(args)


if __name__ == "__main__":
    main()
