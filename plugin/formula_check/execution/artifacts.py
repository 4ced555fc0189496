"""An exported artifact checked in place of code: a SavedModel's signature, a ``.keras`` model,
a ``.tflite`` file run by TensorFlow's own interpreter.

One call of :func:`check` loads the artifact, calls it on the request's arrays, reads the
weights the weight map names (from the loaded object; for a TFLite file from the SavedModel
it was converted from), runs the input regimes at the check's sizes and times it. A
SavedModel and a TFLite file are checked with the weights they were exported with (a
``.keras`` model is a layer again, and is perturbed as code is). The reply's ``artifact``
says what was checked: format, path, signature, the dtype it computes in and, for an int8
model, the quantization its interpreter reports (what the judge's tolerance follows).

An artifact working in float16 is refused here, naming the op; one whose only float16 is
the final cast of its outputs sends each such output's rounding as ``tol/out/I``
(:mod:`.float16_outputs`), as an int8 model sends what its quantization explains.

The modules behind it: :mod:`.artifact_calls` (calling an artifact, :class:`ArtifactError`),
:mod:`.artifact_formats` (SavedModel, ``.keras``), :mod:`.artifact_tflite`,
:mod:`.artifact_weights` (a SavedModel's weights by path).
"""

from __future__ import annotations

import functools
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import tensorflow as tf

from formula_check.execution import float16_outputs, layer_weights
from formula_check.execution.artifact_calls import FORMAT_WORDS, ArtifactError, Loaded
from formula_check.execution.artifact_formats import KerasModel, SavedModel
from formula_check.execution.artifact_tflite import TFLite
from formula_check.execution.artifact_weights import exposed
from formula_check.execution.snippet_failure import SnippetRaised, phase
from formula_check.execution.timing_runs import outputs, reply_arrays, returned_keys, timed_runs
from formula_check.messages import FIRST, CheckReply, CheckRequest, TimingResult
from formula_check.model import Array

Answer = tuple[CheckReply, dict[str, Array]]

__all__ = ["Answer", "ArtifactError", "check"]


def check(root: Path, request: CheckRequest, arrays: Mapping[str, Array]) -> Answer:
    """Answer a check request whose ``artifact`` names what to run."""
    started = time.perf_counter()
    described = dict(request.artifact)
    form = described["format"]
    with phase(f"loading the {FORMAT_WORDS[form]} {described['path']}"):
        model = _load(root, described)
    if model.float16_use:
        raise ArtifactError(
            f"the {FORMAT_WORDS[form]} {described['path']} is computing in float16 "
            f"({model.float16_use}): the tolerance of float16 arithmetic is not derived, so it "
            "is not judged; export it computing in float32 (a final cast of its outputs to "
            "float16 is judged)"
        )
    described["dtype"] = model.dtype
    call = request.calls.layer
    with phase("call"):
        result = model.call(call, arrays, "")
    weights_from = model.weights_object(root, described)
    unmapped: list[tuple[str, tuple[int | None, ...]]] = []
    first: dict[str, Array] = {}
    if form == "keras":  # a Keras model again: its weights move as a layer's do
        found, _ = layer_weights.variables(weights_from, request.weights, None)
        unmapped = [(name, tuple(v.shape)) for name, v, mapped in found if not mapped]
        if request.perturb and found:
            first = _first_call(result, weights_from, request)
            layer_weights.perturb([v for _, v, _ in found], request.seed)
            with phase("call"):
                result = model.call(call, arrays, "")
            described["perturbed"] = "yes"
    out, dtypes = outputs(result)
    described.update(model.quantization())  # of the check's own inputs, before the regimes'
    with phase("bounding the int8 model's rounding"):
        explained, said = model.explained()
    described.update(said)
    rounded = _float16_rounding(model, out, dtypes)
    if rounded:
        described["rounding"] = float16_outputs.SAID
    regime_out, skipped = _regimes(model, request, arrays, described["dtype"])
    read: dict[str, Array] = {}
    unused: list[str] = []
    if request.weights:
        read, unused = _weights(weights_from, request, form)
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
        first_call=bool(first),
    )
    return reply, reply_arrays(out, read, regime_out, explained, rounded, first)


