"""A ``.tflite`` file run by TensorFlow's own interpreter, as :class:`..runtime.Loaded`.

The dtype it computes in is read from its tensors: int8 where ops make quantized int8
tensors (then every tensor is kept, for :mod:`.quantized_error` to explain its outputs),
float32 on weights stored in float16 where only ``DEQUANTIZE`` reads float16, float32 with
float16 outputs where the only other float16 is made by a final ``CAST``
(:mod:`.float16_outputs`), and float16 wherever an op works in it.
"""

from __future__ import annotations

import contextlib
import warnings
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import tensorflow as tf

from formula_check.execution import float16_outputs, quantized_error, quantized_graph
from formula_check.execution.artifact_calls import (
    ArtifactError,
    Loaded,
    array,
    bare,
    clipped_share,
    dequantized,
    named,
    quantized,
)
from formula_check.execution.artifact_weights import public_names
from formula_check.execution.quantized_ops import UnmodelledOpError
from formula_check.execution.snippet_failure import phase
from formula_check.messages import FLOAT16_WEIGHTS, Call
from formula_check.model import Array


def interpreter(path: Path, *, builtin: bool = False) -> Any:
    """TFLite's interpreter keeping every tensor; ``builtin``: with its builtin kernels only
    (no XNNPACK delegate, which computes inside itself tensors it never writes back)."""
    kind = tf.lite.experimental.OpResolverType
    with warnings.catch_warnings():  # tf.lite.Interpreter warns of its coming successor
        warnings.simplefilter("ignore")
        return tf.lite.Interpreter(
            model_path=str(path),
            experimental_preserve_all_tensors=True,
            experimental_op_resolver_type=(
                kind.BUILTIN_WITHOUT_DEFAULT_DELEGATES if builtin else kind.AUTO
            ),
        )


