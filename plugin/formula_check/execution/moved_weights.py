"""A layer called again on moved weights: every weight it holds (variables, tensors, arrays)
moved to values of the check's seed, the entry traced under ``tf.function`` on the way
(:mod:`.graph_mode`), and a weight held as a value that a graph of the code's own kept as it
was put back and said to be unmoved. Called by :mod:`.one_check`, whose call of a layer on
moved weights is the one judged."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import tensorflow as tf

from formula_check.execution import graph_mode, layer_weights
from formula_check.execution.entry_call import Runner
from formula_check.execution.graph_mode import Traced
from formula_check.execution.snippet_failure import phase
from formula_check.execution.timing_runs import outputs
from formula_check.messages import CheckRequest
from formula_check.model import Array

Lap = Callable[[str], None]
"""What closes a phase of the check's time, by name (:class:`.one_check._Laps`)."""


def moved_call(
    runner: Runner, request: CheckRequest, found: list[tuple[str, Any, bool]], lap: Lap
) -> tuple[Traced | None, Any, list[tuple[str, str]]]:
    """Move the weights, tracing the entry on the way (:func:`_traced_between`), and call
    again. A weight kept as a value (an array, a constant) that a ``tf.function`` of the
    code's own traced before the move keeps is put back, and said to be unmoved: the oracle
    must take the value the code computed with. The trace then holds a value the check no
    longer uses: None, to trace again after the move."""
    held = [(n, h, h.numpy()) for n, h, _ in found if layer_weights.held_as_value(h)]
    holders = [holder for _, holder, _ in found]
    moves = list(zip(holders, layer_weights.moved_values(holders, request.seed), strict=True))
    traced: Traced | None = _traced_between(runner, moves, lap)
    with phase("call"):
        result = runner()
    folded = []
    for name, holder, stored in held:
        if _kept_by_a_graph(runner, holder, stored, result):
            holder.assign(stored)
            path = request.weights.get(name, name)
            folded.append((name, f"{path}: a tf.function traced before it moved keeps its value"))
    return (None if folded else traced), result, folded


def _traced_between(runner: Runner, moves: list[tuple[Any, Array]], lap: Lap) -> Traced:
    """Move the weights a graph holds as traced (a tensor, an array: ``moves`` pairs each
    weight with its moved value), then trace the entry, then move the variables, which the
    graph reads when it runs. So the graph is traced on the weights it is judged on, except
    the variables: a value the code reads from one at trace time stays behind, as it would
    after training."""
    later = [(weight, value) for weight, value in moves if graph_mode.read_when_run(weight)]
    for weight, value in moves:
        if not graph_mode.read_when_run(weight):
            weight.assign(value)
    traced = graph_mode.trace(runner)
    lap("tracing under tf.function")
    for weight, value in later:
        weight.assign(value)
    return traced


def _kept_by_a_graph(runner: Runner, holder: Any, stored: Array, result: Any) -> bool:
    """Whether a graph keeps the weight's stored value: putting it back changes nothing the
    code returns, and with every ``tf.function`` run eagerly, moving it does. (Where it
    changes nothing even then, the code does not use it: it stays moved, and the comparison
    says so.)"""
    moved = holder.numpy()
    eagerly = tf.config.functions_run_eagerly()
    holder.assign(stored)
    try:
        with phase("call"):
            if not _same(runner(), result):
                return False
            tf.config.run_functions_eagerly(True)
            eager_stored = runner()
            holder.assign(moved)
            return not _same(runner(), eager_stored)
    finally:
        tf.config.run_functions_eagerly(eagerly)
        holder.assign(moved)


def _same(first: Any, second: Any) -> bool:
    """Whether two calls returned the same values, bit for bit."""
    one, _ = outputs(first)
    other, _ = outputs(second)
    return len(one) == len(other) and all(
        a.shape == b.shape and np.array_equal(a, b, equal_nan=True)
        for a, b in zip(one, other, strict=True)
    )
