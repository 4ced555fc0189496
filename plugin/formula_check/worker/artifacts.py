"""An exported artifact checked in place of code: a SavedModel's signature, a ``.keras`` model,
a ``.tflite`` file run by TensorFlow's own interpreter.

One call of :func:`check` loads the artifact, calls it on the request's arrays, reads the
weights the weight map names (from the loaded object; for a TFLite file from the SavedModel
it was converted from), runs the input regimes at the check's sizes and times it. A
SavedModel and a TFLite file are checked with the weights they were exported with (a
``.keras`` model is a layer again, and is perturbed as code is). The reply's ``artifact``
says what was checked: format, path, signature, the dtype it computes in and, for an int8
model, the quantization its interpreter reports (what the judge's tolerance follows).
"""

from __future__ import annotations

import contextlib
import functools
import importlib
import json
import time
import warnings
import zipfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import tensorflow as tf

from ..messages import FLOAT16_WEIGHTS, Argument, Call, CheckReply, CheckRequest, TimingResult
from ..model import Array
from . import layer_weights, quantized_error, quantized_graph
from .quantized_ops import UnmodelledOpError
from .snippet_failure import SnippetRaised, phase
from .timing_runs import outputs, reply_arrays, returned_keys, timed_runs

Answer = tuple[CheckReply, dict[str, Array]]


class ArtifactError(Exception):
    """The artifact cannot be called or read as the block asks: said in the user's terms."""


def check(root: Path, request: CheckRequest, arrays: Mapping[str, Array]) -> Answer:
    """Answer a check request whose ``artifact`` names what to run."""
    started = time.perf_counter()
    described = dict(request.artifact)
    form = described["format"]
    with phase(f"loading the {_FORMAT_WORDS[form]} {described['path']}"):
        model = _load(root, described)
    described["dtype"] = model.dtype
    call = request.calls.layer
    with phase("call"):
        result = model.call(call, arrays, "")
    weights_from = model.weights_object(root, described)
    unmapped: list[tuple[str, tuple[int | None, ...]]] = []
    if form == "keras":  # a Keras model again: its weights move as a layer's do
        found = layer_weights.variables(weights_from, request.weights)
        unmapped = [(name, tuple(v.shape)) for name, v, mapped in found if not mapped]
        if request.perturb and found:
            layer_weights.perturb([v for _, v, _ in found], request.seed)
            with phase("call"):
                result = model.call(call, arrays, "")
            described["perturbed"] = "yes"
    out, dtypes = outputs(result)
    described.update(model.quantization())  # of the check's own inputs, before the regimes'
    with phase("bounding the int8 model's rounding"):
        explained, said = model.explained()
    described.update(said)
    regime_out, skipped = _regimes(model, request, arrays, described["dtype"])
    read: dict[str, Array] = {}
    unused: list[str] = []
    if request.weights:
        if weights_from is None:
            raise ArtifactError(
                "a TFLite file keeps its weights as constants, with no attribute paths: name "
                "the SavedModel it was converted from as the fourth part of code= "
                '(code="tflite:FILE:SIGNATURE:SAVED_MODEL_DIR"), whose weights the map reads'
            )
        try:
            read, unused = layer_weights.read_weights(weights_from, request.weights)
        except SnippetRaised as raised:
            exc = raised.error
            if not isinstance(exc, (AttributeError, ValueError, IndexError)):
                raise
            paths = exposed(weights_from) if form != "keras" else []
            shown = ", ".join(paths[:12]) + (f" ({len(paths)} in all)" if len(paths) > 12 else "")
            raise ArtifactError(
                f"the {_FORMAT_WORDS[form]} does not expose a weight the map names: "
                f"{exc} ({raised.phase})" + (f"; the weights it exposes: {shown}" if paths else "")
            ) from None
    seconds = time.perf_counter() - started
    timings = _timed(model, request, arrays) if request.timing is not None else ()
    reply = CheckReply(
        kind="layer",
        outputs=len(out),
        output_dtypes=tuple(dtypes),
        output_keys=returned_keys(result),
        timings=timings,
        unused_weights=tuple(unused),
        unmapped_weights=tuple(unmapped),
        regimes_skipped=tuple(skipped),
        snippet_seconds=seconds,
        artifact=described,
    )
    return reply, reply_arrays(out, read, regime_out, explained)


_FORMAT_WORDS = {"saved_model": "SavedModel", "keras": "Keras model", "tflite": "TFLite file"}


