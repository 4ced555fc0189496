"""What quantization explains of an int8 TFLite model's outputs, element by element.

An int8 model computes a float graph with every activation rounded to a step of its own and
its weights rounded per channel. On the check's own inputs the interpreter keeps every
intermediate tensor (``experimental_preserve_all_tensors``), so :func:`explain` can say,
exactly where it can and by a bound where it cannot, how far its outputs are from that
graph and how far the graph is from the one its float weights define:

1. **Each op's own error, checked.** Every op's float definition (:mod:`.quantized_ops`)
   runs in float64 on the very values the interpreter gave it; its output differs from that
   by rounding: half a step after the kernel's final rounding and as much again for its
   fixed-point rescaling inside (:data:`ROUNDING_STEPS`). A value the definition puts past
   an end of its tensor's range, and off by more than rounding, is *clipped* (saturation: a
   representative dataset that never reached it); any other excess means the op is not what
   its definition says, and the model is refused, naming the op.
2. **The rounding of activations, measured.** The graph is run again in float64 from the
   check's inputs on the model's own (dequantized) weights: ``|interpreter - graph|`` is what
   the activations' roundings (each checked in 1.) made of the outputs, measured per element,
   not bounded. It is explained only where no tensor clipped: after a clip the difference is
   no rounding, and it is not allowed.
3. **The rounding of weights, bounded.** The weights the graph holds are the float weights
   rounded to int8 (at most half a step per channel): to first order they move an output by
   ``sum_w d output / d w * e_w``, the gradients taken in float64 at the graph's values. At
   worst every ``e_w`` takes its sign against the others, ``sum |g_w| * step_w / 2``; that
   grows with the number of weights, while roundings of many weights cancel as independent
   errors do, and at d_model 32 the worst case already let formula drifts pass. So, as the
   rounding model that derives float32's tolerance, the roundings are taken as independent
   and centred, each within its half step: by Hoeffding's inequality the sum exceeds
   ``t = HOEFFDING * sqrt(sum (g_w * step_w)^2)`` with a probability below
   ``2 exp(-2 HOEFFDING^2)`` (2.5e-14 for 4). The smaller of the two is the bound. A weight's
   rounding is at most 1/254 of its channel's largest weight, so the second-order terms are
   of order (1/254)^2 relative, some 250 times below the first-order term for a graph whose
   curvature is of the order of its values; the bound is widened by
   :data:`SECOND_ORDER_MARGIN` to cover them.

   The bound's premise, measured (``tests/test_int8_breaker.py``): a converter's roundings
   of trained weights have a standard deviation of ``step / sqrt(12)``, so they move an
   output by about ``R / sqrt(12)``, ``R = sqrt(sum (g_w * step_w)^2)``, against a bound of
   ``5 R``; the largest of some 500 outputs is about 3.2 of those standard deviations, 0.19
   of the bound, and the block measures 0.17 to 0.19 (d_model 32 and 64, d_ff 64 to 1024,
   per channel and per tensor). Roundings that do not cancel break the premise: with every
   weight of the FFN's second kernel at 0.45 of a step off the grid (the sign alternating by
   channel, so that LayerNorm's mean does not take it away) the weights move the outputs by
   0.34 of the bound at d_ff 64, 0.55 at 256 (d_model 64) and 0.76 at 1024, growing about as
   ``d_ff ** 0.3``: they would reach it near d_ff 2,700 at d_model 32, beyond the widest FFN
   :data:`MOST_JACOBIAN` lets the walk compute there (about 2,300 on 2 x 5 rows), and the
   measured activations' rounding is in the tolerance too (that model used 0.53 of it at
   d_ff 1024). Trained weights' fractions of a step are spread; only weights placed on a grid
   offset from the converter's, channel by channel, round coherently. Covering them takes
   the worst case, which let formula drifts pass at d_model 32: the premise is kept.

The tolerance an output gets is 2. + 3. (the judge adds float32's). A worst-case running
error bound (every activation's rounding taken at its worst, in absolute value) is no
tolerance here: on the fixture Transformer block it is 1 to 3.5 on outputs of unit scale,
where the drifts it must catch (GELU for ReLU, logits not scaled, weights 5 % off) move the
outputs by 0.2 to 0.6; correct rounding moves them by about 0.1.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import tensorflow as tf

from formula_check.execution.quantized_ops import (
    OpInfo,
    TensorInfo,
    UnmodelledOpError,
    apply,
    dequantized,
    step,
    zero_point,
)
from formula_check.model import Array

ROUNDING_STEPS = 1.0
"""How many quantization steps an int8 op's own error may be: half a step for the rounding
of its result, and as much again for the kernel's fixed-point rescaling inside."""

