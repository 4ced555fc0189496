"""What one process per check costs: the same checks run in a shared warm process (how the
worker answered every check before) and each in a process of its own forked from it (how it
answers now), interleaved in one run, medians over ``--repeats`` rounds.

The shared side is one process that started TensorFlow's runtime (default threads) and warmed
it up once, as the worker did; the other side is this script as a warm worker (as
:func:`formula_check.runtime.warm_worker.begin` leaves it: one thread, warmed up) forking a
process per check that starts an eager context of its own ahead of its check. Same planned
requests, with timing runs (``timing: true``, the default) or without (``--no-timing``).
Target: <= 25 ms a check.

Per block: the time from request to answer each way, between checks spaced as in a build (the
next check's process gets ready meanwhile), and the CPU each way takes, the getting ready
included.

    python bench/isolation_cost.py --repeats 50
"""

from __future__ import annotations

import argparse
import os
import shutil
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


def blocks(*, timing: bool) -> dict[str, object]:
    from implementations import FFN, PE, SDPA
    from support import spec_for

    return {
        "attention (2x5x7)": spec_for("attention", SDPA, timing=timing),
        "ffn (2x5x6, d_ff 9)": spec_for("ffn", FFN, timing=timing),
        "positional encoding (50x512)": spec_for(
            "positional_encoding", PE, timing=timing, dims={"n": 50, "d_model": 512}
        ),
        "Keras MHA (d_model 512, 8 heads, seq 60)": spec_for(
            "multihead",
            KERAS_MHA,
            preset="keras-mha",
            entry="MHA",
            timing=timing,
            dims={"b": 1, "n": 60, "m": 60, "d_model": 512, "h": 8, "depth": 64},
            atol=1e-3,
        ),
    }


def _shared_process(root: Path) -> tuple[int, object, object]:
    """A process that starts TensorFlow's runtime once and runs every check it is sent, as
    the worker did before. Not a child of this script, which sweeps its own children as a
    warm worker does: started (twice forked) before this script becomes one."""
    from formula_check import wire
    from formula_check.messages import CheckRequest
    from formula_check.runtime.warm_worker import WorkerState, check, warm_up

    requests_out, requests_in = os.pipe()
    answers_out, answers_in = os.pipe()
    pid_out, pid_in = os.pipe()
    first = os.fork()
    if first == 0:
        if os.fork():
            os._exit(0)
        os.write(pid_in, str(os.getpid()).encode())
        os.close(requests_in)
        os.close(answers_out)
        session = WorkerState(root)
        warm_up(session)
        with os.fdopen(requests_out, "rb") as requests, os.fdopen(answers_in, "wb") as answers:
            while True:
                try:
                    header, arrays = wire.read_message(requests)
                except EOFError:
                    os._exit(0)
                reply, out = check(session, CheckRequest.decode(header), arrays)
                wire.write_message(answers, reply.encode(), out)
    os.waitpid(first, 0)
    pid = int(os.read(pid_out, 20))
    for fd in (requests_out, answers_in, pid_out, pid_in):
        os.close(fd)
    return pid, os.fdopen(requests_in, "wb"), os.fdopen(answers_out, "rb")


def _cpu_of(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=50)
    parser.add_argument("--no-timing", action="store_true", help="plan the checks untimed")
    args = parser.parse_args()

    from formula_check import wire
    from formula_check.messages import Answer, CheckReply, decode_answer
    from formula_check.planning.plan import Plan, plan_check
    from formula_check.runtime import isolation
    from formula_check.runtime.warm_worker import begin, check, prepare_check_process

    root = HERE.parent / "tests" / "snippets"
    shared_pid, shared_in, shared_out = _shared_process(root)
    scratch = tempfile.mkdtemp(prefix="isolation-bench-")
    session, hello = begin(root, scratch)
    print(
        f"warm worker: TensorFlow {hello.tf_version}, {hello.threads} thread(s); "
        f"load average {os.getloadavg()[0]:.2f}"
    )
    plans = {
        name: plan_check(spec, str(root), with_timing=not args.no_timing)
        for name, spec in blocks(timing=not args.no_timing).items()
    }
    shared: dict[str, list[float]] = {name: [] for name in plans}
    forked: dict[str, list[float]] = {name: [] for name in plans}

    def in_shared(plan: Plan) -> Answer:
        wire.write_message(shared_in, plan.request.encode(), dict(plan.arrays))
        return decode_answer(wire.read_message(shared_out)[0])

    checks = isolation.CheckProcesses(
        lambda request, arrays: check(session, request, arrays),
        lambda: prepare_check_process(session, hello),
        conversation=[],
        scratch=scratch,
    )
    checks.tidy()  # the first check's process, forked and made ready
    clock = [time.perf_counter()]  # when the check now timed was asked for

    def in_own_process(plan: Plan) -> Answer:
        message = checks.run(plan.request, dict(plan.arrays), time_limit=120)
        answer = decode_answer(wire.decode(message)[0])
        checks.tidy()  # as the worker does once the answer is sent
        return answer

    def cpu(way: object) -> float:
        if way is in_shared:
            return _cpu_of(shared_pid)
        times = os.times()
        return times.user + times.system + times.children_user + times.children_system

    for name, plan in plans.items():  # one untimed round each way: a correctness check too
        for way in (in_shared, in_own_process):
            reply = way(plan)
            assert isinstance(reply, CheckReply), (name, way.__name__, reply)
    cpu_used: dict[tuple[str, str], list[float]] = {}
    for _ in range(args.repeats):
        for name, plan in plans.items():
            for way, times in ((in_shared, shared), (in_own_process, forked)):
                time.sleep(0.3)  # as between two checks of a build: the next process gets ready
                spent = cpu(way)
                clock[0] = time.perf_counter()
                way(plan)
                times[name].append(time.perf_counter() - clock[0])
                checks.tidy() if way is in_own_process else None
                cpu_used.setdefault((name, way.__name__), []).append(cpu(way) - spent)

    print(f"\nmedians over {args.repeats} checks each, interleaved, timing {not args.no_timing}:\n")
    print("| block | one shared process | a process each | added | CPU shared | CPU each |")
    print("|---|---|---|---|---|---|")
    costs = []
    for name in plans:
        one, own = statistics.median(shared[name]), statistics.median(forked[name])
        cpu_one = statistics.median(cpu_used[(name, "in_shared")])
        cpu_own = statistics.median(cpu_used[(name, "in_own_process")])
        costs.append(own - one)
        print(
            f"| {name} | {one * 1e3:.1f} ms | {own * 1e3:.1f} ms | {(own - one) * 1e3:+.1f} ms "
            f"| {cpu_one * 1e3:.0f} ms | {cpu_own * 1e3:.0f} ms |"
        )
    print(f"\nlargest added time: {max(costs) * 1e3:.1f} ms a check (target <= 25 ms)")
    checks.close()
    shared_in.close()  # it exits at end of file
    shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
