"""A TFLite model's graph as :mod:`.quantized_error` walks it: the interpreter's ops and
tensors, and each op's builtin options read from the file itself.

The interpreter lists its ops only through a private method (``_get_ops_details``), and an
op's options (a fused activation, a softmax's ``beta``, a matrix product's transposes) only
in the flatbuffer, read with TensorFlow's generated schema module. Both are checked before
use: where either is missing, :class:`UnmodelledOpError` says so and the model is refused.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from formula_check.execution.quantized_ops import OpInfo, TensorInfo, UnmodelledOpError


def tensors(interpreter: Any) -> dict[int, TensorInfo]:
    """Every tensor of the interpreter's main graph, with its quantization."""
    found = {}
    for detail in interpreter.get_tensor_details():
        parameters = detail.get("quantization_parameters") or {}
        found[int(detail["index"])] = TensorInfo(
            index=int(detail["index"]),
            name=str(detail["name"]),
            dtype=np.dtype(detail["dtype"]),
            scales=np.asarray(parameters.get("scales", ()), dtype=np.float64),
            zero_points=np.asarray(parameters.get("zero_points", ()), dtype=np.float64),
            axis=int(parameters.get("quantized_dimension", 0)),
        )
    return found


def ops(interpreter: Any, path: Path) -> list[OpInfo]:
    """The ops in the order the interpreter runs them, with their options."""
    listing = getattr(interpreter, "_get_ops_details", None)
    if not callable(listing):
        raise UnmodelledOpError(
            "this TensorFlow's TFLite interpreter does not list its ops (_get_ops_details), "
            "so a quantized model's error cannot be bounded"
        )
    details = sorted(listing(), key=lambda d: int(d["index"]))
    options = _options(path)
    if len(options) != len(details):
        raise UnmodelledOpError(
            f"the TFLite file has {len(options)} ops in its main graph and the interpreter "
            f"runs {len(details)}: a model of several graphs (control flow) is not bounded"
        )
    return [
        OpInfo(
            index=int(d["index"]),
            name=str(d["op_name"]),
            inputs=tuple(int(i) for i in d["inputs"]),
            outputs=tuple(int(i) for i in d["outputs"]),
            options=options[int(d["index"])],
        )
        for d in details
    ]


def _options(path: Path) -> list[Mapping[str, Any]]:
    """Each op's builtin options in the main graph, as plain values."""
    try:
        schema = importlib.import_module("tensorflow.lite.python.schema_py_generated")
        model = schema.ModelT.InitFromPackedBuf(path.read_bytes(), 0)
    except (ImportError, AttributeError) as exc:
        raise UnmodelledOpError(
            f"TensorFlow's TFLite schema module cannot read the file's op options ({exc}), "
            "so a quantized model's error cannot be bounded"
        ) from None
    if len(model.subgraphs or ()) != 1:
        raise UnmodelledOpError(
            f"the TFLite file holds {len(model.subgraphs or ())} graphs: a model with control "
            "flow is not bounded"
        )
    return [
        {k: v for k, v in vars(op.builtinOptions).items() if not k.startswith("_")}
        if op.builtinOptions is not None
        else {}
        for op in model.subgraphs[0].operators or ()
    ]