def _first_call(result: Any, weights_from: Any, request: CheckRequest) -> dict[str, Array]:
    """What a Keras model's first call returned, and the weights it ran with, under
    ``first/``: judged too, as a layer's first call is, before its weights are moved."""
    got, _ = outputs(result)
    first = {f"{FIRST}out/{i}": value for i, value in enumerate(got)}
    read, _ = _weights(weights_from, request, "keras")
    first.update({f"{FIRST}w/{name}": value for name, value in read.items()})
    return first


def _load(root: Path, described: Mapping[str, str]) -> Loaded:
    path = root / described["path"]
    if described["format"] == "saved_model":
        return SavedModel(tf.saved_model.load(str(path)), described["signature"])
    if described["format"] == "keras":
        return KerasModel(path)
    return TFLite(path, described["signature"])


def _float16_rounding(model: Loaded, out: list[Any], dtypes: list[str]) -> dict[str, Array]:
    """``tol/out/I``: one float16 rounding of each float16 output of an artifact whose graph
    computes in float32 and casts its outputs at the end (nothing for any other)."""
    if not model.float16_outputs:
        return {}
    return {
        f"tol/out/{place}": float16_outputs.tolerance(value)
        for place, (value, dtype) in enumerate(zip(out, dtypes, strict=True))
        if dtype == "float16"
    }


def _weights(
    weights_from: Any, request: CheckRequest, form: str
) -> tuple[dict[str, Array], list[str]]:
    """The weights the map names, read from the artifact (or the SavedModel named for it)."""
    if weights_from is None:
        raise ArtifactError(
            "a TFLite file keeps its weights as constants, with no attribute paths: name "
            "the SavedModel it was converted from as the fourth part of code= "
            '(code="tflite:FILE:SIGNATURE:SAVED_MODEL_DIR"), whose weights the map reads'
        )
    try:
        return layer_weights.read_weights(weights_from, request.weights)
    except SnippetRaised as raised:
        exc = raised.error
        if not isinstance(exc, (AttributeError, ValueError, IndexError)):
            raise
        paths = exposed(weights_from) if form != "keras" else []
        shown = ", ".join(paths[:12]) + (f" ({len(paths)} in all)" if len(paths) > 12 else "")
        raise ArtifactError(
            f"the {FORMAT_WORDS[form]} does not expose a weight the map names: "
            f"{exc} ({raised.phase})" + (f"; the weights it exposes: {shown}" if paths else "")
        ) from None


def _regimes(
    model: Loaded, request: CheckRequest, arrays: Mapping[str, Array], dtype: str
) -> tuple[dict[str, Array], list[tuple[str, str]]]:
    """The artifact on each input regime at the check's sizes; a regime at other sizes, or
    one that scales the weights (an exported model's are fixed), is skipped with why, and so
    is every regime of an int8 model (its inputs lie outside the range it was calibrated for,
    where clipping, not rounding, decides its values) and of a float16-output one (its
    outputs' rounding is added on the check's own inputs only)."""
    out: dict[str, Array] = {}
    skipped: list[tuple[str, str]] = []
    for regime in request.regimes:
        if dtype == "int8":
            why = "an int8 model is calibrated for the check's own inputs"
        elif model.float16_outputs:
            why = "a float16 output's rounding is added on the check's own inputs only"
        elif regime.resized or regime.weight_scale != 1.0:
            why = "an exported artifact is not run at " + (
                "sizes of its own" if regime.resized else "scaled weights"
            )
        else:
            with phase(f"regime:{regime.name}"):
                got, _ = outputs(model.call(regime.calls.layer, arrays, regime.prefix))
            out.update({f"{regime.prefix}out/{i}": value for i, value in enumerate(got)})
            continue
        skipped.append((regime.name, why))
    return out, skipped


def _timed(
    model: Loaded, request: CheckRequest, arrays: Mapping[str, Array]
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
