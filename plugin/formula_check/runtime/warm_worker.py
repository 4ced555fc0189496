"""The warm worker made ready (:func:`begin`, its warm-up :func:`warm_up`) and each check's
process (:func:`prepare_check_process`), then each check answered with
:func:`..execution.one_check.check`. Imported only by the worker processes (the zygote and
each worker), which it makes import TensorFlow."""

from __future__ import annotations

import contextlib
import dataclasses
import os
import platform
import tempfile
from pathlib import Path

import tensorflow as tf

from formula_check.execution import warming
from formula_check.execution.one_check import check
from formula_check.execution.snippet_failure import SnippetRaised
from formula_check.execution.snippet_module import WorkerState, mark_modules
from formula_check.messages import Hello
from formula_check.paths import SCRATCH_PREFIX
from formula_check.runtime import isolation, reaping

__all__ = [
    "SnippetRaised",
    "WorkerState",
    "begin",
    "check",
    "describe_environment",
    "prepare_check_process",
    "warm_up",
]


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
    mark_modules(session)
    isolation.ready_to_fork()
    return session, dataclasses.replace(hello, warmed_up=warmed_up, scratch=scratch)


def warm_up(session: WorkerState) -> bool:
    """Pay a fresh process's one-time costs before the first check, not inside it: a few
    small checks of our own (:mod:`..execution.warming`), through the path every check takes
    (TensorFlow's eager runtime, Keras' layers, AutoGraph, tracing). Every check's process is
    forked after it, so none pays them again. Nothing of it is kept: its modules are unloaded as any
    snippet's are, Keras' global state is put back as it was, and each check seeds every
    generator afresh. (A snippet's own AutoGraph conversion, 50 to 100 ms the first time its
    code is traced, stays in its own first call.)"""
    return warming.warm_up(session)


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
    eager context of its own. Nothing more: what the warm-up made warm outside TensorFlow's
    context is inherited, and a small check of ours run here again (as was done) cost every
    check 20 to 30 ms of CPU for kernels many checks never use. The same for every check: its
    state is the warm worker's, and a new eager context."""
    del session, hello  # every check's process is made ready the same way
    isolation.fresh_runtime()