class _Loaded:
    """A loaded artifact: called with a block's call, its weights and dtype told."""

    dtype = "float32"

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


def _load(root: Path, described: Mapping[str, str]) -> _Loaded:
    path = root / described["path"]
    if described["format"] == "saved_model":
        return _SavedModel(tf.saved_model.load(str(path)), described["signature"])
    if described["format"] == "keras":
        _import_custom_classes(path)
        return _KerasModel(tf.keras.models.load_model(path, compile=False))
    return _TFLite(path, described["signature"])


def _import_custom_classes(path: Path) -> None:
    """Import the modules a ``.keras`` file names for its own classes (its layers saved with
    ``register_keras_serializable``), as ``import`` finds them from the project: Keras finds
    a registered class only once its module has run."""
    with zipfile.ZipFile(path) as archive:
        config = json.loads(archive.read("config.json"))
    modules: set[str] = set()

    def visit(node: Any) -> None:
        if isinstance(node, dict):
            module = node.get("module")
            if (
                isinstance(module, str)
                and node.get("class_name")
                and module.split(".")[0]
                not in (
                    "keras",
                    "builtins",
                )
            ):
                modules.add(module)
            for value in node.values():
                visit(value)
        elif isinstance(node, list):
            for value in node:
                visit(value)

    visit(config)
    for module in sorted(modules):
        importlib.import_module(module)


def _array(arg: Argument, arrays: Mapping[str, Array], prefix: str) -> Array:
    if not arg.array:
        raise ArtifactError(
            f"an artifact is called with arrays only; call= passes the value {arg.value!r}"
        )
    name = prefix + arg.array
    return arrays[name] if name in arrays else arrays[arg.array]


def _named(call: Call, inputs: list[str], what: str) -> dict[str, Argument]:
    """The call's arguments by the artifact's input names: a keyword by its name, a positional
    argument by the oracle's name of its array when the artifact has an input of that name,
    else by its place among the inputs."""
    named: dict[str, Argument] = {}
    own = [_oracle_name(arg) for arg in call.args]
    for index, (arg, name) in enumerate(zip(call.args, own, strict=True)):
        if name in inputs:
            named[name] = arg
        elif index < len(inputs) and not any(n in inputs for n in own):
            named[inputs[index]] = arg
        else:
            raise ArtifactError(
                f"{what} has no input {name!r}; its inputs are {', '.join(inputs)}: map "
                f'them with call=, such as call="{inputs[0]}={name}"'
            )
    for key, arg in call.kwargs.items():
        if key not in inputs:
            raise ArtifactError(f"{what} has no input {key!r}; its inputs are {', '.join(inputs)}")
        named[key] = arg
    missing = [name for name in inputs if name not in named]
    if missing:
        raise ArtifactError(
            f"{what} needs {', '.join(missing)}, which the call does not give: map it with "
            f'call= (such as call="x {missing[0]}=mask")'
        )
    return named


def _oracle_name(arg: Argument) -> str:
    """The oracle's name of the array an argument passes (``in/x`` is ``x``)."""
    return arg.array.rpartition("/")[2]


class _SavedModel(_Loaded):
    def __init__(self, loaded: Any, signature: str) -> None:
        signatures = dict(getattr(loaded, "signatures", {}))
        if signature not in signatures:
            raise ArtifactError(
                f"the SavedModel has no signature {signature!r}; it has "
                f"{', '.join(sorted(signatures)) or 'none'}"
            )
        self.loaded = loaded
        self.function = signatures[signature]
        self.specs = dict(self.function.structured_input_signature[1])
        self.what = f"signature {signature!r}"
        kinds = {spec.dtype.name for spec in self.function.structured_outputs.values()}
        self.dtype = "float16" if "float16" in kinds else "float32"  # at least its outputs

    def call(self, call: Call, arrays: Mapping[str, Array], prefix: str) -> Any:
        named = _named(call, sorted(self.specs), self.what)
        given = {
            name: tf.constant(_array(arg, arrays, prefix), dtype=self.specs[name].dtype)
            for name, arg in named.items()
        }
        return dict(self.function(**given))

    def weights_object(self, root: Path, described: Mapping[str, str]) -> Any:
        _public_names(self.loaded)
        return self.loaded


