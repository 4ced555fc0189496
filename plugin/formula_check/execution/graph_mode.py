"""The entry under ``tf.function``: traced once, then called as a graph, so that what it
returns in graph mode is judged as its eager outputs are.

Code can be right eagerly and wrong as a graph: Python runs once, at trace time, so a value
it reads then (a weight read through ``tf.init_scope``, Python state, a branch on
``tf.executing_eagerly()``) stays in the graph whatever happens after. A layer is traced
(:func:`trace`) after its first call built it, once the weights a graph holds as traced have
moved and before its variables (:func:`read_when_run`) do, so a variable read at trace time
shows as the old value; the graph is called once more after the check's eager call
(:func:`graph_result`), on the same arguments, then on each input regime's the eager code
ran on (weights scaled as for the eager call), so code whose graph differs only on large
values or other sizes is judged there too. A function is traced on moved weights, after an
eager call on them, and its graph is called on the check's own, so a weight it kept from an
earlier call shows as stale. The timing runs reuse this trace (:mod:`.timing_runs`), so
graph mode costs one call of the graph on the check's arguments and one per regime (a regime
of other sizes also the trace ``tf.function`` makes itself for a new input signature).

States: :class:`Traced` holds a traced runner and the seconds its trace took, or why the
code did not trace. Called by :mod:`.one_check` and :mod:`.timing_runs`.
"""

from __future__ import annotations

import contextlib
import io
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import tensorflow as tf

from formula_check.execution.entry_call import Runner
from formula_check.execution.snippet_failure import SnippetRaised, clean, said


@dataclass(frozen=True)
class Traced:
    """The entry traced under ``tf.function`` (``runner``, its first call ``seconds`` long,
    the trace included), or ``error``: why it did not trace."""

    runner: Runner | None
    seconds: float = 0.0
    error: str = ""


def trace(runner: Runner) -> Traced:
    """``runner``'s entry traced, by one call of it as a graph. What it prints there is
    dropped: it prints its symbolic tensors, and the check already shows what it printed."""
    compiled = Runner(tf.function(runner.target), runner.args, runner.kwargs, runner.layer)
    start = time.perf_counter()
    try:
        with contextlib.redirect_stdout(io.StringIO()), unfolded():
            sync(compiled())
    except Exception as exc:  # eager-only code (it reads .numpy()) is still judged eagerly
        return Traced(None, error=briefly(exc))
    return Traced(compiled, time.perf_counter() - start)


def read_when_run(weight: Any) -> bool:
    """Whether a graph reads ``weight`` each time it runs (a variable). A tensor or an array
    is captured by value when the code is traced: one the checker puts in its place later is
    a value no graph of the code would ever see, so such weights are moved before tracing."""
    variable = getattr(tf.keras, "Variable", tf.Variable)
    return isinstance(weight, (tf.Variable, variable))


def graph_result(traced: Traced) -> tuple[Any, str]:
    """What the traced graph returns, called again, or why it did not run: ``(None, why)``."""
    if traced.runner is None:
        return None, traced.error
    try:
        with contextlib.redirect_stdout(io.StringIO()), unfolded():
            return traced.runner(), ""
    except Exception as exc:
        return None, briefly(exc)


@contextlib.contextmanager
def unfolded() -> Iterator[None]:
    """The graph's calls meanwhile run without Grappler's constant folding, which computes a
    subgraph of constants (positions made from a size) once, rounding in its own way: at
    position 2130 of a correct positional encoding an angle came out one float32 step off,
    beyond the tolerance derived from the kernels' rounding. Folding changes no value but by
    rounding, so the graph is judged on its ops as traced; the timing runs call it as
    TensorFlow would, folded."""
    before = tf.config.optimizer.get_experimental_options().get("constant_folding", True)
    tf.config.optimizer.set_experimental_options({"constant_folding": False})
    try:
        yield
    finally:
        tf.config.optimizer.set_experimental_options({"constant_folding": before})


def sync(result: Any) -> None:
    """Force the computation to finish (pull results to host), so the clock is honest."""
    for item in as_sequence(result):
        if hasattr(item, "numpy"):
            item.numpy()


def as_sequence(result: Any) -> list[Any]:
    """A returned tuple, list or dict's values; anything else as the only value."""
    if isinstance(result, (tuple, list)):
        return list(result)
    if isinstance(result, dict):
        return list(result.values())
    return [result]


def briefly(error: BaseException) -> str:
    """``AttributeError: 'SymbolicTensor' object has no attribute 'numpy'``: short enough
    for a note. TensorFlow says where in the code, then the error, on its last line."""
    if isinstance(error, SnippetRaised):
        error = error.error
    lines = [line.strip() for line in said(error).splitlines() if line.strip()]
    last = lines[-1] if lines else ""
    kind = type(error).__name__
    return clean(last if last.startswith(f"{kind}:") else f"{kind}: {last}")[:300]
