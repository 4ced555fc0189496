"""The float definition of each TFLite op a quantized model's graph is walked with: what
the op computes on real values, in float64 (:func:`apply`), and the tensors' quantization.
An op without a definition here is refused, named (:class:`UnmodelledOpError`)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import tensorflow as tf

from formula_check.model import Array


class UnmodelledOpError(Exception):
    """What quantization explains cannot be derived for this model: an op without a float
    definition, one off by more than rounding, or a graph the walk cannot read."""


@dataclass(frozen=True)
class TensorInfo:
    """One tensor of the graph: its dtype and quantization (no scales: not quantized)."""

    index: int
    name: str
    dtype: Any
    scales: Array
    zero_points: Array
    axis: int = 0

    @property
    def quantized(self) -> bool:
        return bool(self.scales.size) and bool(np.all(self.scales > 0))

    @property
    def numeric(self) -> bool:
        """A value the formula computes with (not a shape or an index)."""
        return self.quantized or bool(np.issubdtype(self.dtype, np.floating))


@dataclass(frozen=True)
class OpInfo:
    """One op, in the order the interpreter runs it: its builtin name, tensors (-1: an
    optional input left out) and builtin options."""

    index: int
    name: str
    inputs: tuple[int, ...]
    outputs: tuple[int, ...]
    options: Mapping[str, Any] = field(default_factory=dict)


def step(info: TensorInfo, like: Array) -> Array:
    """A quantized tensor's step, shaped to broadcast against ``like`` (per channel along its
    quantized axis)."""
    return _per_axis(info.scales, like, info.axis)


def zero_point(info: TensorInfo, like: Array) -> Array:
    """A quantized tensor's zero point, shaped as its step."""
    return _per_axis(info.zero_points, like, info.axis)


def dequantized(raw: Array, info: TensorInfo) -> Array:
    """A tensor's real values, in float64."""
    value = np.asarray(raw, dtype=np.float64)
    if not info.quantized:
        return value
    result: Array = (value - zero_point(info, value)) * step(info, value)
    return result


def _per_axis(values: Array, like: Array, axis: int) -> Array:
    values = np.asarray(values, dtype=np.float64)
    if values.size <= 1 or np.ndim(like) == 0:
        return values.reshape(()) if values.size else np.zeros(())
    shape = [1] * np.ndim(like)
    shape[axis] = values.size
    return values.reshape(shape)


Given = list[Any]
"""An op's inputs as float64 tensors (None for an optional one left out, and for a shape or
an axis, which the rule reads itself)."""
Read = Callable[[int], Array]


def apply(op: OpInfo, given: Given, read: Read, shape: Sequence[int]) -> Any:
    """What ``op`` computes on ``given``, shaped as its output, its fused activation applied."""
    rule = _RULES.get(op.name)
    if rule is None:
        raise UnmodelledOpError(
            f"op {op.index}, {op.name}, has no float definition in the walk (it has "
            f"{', '.join(sorted(_RULES))}), so what quantization explains is not derived"
        )
    if any(g is None for g in given[: _REQUIRED.get(op.name, 1)]):
        raise UnmodelledOpError(
            f"op {op.index}, {op.name}, reads a tensor the walk has no value for"
        )
    result = tf.reshape(rule(op, given, read), list(shape))
    kind = int(op.options.get("fusedActivationFunction", 0) or 0)
    if kind not in _ACTIVATIONS:
        raise UnmodelledOpError(f"op {op.index}, {op.name}, fuses activation {kind}, not defined")
    return _ACTIVATIONS[kind](result)


def _axes(read: Read, index: int) -> list[int]:
    return [int(a) for a in np.asarray(read(index)).ravel()]


def _fully_connected(op: OpInfo, given: Given, read: Read) -> Any:
    x, w = given[0], given[1]
    result = tf.reshape(x, [-1, w.shape[-1]]) @ tf.transpose(w)
    bias = given[2] if len(given) > 2 else None
    return result if bias is None else result + bias


def _gelu(op: OpInfo, given: Given, read: Read) -> Any:
    return tf.nn.gelu(given[0], approximate=bool(op.options.get("approximate", False)))


def _reduced(reduce: Callable[..., Any]) -> Callable[[OpInfo, Given, Read], Any]:
    def rule(op: OpInfo, given: Given, read: Read) -> Any:
        keep = bool(op.options.get("keepDims", False))
        return reduce(given[0], axis=_axes(read, op.inputs[1]), keepdims=keep)

    return rule


_RULES: dict[str, Callable[[OpInfo, Given, Read], Any]] = {
    "QUANTIZE": lambda op, g, read: g[0],
    "DEQUANTIZE": lambda op, g, read: g[0],
    "RESHAPE": lambda op, g, read: g[0],
    "SQUEEZE": lambda op, g, read: g[0],
    "EXPAND_DIMS": lambda op, g, read: g[0],
    "TRANSPOSE": lambda op, g, read: tf.transpose(g[0], _axes(read, op.inputs[1])),
    "CONCATENATION": lambda op, g, read: tf.concat(
        [v for v in g if v is not None], axis=int(op.options.get("axis", 0))
    ),
    "NEG": lambda op, g, read: -g[0],
    "ADD": lambda op, g, read: g[0] + g[1],
    "SUB": lambda op, g, read: g[0] - g[1],
    "MUL": lambda op, g, read: g[0] * g[1],
    "SQUARED_DIFFERENCE": lambda op, g, read: tf.square(g[0] - g[1]),
    "MEAN": _reduced(tf.reduce_mean),
    "SUM": _reduced(tf.reduce_sum),
    "FULLY_CONNECTED": _fully_connected,
    "BATCH_MATMUL": lambda op, g, read: tf.linalg.matmul(
        g[0], g[1], adjoint_a=bool(op.options.get("adjX")), adjoint_b=bool(op.options.get("adjY"))
    ),
    "SOFTMAX": lambda op, g, read: tf.nn.softmax(float(op.options.get("beta", 1.0)) * g[0]),
    "RSQRT": lambda op, g, read: tf.math.rsqrt(g[0]),
    "SQRT": lambda op, g, read: tf.sqrt(g[0]),
    "TANH": lambda op, g, read: tf.tanh(g[0]),
    "LOGISTIC": lambda op, g, read: tf.sigmoid(g[0]),
    "RELU": lambda op, g, read: tf.nn.relu(g[0]),
    "RELU6": lambda op, g, read: tf.nn.relu6(g[0]),
    "GELU": _gelu,
}

_REQUIRED = {
    "ADD": 2,
    "SUB": 2,
    "MUL": 2,
    "SQUARED_DIFFERENCE": 2,
    "FULLY_CONNECTED": 2,
    "BATCH_MATMUL": 2,
}
"""How many leading inputs an op cannot do without (a fully connected op's bias may be
left out)."""

_ACTIVATIONS: dict[int, Callable[[Any], Any]] = {
    0: lambda v: v,
    1: tf.nn.relu,
    2: lambda v: tf.clip_by_value(v, -1.0, 1.0),
    3: tf.nn.relu6,
    4: tf.tanh,
}
"""TFLite's fused activations (``ActivationFunctionType``) with a definition here."""
