"""How much of its derived tolerance correct code uses, over oracles, sizes and seeds.

The tolerance of a check is ``SPREAD`` rounding scales measured on the oracle's own float32
run (see ``formula_check/oracles/tolerance.py``). This bench runs correct implementations of every
builtin oracle (the test suite's, plus other formulations of the same formula) at the default
sizes and at large ones, over several seeds, and prints for each the largest share of the
tolerance any element used (``used``: under 1 passes) on every input regime. The largest
``used`` times ``SPREAD`` is the measured ratio of correct code's error to the rounding scale, which
``SPREAD`` must exceed with room to spare.

    python bench/tolerance_model.py            # default and large sizes, seeds 0-9 / 0-2
    python bench/tolerance_model.py --quick    # default sizes, seeds 0-2
    python bench/tolerance_model.py --drifts   # the drift matrix at the large sizes
"""

from __future__ import annotations

import argparse
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests"))

from drifts import DRIFTS  # noqa: E402  (the test suite's drift matrix)
from formula_check.checking import judge as evaluate  # noqa: E402
from formula_check.oracles.tolerance import SPREAD  # noqa: E402

evaluate.BOUND_FIRST = False  # every check against its full tolerance: the share it used
from implementations import CORRECT  # noqa: E402  (the test suite's correct code)
from support import run  # noqa: E402

PE_EXP = """
import tensorflow as tf

def positional_encoding(length, depth):
    positions = tf.range(length, dtype=tf.float32)[:, tf.newaxis]
    rates = tf.exp(tf.range(0, depth, 2, dtype=tf.float32) * (-tf.math.log(10000.0) / depth))
    angles = positions * rates
    return tf.reshape(tf.stack([tf.sin(angles), tf.cos(angles)], axis=-1), (length, depth))
"""

SCALED_FIRST = """
import tensorflow as tf

def attention(q, k, v, mask=None):
    q = q * tf.math.rsqrt(tf.cast(tf.shape(q)[-1], q.dtype))
    scores = tf.matmul(q, k, transpose_b=True)
    if mask is not None:
        scores += mask * -1e9
    weights = tf.nn.softmax(scores)
    return tf.matmul(weights, v), weights
"""

MOMENTS_LN = """
import tensorflow as tf

def layer_norm(x, gamma, beta, eps=1e-6):
    mean, variance = tf.nn.moments(x, axes=[-1], keepdims=True)
    return tf.nn.batch_normalization(x, mean, variance, beta, gamma, eps)
"""

LOGSUMEXP_SOFTMAX = """
import tensorflow as tf

def softmax(x):
    return tf.exp(x - tf.reduce_logsumexp(x, axis=-1, keepdims=True))
"""

EXTRA = {
    "softmax-logsumexp": ("softmax", LOGSUMEXP_SOFTMAX, {}),
    "positional_encoding-exp": ("positional_encoding", PE_EXP, {}),
    "attention-scaled-first": ("attention", SCALED_FIRST, {"mask": "causal"}),
    "layer_norm-moments": ("layer_norm", MOMENTS_LN, {}),
}

LARGE = {
    "attention": {"b": 1, "n": 2048, "m": 1536, "d_k": 64, "d_v": 48},
    "multihead": {"b": 1, "n": 256, "m": 192, "d_model": 1024, "h": 8},
    "self_attention": {"b": 1, "n": 512, "d_model": 1024, "d_k": 64, "d_v": 64},
    "positional_encoding": {"n": 2048, "d_model": 1024},
    "ffn": {"b": 1, "n": 64, "d_model": 1024, "d_ff": 4096},
    "softmax": {"b": 1, "n": 256, "m": 2048},
    "layer_norm": {"b": 1, "n": 256, "d_model": 1024},
    "linear": {"b": 1, "n": 256, "d_model": 1024, "d_k": 1024},
    "sublayer": {"b": 1, "n": 64, "d_model": 1024, "d_ff": 4096},
}
"""Sizes at the top of what users write: n up to 2048, d_model 1024, d_ff 4096."""

