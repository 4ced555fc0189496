"""Engine (isolated worker, cold) vs the in-process floor, on the same 20 blocks.

Prints, side by side from one run (medians over ``--repeats``):

* cold wall time of a fresh process checking 20 blocks through the engine, cache off;
* cold wall time of a fresh process running the same snippets and oracles in-process;
* their ratio (target <= 1.25);
* warm per-check overhead beyond the snippet's own run time (target <= 20 ms);
* the worker's peak resident memory.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from workload import ROOT, blocks  # noqa: E402

ENGINE_COLD = """
import sys
sys.path[:0] = [{bench!r}]
from workload import ROOT, blocks
from formula_check.model import Status
from formula_check.session.options import Options
from formula_check.session import open_engine
with open_engine(Options(cache=False).engine(ROOT / "tests" / "snippets")) as engine:
    results = engine.check_many(blocks())
assert all(r.status is Status.VERIFIED for r in results), [r.headline() for r in results if r.status is not Status.VERIFIED]
"""


def wall(argv: list[str]) -> float:
    start = time.perf_counter()
    subprocess.run(argv, check=True, cwd=ROOT, stdout=subprocess.DEVNULL)
    return time.perf_counter() - start


def warm_overhead(repeats: int) -> tuple[float, float, int]:
    """Median (engine wall - snippet's own time) per check, median snippet time, peak RSS (KiB)."""
    from formula_check.checking.judge import evaluate
    from formula_check.messages import CheckReply
    from formula_check.planning.plan import plan_check
    from formula_check.results import Environment
    from formula_check.session import open_engine
    from formula_check.session.options import Options

    overheads, own = [], []
    with open_engine(Options(cache=False).engine(ROOT / "tests" / "snippets")) as engine:
        engine.warm_up()
        for _ in range(repeats):
            for spec in blocks():
                start = time.perf_counter()
                plan = plan_check(spec, str(engine.root), with_timing=False)
                reply, _ = engine.pool.request(plan.request, plan.arrays, 60)
                answer = reply.answer
                assert isinstance(answer, CheckReply), (spec.block_id, reply)
                evaluate(plan, answer, reply.arrays, Environment())
                total = time.perf_counter() - start
                overheads.append(total - answer.snippet_seconds)
                own.append(answer.snippet_seconds)
        return statistics.median(overheads), statistics.median(own), engine.pool.peak_rss_kb


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    engine_argv = [sys.executable, "-c", ENGINE_COLD.format(bench=str(HERE))]
    floor_argv = [sys.executable, str(HERE / "inprocess_floor.py")]
    engine_times, floor_times = [], []
    for _ in range(args.repeats):  # interleaved, so drift on the machine hits both sides
        engine_times.append(wall(engine_argv))
        floor_times.append(wall(floor_argv))
    engine_cold, floor_cold = statistics.median(engine_times), statistics.median(floor_times)
    overhead, own, rss = warm_overhead(args.repeats)
    print(f"blocks checked per run           : {len(blocks())}")
    print(
        f"engine, cold (process + worker)  : {engine_cold:.2f} s  (runs: {', '.join(f'{t:.2f}' for t in engine_times)})"
    )
    print(
        f"in-process floor, cold           : {floor_cold:.2f} s  (runs: {', '.join(f'{t:.2f}' for t in floor_times)})"
    )
    print(f"ratio engine / floor             : {engine_cold / floor_cold:.2f}  (target <= 1.25)")
    print(
        f"warm overhead per check (median) : {overhead * 1e3:.1f} ms beyond the snippet's own {own * 1e3:.1f} ms (target <= 20 ms)"
    )
    print(f"worker peak RSS                  : {rss / 1024:.0f} MiB")


if __name__ == "__main__":
    main()
