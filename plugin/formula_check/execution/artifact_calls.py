"""How an exported artifact is called: the block's call mapped onto the artifact's own input
names, each argument an array in the dtype (and, for an int8 model, the quantization) the
artifact takes, and its outputs read back as floats. :class:`Loaded` is what every format's
loaded model answers; :class:`ArtifactError` says in the user's terms why an artifact cannot
be called or read as the block asks.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from formula_check.messages import Argument, Call
from formula_check.model import Array

FORMAT_WORDS = {"saved_model": "SavedModel", "keras": "Keras model", "tflite": "TFLite file"}


class ArtifactError(Exception):
    """The artifact cannot be called or read as the block asks: said in the user's terms."""


class Loaded:
    """A loaded artifact: called with a block's call, its weights and dtype told.

    ``float16_use``: why it computes in float16 (an op that works in half precision), or
    nothing; ``float16_outputs``: its graph was inspected and its only float16 step is the
    final cast of its outputs (see :mod:`.float16_outputs`)."""

    dtype = "float32"
    float16_use = ""
    float16_outputs = False

    def call(self, call: Call, arrays: Mapping[str, Array], prefix: str) -> Any:
        raise NotImplementedError

    def weights_object(self, root: Path, described: Mapping[str, str]) -> Any:
        """What the weight map's paths start from (None: the artifact exposes none)."""
        return None

    def quantization(self) -> dict[str, str]:
        """What the interpreter says of an int8 model's quantization (nothing else)."""
        return {}

    def explained(self) -> tuple[dict[str, Array], dict[str, str]]:
        """What quantization explains of the last call's outputs (nothing: not quantized)."""
        return {}, {}


def array(arg: Argument, arrays: Mapping[str, Array], prefix: str) -> Array:
    """The array an argument passes, under the regime's ``prefix`` where it has one."""
    if not arg.array:
        raise ArtifactError(
            f"an artifact is called with arrays only; call= passes the value {arg.value!r}"
        )
    name = prefix + arg.array
    return arrays[name] if name in arrays else arrays[arg.array]


def named(call: Call, inputs: list[str], what: str) -> dict[str, Argument]:
    """The call's arguments by the artifact's input names: a keyword by its name, a positional
    argument by the oracle's name of its array when the artifact has an input of that name,
    else by its place among the inputs."""
    found: dict[str, Argument] = {}
    own = [_oracle_name(arg) for arg in call.args]
    for index, (arg, name) in enumerate(zip(call.args, own, strict=True)):
        if name in inputs:
            found[name] = arg
        elif index < len(inputs) and not any(n in inputs for n in own):
            found[inputs[index]] = arg
        else:
            raise ArtifactError(
                f"{what} has no input {name!r}; its inputs are {', '.join(inputs)}: map "
                f'them with call=, such as call="{inputs[0]}={name}"'
            )
    for key, arg in call.kwargs.items():
        if key not in inputs:
            raise ArtifactError(f"{what} has no input {key!r}; its inputs are {', '.join(inputs)}")
        found[key] = arg
    missing = [name for name in inputs if name not in found]
    if missing:
        raise ArtifactError(
            f"{what} needs {', '.join(missing)}, which the call does not give: map it with "
            f'call= (such as call="x {missing[0]}=mask")'
        )
    return found


def _oracle_name(arg: Argument) -> str:
    """The oracle's name of the array an argument passes (``in/x`` is ``x``)."""
    return arg.array.rpartition("/")[2]


def bare(name: str) -> str:
    """``serving_default_x:0`` -> ``x``: a converted function's input, by its own name."""
    return name.removeprefix("serving_default_").split(":")[0]


def quantized(value: Array, detail: Mapping[str, Any]) -> Array:
    """An input as a TFLite tensor takes it: in its dtype, quantized where it is an integer."""
    dtype = detail["dtype"]
    scale, zero = detail["quantization"]
    if np.issubdtype(dtype, np.integer) and scale:
        info = np.iinfo(dtype)
        rounded: Array = np.clip(np.round(value / scale) + zero, info.min, info.max)
        return rounded.astype(dtype)
    return np.asarray(value, dtype=dtype)


def dequantized(value: Array, detail: Mapping[str, Any]) -> Array:
    """An output of a TFLite tensor as the real numbers it stands for."""
    scale, zero = detail["quantization"]
    if np.issubdtype(detail["dtype"], np.integer) and scale:
        real: Array = (value.astype(np.float32) - zero) * np.float32(scale)
        return real
    return value


def clipped_share(share: float) -> str:
    """The share of a tensor's elements clipped, as a card says it: never "0%" for a tensor
    that did clip (a few values of thousands), never "100%" unless every one did."""
    if share >= 1.0:
        return "100%"
    if share >= 0.01:
        return f"{min(share, 0.99):.0%}"
    if share >= 0.0001:
        return f"{share:.2%}"
    return "under 0.01%"