class TFLite(Loaded):
    """A TFLite file's signature (or, converted from a bare function, its inputs by name)."""

    def __init__(self, path: Path, signature: str) -> None:
        self.path = path
        self.interpreter = interpreter(path)
        if self._activations():  # int8: every tensor is read, as the builtin kernels keep it
            self.interpreter = interpreter(path, builtin=True)
        signatures = self.interpreter.get_signature_list()
        self.runner = None
        if signatures:
            if signature not in signatures:
                raise ArtifactError(
                    f"the TFLite file has no signature {signature!r}; it has "
                    f"{', '.join(sorted(signatures))}"
                )
            self.runner = self.interpreter.get_signature_runner(signature)
            self.details = self.runner.get_input_details()
            self.inputs = list(signatures[signature]["inputs"])
        else:  # a conversion of a bare function: its inputs by name, else by place
            self.details = {bare(d["name"]): d for d in self.interpreter.get_input_details()}
            self.inputs = list(self.details)
        self.what = "the TFLite file" + (f"'s signature {signature!r}" if signatures else "")
        if self._activations():
            self.dtype = "int8"
            return
        if self._integer_weights():
            raise ArtifactError(
                f"{self.what} stores integer (quantized) weights and computes in float "
                "(dynamic-range quantization): the rounding inside its kernels is not judged "
                "yet; check the float32 conversion, or a full-integer int8 one"
            )
        stored, self.float16_use = self._float16()
        if self.float16_use:
            self.dtype = "float16"
        else:
            # TFLite's float16 conversion stores the weights in float16 and, on a CPU, turns
            # them back to float32 to compute: float32 arithmetic on float16-rounded weights
            self.dtype = FLOAT16_WEIGHTS if stored else "float32"
            ends = self.interpreter.get_output_details()
            self.float16_outputs = any(d["dtype"] == np.float16 for d in ends)

    def _integer_weights(self) -> bool:
        """Whether it keeps weights as quantized integers while no op makes an int8 tensor
        (dynamic-range quantization: judged as float32, its rounding would fail correct code
        and its label would say float32)."""
        return any(
            np.dtype(d["dtype"]) in (np.int8, np.uint8, np.int16)
            for d in self.interpreter.get_tensor_details()
        )

    def _float16(self) -> tuple[bool, str]:
        """Whether its weights are stored in float16, and why it computes in float16 (or
        nothing). Where the interpreter cannot list its ops, any float16 tensor is taken for
        arithmetic in float16: such a model is refused, never judged as float32."""
        details = self.interpreter.get_tensor_details()
        dtypes = {int(d["index"]): d["dtype"] for d in details}
        listing = getattr(self.interpreter, "_get_ops_details", None)
        if not callable(listing):
            if any(np.dtype(k) == np.float16 for k in dtypes.values()):
                return False, "the interpreter does not list its ops, and it holds float16"
            return False, ""
        ends = [int(d["index"]) for d in self.interpreter.get_output_details()]
        return float16_outputs.tflite_use(listing(), dtypes, ends)

    def call(self, call: Call, arrays: Mapping[str, Array], prefix: str) -> Any:
        given = {
            name: quantized(array(arg, arrays, prefix), self.details[name])
            for name, arg in named(call, self.inputs, self.what).items()
        }
        if self.runner is not None:
            got = dict(self.runner(**given))
            ends = self.runner.get_output_details()
            self.ends = {name: int(ends[name]["index"]) for name in got}
            return got
        interpreter = self.interpreter
        for name, value in given.items():
            interpreter.resize_tensor_input(self.details[name]["index"], value.shape)
        interpreter.allocate_tensors()
        for name, value in given.items():
            interpreter.set_tensor(self.details[name]["index"], value)
        interpreter.invoke()
        self.ends = {bare(d["name"]): int(d["index"]) for d in interpreter.get_output_details()}
        return {
            bare(d["name"]): dequantized(interpreter.get_tensor(d["index"]), d)
            for d in interpreter.get_output_details()
        }

    def explained(self) -> tuple[dict[str, Array], dict[str, str]]:
        """What quantization explains of each output of the last call (an int8 model's):
        ``tol/out/I`` per element, and what the card says of it."""
        if self.dtype != "int8":
            return {}, {}
        interpreter = self.interpreter
        try:
            found = quantized_error.explain(
                quantized_graph.ops(interpreter, self.path),
                quantized_graph.tensors(interpreter),
                interpreter.get_tensor,
                list(self.ends.values()),
            )
        except UnmodelledOpError as exc:
            raise ArtifactError(
                f"an int8 model whose rounding cannot be told apart: {exc}"
            ) from None
        arrays = {
            f"tol/out/{place}": found.measured[index] + found.weights[index]
            for place, index in enumerate(self.ends.values())
        }
        measured = max(float(np.max(v, initial=0.0)) for v in found.measured.values())
        weights = max(float(np.max(v, initial=0.0)) for v in found.weights.values())
        said = {
            "rounding": (
                f"+ int8 quantization: its activations' rounding as measured (up to "
                f"{measured:.2g}; each op within {found.largest_steps:.2g} step of its float "
                f"definition) and its weights' rounding bounded (up to {weights:.2g})"
            ),
            "saturated": "; ".join(
                f"{name} {clipped_share(share)}" for name, share in found.saturated[:3]
            )
            + (f"; {len(found.saturated) - 3} more" if len(found.saturated) > 3 else ""),
        }
        return arrays, said

    def weights_object(self, root: Path, described: Mapping[str, str]) -> Any:
        source = described.get("weights_from", "")
        if not source:
            return None
        with phase(f"loading the SavedModel {source} (the TFLite file's weights)"):
            loaded = tf.saved_model.load(str(root / source))
        public_names(loaded)
        return loaded

    def _activations(self) -> list[dict[str, Any]]:
        """The int8 tensors an op computes (not the weights): what quantization rounds."""
        with contextlib.suppress(AttributeError):
            made = {i for op in self.interpreter._get_ops_details() for i in op["outputs"]}
            return [
                d
                for d in self.interpreter.get_tensor_details()
                if d["index"] in made and d["dtype"] == np.int8 and d["quantization"][0] > 0
            ]
        return []

    def quantization(self) -> dict[str, str]:
        """``int8_tensors``: how many activations are rounded to int8; ``output_step``: the
        quantization step of the last one (the output's)."""
        found = self._activations()
        if not found:
            return {}
        return {
            "int8_tensors": str(len(found)),
            "output_step": repr(float(found[-1]["quantization"][0])),
        }