FLOAT_ROUNDING = 2.0**-22
"""An op computed in float32 inside a quantized model (a ``DEQUANTIZE``, a ``NEG`` between
one and a ``QUANTIZE``): a few float32 ulps of the tensor's largest value."""

HOEFFDING = 4.0
"""How many root-sum-squares of the weights' rounding ranges the bound allows: an output
beyond it has a probability below ``2 exp(-2 * 4**2)``, about 2.5e-14 (see the module)."""

SECOND_ORDER_MARGIN = 1.25
"""The first-order bound of the weights' rounding, widened to cover its second-order terms
(some 250 times smaller; see the module's text)."""

MOST_JACOBIAN = 50_000_000
"""The most output-by-weight gradients the weights' bound computes; a larger model is
refused (its outputs times its weights), not bounded loosely."""


@dataclass(frozen=True)
class Explained:
    """What quantization explains of each output tensor (by tensor index)."""

    measured: Mapping[int, Array]
    """The activations' rounding: ``|interpreter - graph|``, but with a clipped value's error
    counted only as far as rounding explains it."""
    weights: Mapping[int, Array]
    """The weights' rounding, bounded (first order, widened)."""
    saturated: tuple[tuple[str, float], ...]
    """Each tensor with clipped values: its name and the share of its elements clipped."""
    largest_steps: float
    """The largest own error of an int8 op, in its steps (at most :data:`ROUNDING_STEPS`)."""


Read = Callable[[int], Array]


def explain(
    ops: Sequence[OpInfo],
    tensors: Mapping[int, TensorInfo],
    read: Read,
    outputs: Sequence[int],
) -> Explained:
    """Check each op's own error, then measure and bound the outputs' (see the module)."""
    made = {i for op in ops for i in op.outputs}
    stored = {
        index: dequantized(read(index), info)
        for index, info in tensors.items()
        if index not in made and info.numeric
    }
    working = [op for op in ops if any(tensors[i].numeric for i in op.outputs)]
    replayed, saturated, largest = _replayed(working, tensors, read, stored)
    graph, weights = _graph(working, tensors, read, stored, outputs)
    measured = {index: np.abs(replayed[index] - graph[index]) for index in outputs}
    return Explained(measured, weights, tuple(saturated), largest)


def _replayed(
    ops: Sequence[OpInfo],
    tensors: Mapping[int, TensorInfo],
    read: Read,
    stored: Mapping[int, Array],
) -> tuple[dict[int, Array], list[tuple[str, float]], float]:
    """Each op's float definition on the values the interpreter gave it, against what it
    made (its own error): the graph replayed from the check's inputs with each op's own
    error added where rounding explains it, and only as much as rounding explains where a
    value clipped (without clips, the interpreter's values themselves); the tensors that
    clipped; the largest own error in steps."""
    saturated: list[tuple[str, float]] = []
    largest = 0.0
    replay: dict[int, Array] = dict(stored)
    for op in ops:
        given = [
            tf.constant(stored[i] if i in stored else dequantized(read(i), tensors[i]))
            if i >= 0 and tensors[i].numeric
            else None
            for i in op.inputs
        ]
        out = tensors[op.outputs[0]]
        value = dequantized(read(out.index), out)
        exact = apply(op, given, read, value.shape).numpy()
        own, clipped, steps = _own_error(op, out, value, exact)
        if clipped:
            saturated.append((out.name, clipped))
        largest = max(largest, steps)
        again = [
            tf.constant(replay[i]) if g is not None else None
            for i, g in zip(op.inputs, given, strict=True)
        ]
        replay[out.index] = apply(op, again, read, value.shape).numpy() + own
    return replay, saturated, largest


