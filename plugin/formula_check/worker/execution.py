"""Inside the worker: load a snippet, call its entry, read weights back, time it.

Requests are concrete: the parent has already generated every array and decided every
argument, so nothing here knows about oracles. Imported only by the worker processes (the
zygote and each worker), which it makes import TensorFlow. This module makes the warm worker
ready (:func:`begin`) and each check's process (:func:`prepare_check_process`); a check
itself is :func:`.one_check.check`, whose parts are :mod:`.snippet_module` (the snippet's
module loaded, the project's forgotten after), :mod:`.entry_call` (the entry built and
bound to its arguments), :mod:`.layer_weights`, :mod:`.timing_runs`, :mod:`.project_reads`
(what the check read and wrote) and :mod:`.snippet_failure` (what it raised).
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import platform
import tempfile
from pathlib import Path

import tensorflow as tf

from ..messages import CheckReply, Hello
from ..model import CheckSpec, Location, TimingSpec
from ..planning import plan_check
from ..snippets import inline_snippet
from . import isolation, reaping
from .one_check import check
from .paths import SCRATCH_PREFIX
from .snippet_failure import SnippetRaised
from .snippet_module import WorkerState

__all__ = [
    "SnippetRaised",
    "WorkerState",
    "begin",
    "check",
    "describe_environment",
    "prepare_check_process",
    "warm_up",
]

_WARM_UP_SNIPPET = """
import tensorflow as tf

def attention(q, k, v, mask=None):
    scores = tf.matmul(q, k, transpose_b=True) / tf.sqrt(tf.cast(tf.shape(k)[-1], q.dtype))
    if mask is not None:
        scores += (1.0 - tf.cast(mask, scores.dtype)) * -1e9
    weights = tf.nn.softmax(scores, axis=-1)
    return tf.matmul(weights, v), weights
"""


def begin(root: Path, scratch: str | None = None) -> tuple[WorkerState, Hello]:
    """Everything a fresh worker does before its hello: a private temporary folder, the
    session, the warm-up. Returns the session and the hello.

    TensorFlow deletes the files AutoGraph writes only at exit, which a killed worker never
    reaches, and a snippet may leave files of its own: in a folder of the worker's own,
    ``scratch``, made and named by the pool, the pool removes them all when it stops the
    worker (each check also has a folder of its own inside it, removed after the check).
    Without one (a worker run by hand), the worker makes its own.

    Each check runs in a process forked from this one (:mod:`.isolation`), which starts an
    eager context of its own; both compute on one thread. Where a GPU would be used, or where
    TensorFlow offers no way to start a new context, the warm-up runs no op: a device context
    or thread pools made here would be unusable in every check's process."""
    if scratch is None:
        scratch = tempfile.mkdtemp(prefix=SCRATCH_PREFIX)
    os.environ["TMPDIR"] = scratch  # for what the snippet starts
    tempfile.tempdir = scratch
    session = WorkerState(root)
    gpu = isolation.gpu_present()
    reaping.keep_private()  # no check reaches into the worker
    reaping.become_subreaper()  # what a check's process leaves comes to us, to be ended
    warmed_up = False
    if isolation.can_renew_runtime() and not gpu:
        isolation.prepare_warm_worker()
        warmed_up = warm_up(session)
    hello = describe_environment(gpu=gpu)
    isolation.ready_to_fork()
    return session, dataclasses.replace(hello, warmed_up=warmed_up, scratch=scratch)


def warm_up(session: WorkerState) -> bool:
    """Pay a fresh process's one-time costs before the first check, not inside it: one small
    check of our own, timed eagerly and under ``tf.function``, through the path every check
    takes (TensorFlow's eager runtime and thread pools, AutoGraph, tracing). Every check's
    process is forked after it, so none pays them again. Nothing of it is kept: its module is
    unloaded as any snippet's is, and each check seeds TensorFlow afresh. (A snippet's own
    AutoGraph conversion, 50 to 100 ms the first time its code is traced, stays in its own
    first call.)"""
    try:  # a warm-up never stops a worker from serving
        where = Location("<formula-check warm-up>", 1)
        spec = CheckSpec(
            block_id="warm-up",
            location=where,
            oracle="attention",
            snippet=inline_snippet(_WARM_UP_SNIPPET, where),
            timing=TimingSpec(enabled=True, warmup=1, repeats=3),
        )
        plan = plan_check(spec, str(session.root))
        reply, _ = check(session, plan.request, dict(plan.arrays))
    except Exception:  # said in the hello, and the checks go on
        return False
    return isinstance(reply, CheckReply)


def describe_environment(*, gpu: bool = False) -> Hello:
    """TensorFlow and Keras versions, the device used, and the thread count. With ``gpu``,
    the device is named without starting TensorFlow's runtime here (see :func:`begin`)."""
    device = "GPU (its runtime started by each check)" if gpu else f"CPU: {_cpu_model()}"
    threads = tf.config.threading.get_intra_op_parallelism_threads() or os.cpu_count() or 1
    return Hello(
        ok=True,
        tf_version=tf.__version__,
        keras_version=getattr(tf.keras, "__version__", ""),
        device=device,
        threads=threads,
    )


def _cpu_model() -> str:
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor() or platform.machine()


def prepare_check_process(session: WorkerState, hello: Hello) -> None:
    """In a check's process, forked from the warm worker before its request is known: an
    eager context of its own, then (where the warm worker warmed up) one small check of ours,
    untimed, so that the pages and caches every check touches are this process's before its
    check begins (about 25 ms, while the parent judges the last answer). The same for every
    check: its state is still the warm worker's, plus this."""
    isolation.fresh_runtime()
    if not hello.warmed_up:
        return
    with contextlib.suppress(Exception):  # getting ready never fails a check
        where = Location("<formula-check warm-up>", 1)
        spec = CheckSpec("warm-up", where, "attention", inline_snippet(_WARM_UP_SNIPPET, where))
        plan = plan_check(spec, str(session.root), with_timing=False)
        check(session, plan.request, dict(plan.arrays))
