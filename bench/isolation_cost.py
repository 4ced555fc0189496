"""What one process per check costs: the same checks run in a shared warm process (how the
worker answered every check before) and each in a process of its own forked from it (how it
answers now), interleaved in one run, medians over ``--repeats`` rounds.

Both sides run in one warm worker of this script's own (TensorFlow imported, one thread, the
warm-up done, as :func:`formula_check.worker.execution.begin` leaves it), on the same planned
requests, without timing runs (``timing: false``), so the difference is the isolation alone:
the fork, the check's new eager context, the copy-on-write of the pages it touches, the exit
and the reaping. Target: <= 25 ms a check.

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

def make_layer(d_model, num_heads):
    return tf.keras.layers.MultiHeadAttention(num_heads=num_heads, key_dim=d_model // num_heads)
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
            kind="factory",
            dims={"b": 1, "n": 60, "m": 60, "d_model": 512, "h": 8, "depth": 64},
            init={"d_model": "d_model", "num_heads": "h"},
            atol=1e-3,
        ),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=50)
    args = parser.parse_args()

    from formula_check.planning import plan_check
    from formula_check.worker import isolation, protocol
    from formula_check.worker.execution import begin, run_check, run_forked_check

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

    def in_own_process(plan: object) -> dict:
        message = isolation.run_isolated(
            lambda h, a: run_forked_check(session, h, a),
            dict(plan.header),
            dict(plan.arrays),
            conversation=[],
            scratch=scratch,
            time_limit=120,
        )
        return protocol.decode(message)[0]

    for name, plan in plans.items():  # one untimed round each way: a correctness check too
        for way in (in_shared, in_own_process):
            reply = way(plan)
            assert reply.get("ok"), (name, way.__name__, reply)
    for _ in range(args.repeats):
        for name, plan in plans.items():
            for way, times in ((in_shared, shared), (in_own_process, forked)):
                start = time.perf_counter()
                way(plan)
                times[name].append(time.perf_counter() - start)

    print(f"\nmedians over {args.repeats} checks each, interleaved:\n")
    print("| block | shared warm process | a process of its own | cost of isolation |")
    print("|---|---|---|---|")
    costs = []
    for name in plans:
        one, own = statistics.median(shared[name]), statistics.median(forked[name])
        costs.append(own - one)
        print(f"| {name} | {one * 1e3:.1f} ms | {own * 1e3:.1f} ms | {(own - one) * 1e3:+.1f} ms |")
    print(f"\nlargest cost of isolation: {max(costs) * 1e3:.1f} ms a check (target <= 25 ms)")


if __name__ == "__main__":
    main()
