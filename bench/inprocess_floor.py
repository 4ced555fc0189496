"""The floor: one process imports TensorFlow and runs the same snippets and oracles directly.

No isolation, no protocol, no cache: what a hand-written script would do. Used by
``engine_vs_inprocess.py``; prints nothing but a final line with the count checked.
"""

from __future__ import annotations

import os
import sys

os.environ["TF_ENABLE_ONEDNN_OPTS"] = "0"
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np
import tensorflow as tf

from formula_check.planning.plan import plan_check
from workload import blocks


def run_block(spec) -> bool:
    plan = plan_check(spec, ".", with_timing=False)
    namespace: dict = {"__name__": "snippet"}
    exec(compile(spec.snippet.source, "<snippet>", "exec"), namespace)
    defined = [v for v in namespace.values() if getattr(v, "__module__", None) == "snippet"]
    entry = namespace[spec.snippet.entry] if spec.snippet.entry else defined[-1]
    request, arrays = plan.request, plan.arrays
    is_layer = isinstance(entry, type) or bool(request.init) or request.kind in {"layer", "factory"}
    call = request.calls.layer if is_layer else request.calls.function
    args = [tf.constant(arrays[a.array]) if a.array else a.value for a in call.args]
    kwargs = {
        k: tf.constant(arrays[a.array]) if a.array else a.value for k, a in call.kwargs.items()
    }
    target = entry(**request.init) if is_layer else entry
    out = target(*args, **kwargs)
    first = out[0] if isinstance(out, (tuple, list)) else out
    arrays64 = {**plan.inputs, **plan.weights}
    if plan.keep is not None:
        arrays64["mask"] = plan.keep
    expected = plan.oracle.compute(arrays64, plan.params)
    return np.asarray(first).size > 0 and bool(expected)


if __name__ == "__main__":
    done = sum(run_block(spec) for spec in blocks())
    print(f"checked {done}", file=sys.stderr)
