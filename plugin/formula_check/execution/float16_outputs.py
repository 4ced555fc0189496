"""An artifact that computes in float32 and hands back float16 outputs (a final cast), told
apart from one that computes in float16, and the tolerance its outputs' rounding adds.

Only the graph says which it is, so the graph is read before anything is judged:

- a SavedModel's signature: its own graph and every function of its library. Each node whose
  dtype attributes name float16 must be a ``Cast`` from float32 to float16, an ``Identity``
  (``IdentityN``) passing a value on, or a call of a function of the library (whose nodes are
  read in turn). Any other (a ``Mul``, a float16 ``Const`` or variable, a ``Cast`` back to
  float32, an input placeholder in float16) works in half precision;
- a TFLite file: its tensors' dtypes, op by op. A float16 tensor may be read by
  ``DEQUANTIZE`` alone (weights stored in float16, computed in float32) or made by a
  ``CAST`` from float32 that is a graph output and read by no op; anything else touching
  float16 works in half precision.

Such an artifact is refused, naming the op. One whose float16 is only the final cast gets,
per output element, one float16 rounding: ``|y| * 2**-11 * (1 + 2**-10) + 2**-25``
(:func:`tolerance`), added to float32's by the judge as ``tol/out/I``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np
from tensorflow.core.framework import types_pb2

from formula_check.model import Array

UNIT_ROUNDOFF = 2.0**-11
"""float16's unit roundoff: a value rounded to float16 moves by at most this part of itself
(normal range; 10 bits kept after the leading one)."""

SUBNORMAL_HALF = 2.0**-25
"""Half the spacing of float16's subnormals (2**-24): the most a value near 0 moves."""

RELATIVE_TO_ROUNDED = 1.0 + 2.0**-10
"""``|v - y| <= u |v|`` bounds the rounding by the value before it; by the rounded value ``y``
it is ``u |y| / (1 - u)``, and ``1 / (1 - 2**-11) < 1 + 2**-10``."""

SAID = "+ float16 outputs: one float16 rounding added"
"""What the tolerance of a float16 output says of what was added (shown on the card)."""

_CALLS = {"StatefulPartitionedCall", "PartitionedCall"}
_PASSED_ON = {"Identity", "IdentityN"}


def tolerance(value: Array) -> Array:
    """One float16 rounding of each element of a float16 output ``value``, as float64; 0 where
    the output is not finite (an overflow to inf is no rounding, and must not pass)."""
    rounded = np.abs(np.asarray(value, dtype=np.float64))
    bound: Array = np.where(
        np.isfinite(rounded), rounded * UNIT_ROUNDOFF * RELATIVE_TO_ROUNDED + SUBNORMAL_HALF, 0.0
    )
    return bound


def saved_model_use(graph_def: Any) -> str:
    """Why a signature's graph (``GraphDef``, with its function library) computes in
    float16, or nothing when no node but a final cast and what passes it on touches float16."""
    library = {function.signature.name: function for function in graph_def.library.function}
    places: list[tuple[str, Iterable[Any]]] = [("the signature", graph_def.node)]
    places += [(f"function {name}", function.node_def) for name, function in library.items()]
    for where, nodes in places:
        for node in nodes:
            why = _node_use(node, library)
            if why:
                return f"{why}, in {where}"
    return ""


def _node_use(node: Any, library: Mapping[str, Any]) -> str:
    half = types_pb2.DT_HALF
    why = ""
    if not any(a.type == half or half in a.list.type for a in node.attr.values()):
        pass
    elif node.op == "Cast":
        if node.attr["SrcT"].type != types_pb2.DT_FLOAT or node.attr["DstT"].type != half:
            why = f"Cast {node.name!r} is not one from float32 to float16"
    elif node.op in _CALLS:
        called = node.attr["f"].func.name
        if called not in library:
            why = f"{node.op} {node.name!r} calls {called!r}, which the graph does not hold"
    elif node.op == "Placeholder":
        why = f"its input {node.name!r} is float16"
    elif node.op not in _PASSED_ON:
        why = f"{node.op} {node.name!r} works in float16"
    return why


def tflite_use(
    ops: Sequence[Mapping[str, Any]], dtypes: Mapping[int, Any], outputs: Iterable[int]
) -> tuple[bool, str]:
    """Whether a TFLite graph stores weights in float16 (read by ``DEQUANTIZE`` only), and
    why it computes in float16, or nothing (float16 only in those weights and in outputs made
    by a final ``CAST`` from float32). ``ops`` as the interpreter lists them, ``dtypes`` by
    tensor index."""
    half = {index for index, dtype in dtypes.items() if np.dtype(dtype) == np.float16}
    ends = {int(i) for i in outputs}
    stored = False
    for op in ops:
        read = [int(i) for i in op["inputs"] if int(i) in half]
        made = [int(i) for i in op["outputs"] if int(i) in half]
        if not read and not made:
            continue
        name = str(op["op_name"])
        if name == "DEQUANTIZE" and read and not made:
            stored = True
        elif name == "CAST" and made and not read and all(i in ends for i in made):
            continue
        else:
            return stored, f"{name} (op {int(op['index'])}) works in float16"
    return stored, ""
