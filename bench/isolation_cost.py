"""What one process per check costs: the same checks run in a shared warm process (how the
worker answered every check before) and each in a process of its own forked from it (how it
answers now), interleaved in one run, medians over ``--repeats`` rounds.

Both sides run in one warm worker of this script's own (TensorFlow imported, one thread, the
warm-up done, as :func:`formula_check.worker.execution.begin` leaves it), on the same planned
requests, without timing runs (``timing: false``), so the difference is the isolation alone:
the fork, the check's new eager context, the copy-on-write of the pages it touches, the exit
and the reaping. Target: <= 25 ms a check.

Three figures per block: the *latency* (request to answer; the next check's process is
forked and made ready after each answer, as the worker does while its parent judges the
answer), the *turnaround* (the latency plus that tidying: reaping, sweeping, forking the
next), and the *CPU* all of it takes, in this process and its children.

    python bench/isolation_cost.py --repeats 50
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parent / "plugin"), str(HERE.parent / "tests")]
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ["TF_ENABLE_ONEDNN_OPTS"] = "0"

KERAS_MHA = """
import tensorflow as tf

MHA = tf.keras.layers.MultiHeadAttention
"""


def blocks() -> dict[str, object]:
    from implementations import FFN, SDPA
    from support import spec_for

    return {
        "attention (2x5x7)": spec_for("attention", SDPA),
        "ffn (2x5x6, d_ff 9)": spec_for("ffn", FFN),
        "Keras MHA (d_model 512, 8 heads, seq 60)": spec_for(
            "multihead",
            KERAS_MHA,
            preset="keras-mha",
            entry="MHA",
            dims={"b": 1, "n": 60, "m": 60, "d_model": 512, "h": 8, "depth": 64},
            atol=1e-3,
        ),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=50)
    args = parser.parse_args()

    from formula_check.planning import plan_check
    from formula_check.worker import isolation, protocol
    from formula_check.worker.execution import begin, prepare_check_process, run_check

    root = HERE.parent / "tests" / "snippets"
    scratch = tempfile.mkdtemp(prefix="isolation-bench-")
    session, hello = begin(root, scratch)
    print(
        f"warm worker: TensorFlow {hello['tf_version']}, {hello['threads']} thread(s), "
        f"warmed up: {hello['warmed_up']}; load average {os.getloadavg()[0]:.2f}"
    )
    plans = {
        name: plan_check(spec, str(root), with_timing=False) for name, spec in blocks().items()
    }
    shared: dict[str, list[float]] = {name: [] for name in plans}
    forked: dict[str, list[float]] = {name: [] for name in plans}

    def in_shared(plan: object) -> dict:
        reply, _ = run_check(session, dict(plan.header), dict(plan.arrays))
        return reply

    checks = isolation.CheckProcesses(
        lambda h, a: run_check(session, h, a),
        lambda: prepare_check_process(session, hello),
        conversation=[],
        scratch=scratch,
    )
    checks.tidy()  # the first check's process, forked and made ready
    latency: list[float] = []
    clock = [time.perf_counter()]  # when the check now timed was asked for

    def in_own_process(plan: object) -> dict:
        message = checks.run(dict(plan.header), dict(plan.arrays), time_limit=120)
        latency.append(time.perf_counter() - clock[0])
        answer = protocol.decode(message)[0]
        checks.tidy()  # as the worker does once the answer is sent: not in the check's time
        return answer

    def cpu() -> float:
        times = os.times()
        return times.user + times.system + times.children_user + times.children_system

    for name, plan in plans.items():  # one untimed round each way: a correctness check too
        for way in (in_shared, in_own_process):
            reply = way(plan)
            assert reply.get("ok"), (name, way.__name__, reply)
    cpu_used: dict[tuple[str, str], list[float]] = {}
    latency.clear()
    own_latency: dict[str, list[float]] = {name: [] for name in plans}
    for _ in range(args.repeats):
        for name, plan in plans.items():
            for way, times in ((in_shared, shared), (in_own_process, forked)):
                time.sleep(
                    0.05
                )  # the last check's process has time to get ready, as between checks
                spent = cpu()
                clock[0] = time.perf_counter()
                way(plan)
                times[name].append(time.perf_counter() - clock[0])
                cpu_used.setdefault((name, way.__name__), []).append(cpu() - spent)
            own_latency[name].append(latency.pop())

    print(f"\nmedians over {args.repeats} checks each, interleaved:\n")
    print("| block | shared process | own process: latency | turnaround | CPU shared | CPU own |")
    print("|---|---|---|---|---|---|")
    costs = []
    for name in plans:
        one = statistics.median(shared[name])
        lat, turn = statistics.median(own_latency[name]), statistics.median(forked[name])
        cpu_one = statistics.median(cpu_used[(name, "in_shared")])
        cpu_own = statistics.median(cpu_used[(name, "in_own_process")])
        costs.append(lat - one)
        print(
            f"| {name} | {one * 1e3:.1f} ms | {lat * 1e3:.1f} ms ({(lat - one) * 1e3:+.1f}) "
            f"| {turn * 1e3:.1f} ms ({(turn - one) * 1e3:+.1f}) | {cpu_one * 1e3:.0f} ms "
            f"| {cpu_own * 1e3:.0f} ms |"
        )
    print(f"\nlargest added latency: {max(costs) * 1e3:.1f} ms a check (target <= 25 ms)")
    checks.close()


if __name__ == "__main__":
    main()