TUTORIAL = {"multihead": {"b": 1, "n": 60, "m": 60, "d_model": 512, "h": 8}}
"""The TensorFlow tutorial's multi-head attention, where a fixed atol of 1e-5 failed."""


def measure(seeds: range, sizes: str) -> list[tuple[str, str, int, float, str]]:
    """``(case, regime, checks, largest share of the tolerance used, statuses)``."""
    used: dict[tuple[str, str], float] = defaultdict(float)
    statuses: dict[tuple[str, str], list[str]] = defaultdict(list)
    for case, (oracle, source, options) in {**CORRECT, **EXTRA}.items():
        table = {"large": LARGE, "tutorial": TUTORIAL}.get(sizes, {})
        if sizes != "default" and oracle not in table:
            continue
        dims = {**options.get("dims", {}), **table.get(oracle, {})}
        if sizes == "large":
            dims = _large(oracle, options)
        for seed in seeds:
            result = run(oracle, source, **{**options, "dims": dims, "seed": seed, "timing": False})
            for verdict in result.verdicts:
                key = (case, verdict.regime or "standard")
                used[key] = max(used[key], verdict.used)
                statuses[key].append(result.status.value)
            if not result.verdicts:
                statuses[(case, "standard")].append(f"{result.status.value}: {result.detail()}")
    return [
        (
            case,
            regime,
            len(statuses[(case, regime)]),
            used[(case, regime)],
            _count(statuses[(case, regime)]),
        )
        for case, regime in used
    ]


def _large(oracle: str, options: dict[str, Any]) -> dict[str, int]:
    """The large sizes for a case: a causal mask asks for as many keys as queries."""
    dims = {**options.get("dims", {}), **LARGE.get(oracle, {})}
    if (
        options.get("mask") in {"causal", "both"}
        or options.get("params", {}).get("variant") == "self"
    ):
        dims["m"] = dims["n"]
    return dims


def drifts() -> int:
    """Every drift of the test suite's matrix at the large sizes: each must be caught. The
    number missed."""
    missed = 0
    for name, (case, old, new, extra) in sorted(DRIFTS.items()):
        oracle, source, options = CORRECT[case]
        dims = _large(oracle, {**options, **extra})
        result = run(
            oracle,
            source.replace(old, new, 1),
            **{**options, **extra, "dims": dims, "timing": False},
        )
        caught = result.status.value != "verified"
        missed += not caught
        print(f"{'caught' if caught else 'MISSED':7} {name:60} {result.status.value}")
    return missed


def _count(values: list[str]) -> str:
    counts: dict[str, int] = defaultdict(int)
    for value in values:
        counts[value] += 1
    return ", ".join(f"{n} {v}" for v, n in sorted(counts.items()))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="default sizes, seeds 0-2")
    parser.add_argument("--drifts", action="store_true", help="the drift matrix, large sizes")
    args = parser.parse_args()
    if args.drifts:
        missed = drifts()
        print(f"drifts missed at the large sizes: {missed} of {len(DRIFTS)}")
        return
    plans = [("default", range(3 if args.quick else 10))]
    if not args.quick:
        plans += [("tutorial", range(3)), ("large", range(3))]
    worst = 0.0
    print(f"SPREAD = {SPREAD:g}; used = largest |Δ| / tolerance of any element (< 1 passes)")
    print(
        f"{'sizes':9} {'case':40} {'regime':16} {'checks':>6} {'used':>7} {'×scale':>7}  verdicts"
    )
    for sizes, seeds in plans:
        for case, regime, checks, share, verdicts in measure(seeds, sizes):
            worst = max(worst, share)
            print(
                f"{sizes:9} {case:40} {regime:16} {checks:6d} {share:7.3f} "
                f"{share * SPREAD:7.2f}  {verdicts}"
            )
    print(f"largest share used by correct code: {worst:.3f} ({worst * SPREAD:.1f} rounding scales)")


if __name__ == "__main__":
    main()
