"""Where the build process's own CPU goes in planning and judging a check, block by block.

A check's answer comes from a worker running TensorFlow; what the build process then does
with it (plan the inputs, run the oracle in float64 and float32, compile and evaluate the
formula, compare, time the oracle for the card) is pure NumPy, and depends on nothing but the
block and its answer. So this script takes the answers once, from a cold build of a site
(``--capture``: the workers run once), writes them to a file, and then replays planning and
judging on them as often as wanted, in this process, with the checker as installed
(``--replay``): the same judged block set under two versions of the checker, with no
TensorFlow and no noise from the workers.

    python bench/judge_profile.py --capture WORKLOAD/ours --out answers.pickle
    python bench/judge_profile.py --replay answers.pickle --rounds 5
    python bench/judge_profile.py --replay answers.pickle --profile 30    # cProfile, top 30
    python bench/judge_profile.py --replay answers.pickle --no-timing     # timing: false
    python bench/judge_profile.py --replay answers.pickle --site SITE     # its own oracles
    python bench/judge_profile.py --build WORKLOAD/ours --profile 40      # every thread

Replay prints the thread CPU seconds of planning and of judging, summed over the blocks
(median over rounds), per step of judging (the timers :func:`steps` puts in place), and
each block's verdicts, which two versions of the checker must print alike (``--verdicts
OUT`` writes them, for ``diff``).
"""

from __future__ import annotations

import argparse
import collections
import copyreg
import cProfile
import dataclasses
import functools
import io
import pickle
import pstats
import shutil
import statistics
import sys
import tempfile
import time
import types
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

Spent = collections.defaultdict[str, float]


def _proxy(mapping: types.MappingProxyType[Any, Any]) -> tuple[Any, ...]:
    from formula_check.model import frozen_map

    return frozen_map, (dict(mapping),)


copyreg.pickle(types.MappingProxyType, _proxy)  # the model's frozen maps


@dataclasses.dataclass
class Answer:
    """One checked block: its spec (as the engine got it), the worker's reply and arrays."""

    spec: Any
    reply: Any
    arrays: dict[str, Any]
    env: Any


def capture(site: Path, out: Path) -> None:
    """A cold ``mkdocs build`` of ``site`` in this process, keeping every answered check."""
    from mkdocs.commands.build import build
    from mkdocs.config import load_config

    from formula_check.messages import CheckReply
    from formula_check.session import engine

    answers: list[Answer] = []
    judged = engine.Engine._judge

    def keeping(self: Any, spec: Any, plan: Any, reply: Any, env: Any) -> Any:
        if isinstance(reply.answer, CheckReply):
            answers.append(Answer(spec, reply.answer, dict(reply.arrays), env))
        return judged(self, spec, plan, reply, env)

    engine.Engine._judge = keeping  # type: ignore[method-assign]
    with tempfile.TemporaryDirectory() as temporary:
        project = Path(temporary) / "site"
        shutil.copytree(site, project, ignore=shutil.ignore_patterns("site", ".cache"))
        config = load_config(config_file=str(project / "mkdocs.yml"))
        plugin = config.plugins["formula-check"]
        plugin.on_startup(command="build", dirty=False)
        try:
            build(config)
        finally:
            plugin.on_shutdown()
    answers.sort(key=lambda answer: answer.spec.block_id)
    # plain tuples, readable by any script (astuple would turn the spec into tuples too)
    kept = [(answer.spec, answer.reply, answer.arrays, answer.env) for answer in answers]
    out.write_bytes(pickle.dumps(kept, protocol=pickle.HIGHEST_PROTOCOL))
    print(f"{len(answers)} answered checks written to {out}")


def load(path: Path) -> list[Answer]:
    """The answers :func:`capture` wrote."""
    return [Answer(*kept) for kept in pickle.loads(path.read_bytes())]


def profile_build(site: Path, top: int) -> str:
    """A cold ``mkdocs build`` of ``site`` in this process with every thread profiled on its
    own CPU clock (the main thread's MkDocs, the checking threads, the pool's): where the
    build process's CPU goes, whole, by function."""
    import threading

    from mkdocs.commands.build import build
    from mkdocs.config import load_config

    profiles: list[cProfile.Profile] = []
    run = threading.Thread.run

    def profiled_run(self: threading.Thread) -> None:
        profile = cProfile.Profile(time.thread_time)
        profiles.append(profile)
        profile.enable()
        try:
            run(self)
        finally:
            profile.disable()

    threading.Thread.run = profiled_run  # type: ignore[method-assign]
    with tempfile.TemporaryDirectory() as temporary:
        project = Path(temporary) / "site"
        shutil.copytree(site, project, ignore=shutil.ignore_patterns("site", ".cache"))
        config = load_config(config_file=str(project / "mkdocs.yml"))
        plugin = config.plugins["formula-check"]
        main = cProfile.Profile(time.thread_time)
        profiles.append(main)
        main.enable()
        plugin.on_startup(command="build", dirty=False)
        try:
            build(config)
        finally:
            plugin.on_shutdown()
            main.disable()
    threading.Thread.run = run  # type: ignore[method-assign]
    text = io.StringIO()
    stats = pstats.Stats(profiles[0], stream=text)
    for profile in profiles[1:]:
        stats.add(profile)
    stats.sort_stats("cumulative").print_stats(top)
    stats.sort_stats("tottime").print_stats(top)
    return f"{len(profiles)} threads profiled\n" + text.getvalue()