def _own_error(
    op: OpInfo, out: TensorInfo, value: Array, exact: Array
) -> tuple[Array, float, float]:
    """The op's own error (signed), clipped to what rounding explains; the share of
    ``out``'s elements clipped; its largest own error in steps inside its range. Raises
    where the op is off by more than rounding inside its range."""
    with np.errstate(invalid="ignore"):
        error = value - exact
    local = np.abs(error)
    steps = 0.0
    if out.quantized:
        size = np.broadcast_to(step(out, value), value.shape)
        limits = np.iinfo(out.dtype)
        zero = zero_point(out, value)
        outside = (exact < (limits.min - zero) * size) | (exact > (limits.max - zero) * size)
        allowed = ROUNDING_STEPS * size
    else:
        largest = float(np.max(np.abs(exact), initial=0.0, where=np.isfinite(exact)))
        outside = np.zeros(value.shape, dtype=bool)
        allowed = (np.abs(exact) + largest) * FLOAT_ROUNDING + np.finfo(out.dtype).tiny
    outside = outside | ~np.isfinite(exact)
    beyond = ~(local <= allowed)  # NaN too
    if np.any(beyond & ~outside):
        worst = float(np.max(np.where(outside, 0.0, local / allowed)))
        raise UnmodelledOpError(
            f"op {op.index}, {op.name} (output {out.name}), differs from its float "
            f"definition by {worst:.3g} times what rounding explains: the interpreter computes "
            "it otherwise than the walk models, so what quantization explains is not derived"
        )
    if out.quantized and np.any(~outside):
        steps = float(np.max(local[~outside] / size[~outside]))
    clipped = beyond & outside
    own: Array = np.clip(np.nan_to_num(error), -allowed, allowed)
    return own, (float(np.mean(clipped)) if clipped.size else 0.0), steps


def _graph(
    ops: Sequence[OpInfo],
    tensors: Mapping[int, TensorInfo],
    read: Read,
    stored: Mapping[int, Array],
    outputs: Sequence[int],
) -> tuple[dict[int, Array], dict[int, Array]]:
    """The graph in float64 from the check's inputs on the model's own weights, and the
    weights' rounding bound of each output."""
    rounded = {i: v for i, v in stored.items() if tensors[i].quantized and v.size}
    watched = {i: tf.constant(v) for i, v in rounded.items()}
    count = sum(v.size for v in rounded.values())
    size = count * sum(read(i).size for i in outputs)
    if size > MOST_JACOBIAN:
        most = MOST_JACOBIAN // max(count, 1)
        raise UnmodelledOpError(
            f"the model has too many weights times outputs ({size:,}) for the bound of its "
            f"weights' rounding (at most {MOST_JACOBIAN:,}): its {count:,} weights are the "
            f"file's, so only fewer output elements help, at most {most:,} here (b and n in "
            "dims=); where even one row is too many, check the float32 model"
        )
    with tf.GradientTape(persistent=True) as tape:
        for constant in watched.values():
            tape.watch(constant)
        values: dict[int, Any] = {i: tf.constant(v) for i, v in stored.items()}
        values.update(watched)
        for op in ops:
            given = [values.get(i) if i >= 0 else None for i in op.inputs]
            shape = np.shape(read(op.outputs[0]))
            values[op.outputs[0]] = apply(op, given, read, shape)
        flat = {i: tf.reshape(values[i], [-1]) for i in outputs}
    graph = {i: values[i].numpy() for i in outputs}
    bounds = {}
    for index in outputs:
        worst = np.zeros(int(flat[index].shape[0]))
        squares = np.zeros_like(worst)
        keys = list(watched)
        gradients = tape.jacobian(flat[index], [watched[k] for k in keys])
        for key, gradient in zip(keys, gradients, strict=True):
            if gradient is None:
                continue
            steps = np.broadcast_to(step(tensors[key], rounded[key]), rounded[key].shape)
            each = gradient.numpy().reshape(worst.size, -1)
            worst += np.abs(each) @ (steps.reshape(-1) / 2)
            squares += np.square(each) @ np.square(steps.reshape(-1))
        total = np.minimum(worst, HOEFFDING * np.sqrt(squares))
        bounds[index] = SECOND_ORDER_MARGIN * total.reshape(graph[index].shape)
    return graph, bounds