class _KerasModel(_Loaded):
    def __init__(self, model: Any) -> None:
        self.model = model
        self.names = [str(getattr(t, "name", "")).split(":")[0] for t in model.inputs or ()]
        self.dtype = str(getattr(getattr(model, "dtype_policy", None), "compute_dtype", "float32"))

    def call(self, call: Call, arrays: Mapping[str, Array], prefix: str) -> Any:
        named = _named(call, self.names, "the Keras model")
        given = [tf.constant(_array(named[name], arrays, prefix)) for name in self.names]
        return self.model(given if len(given) > 1 else given[0], training=False)

    def weights_object(self, root: Path, described: Mapping[str, str]) -> Any:
        return self.model


def _interpreter(path: Path, *, builtin: bool = False) -> Any:
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


class _TFLite(_Loaded):
    def __init__(self, path: Path, signature: str) -> None:
        self.path = path
        self.interpreter = _interpreter(path)
        if self._activations():  # int8: every tensor is read, as the builtin kernels keep it
            self.interpreter = _interpreter(path, builtin=True)
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
            self.details = {_bare(d["name"]): d for d in self.interpreter.get_input_details()}
            self.inputs = list(self.details)
        self.what = "the TFLite file" + (f"'s signature {signature!r}" if signatures else "")
        self.kinds = {d["dtype"] for d in self.interpreter.get_tensor_details()}
        ends = [*self.interpreter.get_input_details(), *self.interpreter.get_output_details()]
        if self._activations():
            self.dtype = "int8"
        elif (
            np.float16 in self.kinds
            and all(d["dtype"] == np.float32 for d in ends)
            and (self._float16_only_stored())
        ):
            # TFLite's float16 conversion stores the weights in float16 and, on a CPU, turns
            # them back to float32 to compute: float32 arithmetic on float16-rounded weights
            self.dtype = FLOAT16_WEIGHTS
        else:
            self.dtype = "float16" if np.float16 in self.kinds else "float32"

    def _float16_only_stored(self) -> bool:
        """Whether float16 is only how the weights are stored: every float16 tensor is read
        by DEQUANTIZE ops alone, and no op makes one. A model that rounds an activation to
        float16 inside computes in float16 there. Where the interpreter cannot list its ops,
        no: such a model is refused, never judged as float32."""
        listing = getattr(self.interpreter, "_get_ops_details", None)
        if not callable(listing):
            return False
        details = self.interpreter.get_tensor_details()
        half = {d["index"] for d in details if d["dtype"] == np.float16}
        for op in listing():
            if any(int(i) in half for i in op["outputs"]):
                return False
            if op["op_name"] != "DEQUANTIZE" and any(int(i) in half for i in op["inputs"]):
                return False
        return True

    def call(self, call: Call, arrays: Mapping[str, Array], prefix: str) -> Any:
        named = _named(call, self.inputs, self.what)
        given = {
            name: _quantized(_array(arg, arrays, prefix), self.details[name])
            for name, arg in named.items()
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
        self.ends = {_bare(d["name"]): int(d["index"]) for d in interpreter.get_output_details()}
        return {
            _bare(d["name"]): _dequantized(interpreter.get_tensor(d["index"]), d)
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
            "saturated": "; ".join(f"{name} {share:.0%}" for name, share in found.saturated[:3])
            + (f"; {len(found.saturated) - 3} more" if len(found.saturated) > 3 else ""),
        }
        return arrays, said

    def weights_object(self, root: Path, described: Mapping[str, str]) -> Any:
        source = described.get("weights_from", "")
        if not source:
            return None
        with phase(f"loading the SavedModel {source} (the TFLite file's weights)"):
            loaded = tf.saved_model.load(str(root / source))
        _public_names(loaded)
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
        quantized = self._activations()
        if not quantized:
            return {}
        return {
            "int8_tensors": str(len(quantized)),
            "output_step": repr(float(quantized[-1]["quantization"][0])),
        }


def _bare(name: str) -> str:
    """``serving_default_x:0`` -> ``x``: a converted function's input, by its own name."""
    return name.removeprefix("serving_default_").split(":")[0]


def _quantized(value: Array, detail: Mapping[str, Any]) -> Array:
    dtype = detail["dtype"]
    scale, zero = detail["quantization"]
    if np.issubdtype(dtype, np.integer) and scale:
        info = np.iinfo(dtype)
        rounded: Array = np.clip(np.round(value / scale) + zero, info.min, info.max)
        return rounded.astype(dtype)
    return np.asarray(value, dtype=dtype)


def _dequantized(value: Array, detail: Mapping[str, Any]) -> Array:
    scale, zero = detail["quantization"]
    if np.issubdtype(detail["dtype"], np.integer) and scale:
        real: Array = (value.astype(np.float32) - zero) * np.float32(scale)
        return real
    return value


def _public_names(obj: Any, seen: set[int] | None = None) -> None:
    """Give each restored object's tracked child saved under a private name (a Keras
    ``Dense`` saves its kernel as ``_kernel``) its public name too, so that the weight map's
    ``wq.kernel`` reads a SavedModel as it reads the layer it was exported from."""
    seen = set() if seen is None else seen
    if id(obj) in seen or _is_variable(obj) or len(seen) > _MOST_OBJECTS:
        return
    seen.add(id(obj))
    children = list(vars(obj).items()) if hasattr(obj, "__dict__") else []
    for name, child in children:
        if name.startswith("_") and not name.startswith("__") and _is_tracked(child):
            public = name.lstrip("_")
            if public and not hasattr(obj, public):
                with contextlib.suppress(AttributeError, TypeError, ValueError):
                    setattr(obj, public, child)
        if _is_tracked(child) and not name.startswith("__"):
            for item in child if isinstance(child, (list, tuple)) else [child]:
                _public_names(item, seen)


_MOST_OBJECTS = 10_000
"""How many restored objects a SavedModel's tree is walked through, at most."""


def _is_variable(value: Any) -> bool:
    return isinstance(value, tf.Variable)


def _is_tracked(value: Any) -> bool:
    """A child worth a path: a variable, a restored object, or a list of them."""
    if isinstance(value, (list, tuple)):
        return any(_is_tracked(item) for item in value)
    return _is_variable(value) or type(value).__name__ == "_UserObject"


def exposed(obj: Any, prefix: str = "", seen: set[int] | None = None) -> list[str]:
    """The attribute paths to the variables a restored object exposes (public names)."""
    seen = set() if seen is None else seen
    if id(obj) in seen or len(seen) > _MOST_OBJECTS:
        return []
    seen.add(id(obj))
    found = []
    for name, child in sorted(vars(obj).items()) if hasattr(obj, "__dict__") else []:
        if name.startswith("_"):
            continue
        items = child if isinstance(child, (list, tuple)) else [child]
        for index, item in enumerate(items):
            step = f"{prefix}{name}" + (f"[{index}]" if isinstance(child, (list, tuple)) else "")
            if _is_variable(item):
                found.append(step)
            elif _is_tracked(item):
                found += exposed(item, step + ".", seen)
    return found


def _regimes(
    model: _Loaded, request: CheckRequest, arrays: Mapping[str, Array], dtype: str
) -> tuple[dict[str, Array], list[tuple[str, str]]]:
    """The artifact on each input regime at the check's sizes; a regime at other sizes, or
    one that scales the weights (an exported model's are fixed), is skipped with why, and so
    is every regime of an int8 model: its inputs lie outside the range it was calibrated for,
    where clipping, not rounding, decides its values."""
    out: dict[str, Array] = {}
    skipped: list[tuple[str, str]] = []
    for regime in request.regimes:
        if regime.resized or regime.weight_scale != 1.0 or dtype == "int8":
            why = (
                "an int8 model is calibrated for the check's own inputs"
                if dtype == "int8"
                else "an exported artifact is not run at "
                + ("sizes of its own" if regime.resized else "scaled weights")
            )
            skipped.append((regime.name, why))
            continue
        with phase(f"regime:{regime.name}"):
            got, _ = outputs(model.call(regime.calls.layer, arrays, regime.prefix))
        out.update({f"{regime.prefix}out/{i}": value for i, value in enumerate(got)})
    return out, skipped


def _timed(
    model: _Loaded, request: CheckRequest, arrays: Mapping[str, Array]
) -> tuple[TimingResult, ...]:
    """Each timing run at the check's own sizes, as exported (already a graph: no separate
    ``tf.function`` timing); a run at other sizes is left out, said in its ``graph_error``."""
    timing = request.timing
    assert timing is not None
    results = []
    for run in timing.runs:
        try:
            samples = timed_runs(
                functools.partial(model.call, run.calls.layer, arrays, run.prefix),
                timing.warmup,
                timing.repeats,
            )
        except Exception as exc:
            results.append(TimingResult(run.label, (), graph_error=f"not timed: {exc}"[:200]))
            continue
        note = "an exported artifact runs as exported: it is timed as it is called"
        results.append(TimingResult(run.label, tuple(samples), graph_error=note))
    return tuple(results)