def timed(spent: Spent, name: str, function: Callable[..., Any]) -> Callable[..., Any]:
    """``function``, adding its thread-CPU seconds to ``spent[name]``."""

    @functools.wraps(function)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        cpu = time.thread_time()
        try:
            return function(*args, **kwargs)
        finally:
            spent[name] += time.thread_time() - cpu

    return wrapper


STEPS = (
    ("checking.output_verdicts", "rounding_samples", "oracle in float32 (the tolerance's samples)"),
    ("checking.judge", "judge_formula", "formula (compile, evaluate)"),
    ("checking.judge", "oracle_timing", "oracle timed for the card"),
    ("checking.judge", "_expected", "oracle in float64 (expected values)"),
    ("checking.judge", "oracle_weights", "reading the weights back"),
    ("checking.compare:Difference", "of", "comparing"),
    ("checking.compare:Difference", "judged", "comparing"),
    ("oracles.tolerance:Derivation", "tolerance", "deriving the tolerance"),
    ("judge", "rounding_samples", "oracle in float32 (the tolerance's samples)"),
    ("judge", "judge_formula", "formula (compile, evaluate)"),
    ("judge", "oracle_timing", "oracle timed for the card"),
    ("judge", "_expected", "oracle in float64 (expected values)"),
    ("judge", "compare", "comparing"),
    ("compare:Difference", "of", "comparing"),
    ("compare:Difference", "judged", "comparing"),
    ("tolerance:Derivation", "tolerance", "deriving the tolerance"),
)
"""Where :func:`steps` puts its timers: a module of the package (or a class in one), the
name, and what the step is. Names of older versions are here too; those absent are left
out, so that two versions are timed alike where they can be."""


@functools.cache
def steps() -> Spent:
    """Timers around the steps of judging, in place once for the whole replay."""
    import importlib

    spent: Spent = collections.defaultdict(float)
    for where, name, what in STEPS:
        module, _, owner = where.partition(":")
        try:
            place: Any = importlib.import_module(f"formula_check.{module}")
        except ImportError:  # a module of another version's layout
            continue
        place = getattr(place, owner, None) if owner else place
        found = getattr(place, name, None) if place is not None else None
        if found is not None:
            setattr(place, name, timed(spent, what, found))
    return spent


def untimed(answer: Answer) -> Answer:
    """The same answer, for a block with ``timing: false`` (the worker's timings dropped,
    as a worker asked for none would send none)."""
    spec = answer.spec
    timing = dataclasses.replace(spec.timing, enabled=False)
    reply = dataclasses.replace(answer.reply, timings=())
    return Answer(dataclasses.replace(spec, timing=timing), reply, answer.arrays, answer.env)


def _faults() -> int:
    """Minor page faults of this thread so far (a fresh big array faults in page by page)."""
    import resource

    return resource.getrusage(resource.RUSAGE_THREAD).ru_minflt


def replay_once(answers: list[Answer], root: str) -> tuple[float, float, list[str]]:
    """Plan and judge every answer once: thread CPU seconds of each, and the verdicts; the
    page faults of both, together, are added to ``spent`` (see :func:`steps`)."""
    from formula_check.checking.judge import evaluate
    from formula_check.planning.plan import plan_check
    from formula_check.session.engine import ONE_BLAS_THREAD

    planning = judging = 0.0
    verdicts = []
    faults = _faults()
    with ONE_BLAS_THREAD.held():
        for answer in answers:
            cpu = time.thread_time()
            plan = plan_check(answer.spec, root)
            planning += time.thread_time() - cpu
            cpu = time.thread_time()
            result = evaluate(plan, answer.reply, answer.arrays, answer.env)
            judging += time.thread_time() - cpu
            verdicts.append(described(result))
    steps()[FAULTS] += _faults() - faults
    return planning, judging, verdicts


FAULTS = "minor page faults (planning and judging)"


def described(result: Any) -> str:
    """Everything a result says but its times: each verdict whole (its floats as ``repr``
    writes them, to the last bit), the formula's, the notes, the shapes, and a digest of each
    array the heatmaps draw."""
    import hashlib

    import numpy as np

    parts = [f"{result.block_id} {result.status.value} {result.message!r}"]
    parts += [f"  {verdict!r}" for verdict in result.verdicts]
    parts += [f"  {result.formula!r}", f"  {result.shapes!r}"]
    parts += [f"  note {note!r}" for note in result.notes]
    for name in sorted(result.arrays):
        array = np.ascontiguousarray(result.arrays[name])
        digest = hashlib.sha256(array.tobytes()).hexdigest()[:16]
        parts.append(f"  array {name} {array.dtype} {array.shape} {digest}")
    parts.append(f"  timings {[timing.label for timing in result.timings]}")
    return "\n".join(parts)


@dataclasses.dataclass
class Rounds:
    planning: list[float] = dataclasses.field(default_factory=list)
    judging: list[float] = dataclasses.field(default_factory=list)
    steps: list[dict[str, float]] = dataclasses.field(default_factory=list)


def replay(answers: list[Answer], rounds: int, root: str) -> tuple[Rounds, list[str]]:
    spent = steps()
    measured = Rounds()
    verdicts: list[str] = []
    replay_once(answers[:1], root)  # imports and first-call caches, as a build pays once
    for _ in range(rounds):
        spent.clear()
        planning, judging, verdicts = replay_once(answers, root)
        measured.planning.append(planning)
        measured.judging.append(judging)
        measured.steps.append(dict(spent))
    return measured, verdicts


def _median(values: tuple[float, ...]) -> float:
    return statistics.median(values)


def report(measured: Rounds, blocks: int) -> Iterator[str]:
    planning = _median(tuple(measured.planning))
    judging = _median(tuple(measured.judging))
    yield f"{blocks} blocks, {len(measured.judging)} rounds (medians, thread CPU seconds)"
    yield f"  planning                                   {planning:7.3f}  {planning / blocks * 1e3:6.1f} ms/block"
    yield f"  judging (all of it)                        {judging:7.3f}  {judging / blocks * 1e3:6.1f} ms/block"
    names = sorted({name for step in measured.steps for name in step})
    for name in sorted(names, key=lambda n: -_median(tuple(s.get(n, 0.0) for s in measured.steps))):
        seconds = _median(tuple(step.get(name, 0.0) for step in measured.steps))
        if name != FAULTS:
            yield f"    {name:<41}{seconds:7.3f}  {seconds / blocks * 1e3:6.1f} ms/block"
    faults = _median(tuple(step.get(FAULTS, 0.0) for step in measured.steps))
    yield f"  {FAULTS:<43}{faults:7.0f}"


def profiled(answers: list[Answer], root: str, top: int) -> str:
    replay_once(answers[:1], root)
    profile = cProfile.Profile()
    profile.enable()
    replay_once(answers, root)
    profile.disable()
    text = io.StringIO()
    pstats.Stats(profile, stream=text).sort_stats("cumulative").print_stats(top)
    text.write("\n")
    pstats.Stats(profile, stream=text).sort_stats("tottime").print_stats(top)
    return text.getvalue()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--capture", type=Path, metavar="SITE", help="a site folder to build")
    parser.add_argument("--out", type=Path, default=Path("answers.pickle"))
    parser.add_argument("--replay", type=Path, metavar="ANSWERS", help="answers to judge again")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--profile", type=int, metavar="TOP", help="cProfile one round")
    parser.add_argument("--no-timing", action="store_true", help="judge as with timing: false")
    parser.add_argument("--verdicts", type=Path, metavar="OUT", help="write the verdicts")
    parser.add_argument("--build", type=Path, metavar="SITE", help="profile a whole cold build")
    parser.add_argument(
        "--site", type=Path, metavar="SITE", help="replay: the captured site, for its oracles"
    )
    args = parser.parse_args()
    if args.build is not None:
        print(profile_build(args.build, args.profile or 40))
        return
    if args.capture is not None:
        capture(args.capture, args.out)
        return
    if args.replay is None:
        parser.error("give --capture SITE or --replay ANSWERS")
    root = str(Path.cwd())
    if args.site is not None:  # the project's own oracles (``oracles:``), as its build has
        from formula_check.project.loading import load_project

        project = load_project(args.site / "mkdocs.yml")
        project.load_oracles()
        root = str(project.root)
    answers = load(args.replay)
    if args.no_timing:
        answers = [untimed(answer) for answer in answers]
    if args.profile:
        print(profiled(answers, root, args.profile))
        return
    measured, verdicts = replay(answers, args.rounds, root)
    print("\n".join(report(measured, len(answers))))
    if args.verdicts is not None:
        args.verdicts.write_text("\n".join(verdicts) + "\n", encoding="utf-8")


if __name__ == "__main__":
    sys.exit(main())
