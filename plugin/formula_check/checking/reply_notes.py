"""What a reply says before and beside its verdicts: an option the block states that the
code never saw, a preset's note, heatmaps that cannot be drawn, outputs that cannot be judged
(not tensors, a precision no tolerance is derived for), the training flag the call dropped,
and what an exported artifact's card says of its weights and precision.

Pure NumPy: runs in the build process, never touches TensorFlow.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from formula_check.checking.oracle_weights import (
    described,
)
from formula_check.errors import SpecError
from formula_check.messages import NOT_A_TENSOR, CheckReply
from formula_check.model import Array
from formula_check.planning.option_values import spoken_call
from formula_check.planning.plan import Plan, attribute_outputs
from formula_check.results import SnippetFailure


def options_took_effect(plan: Plan, reply: CheckReply) -> None:
    """A function is called, never built: what a block says of building (``init=``, weights
    ``perturb=false``) would be ignored, and a weight its ``call=`` never passes never
    reaches the code. Each is an error at the block's place."""
    spec = plan.spec
    if reply.kind != "function":
        return
    kept = attribute_outputs(spec)
    if kept:
        raise SpecError(
            f"returns: {', '.join(f'{k}={v}' for k, v in kept.items())} reads an attribute of "
            "a layer, but this code is called as a function",
            spec.location,
        )
    if reply.created_variables and plan.oracle.weights:
        made = described(reply.created_variables)
        raise SpecError(
            f"the code creates weights of its own while it runs ({made}), so the weights of "
            f"oracle {plan.oracle.name!r} it is given "
            f"({', '.join(t.name for t in plan.oracle.weights)}) never decide its result: "
            'check what it builds as a layer or factory (kind="factory") with a weight map',
            spec.location,
        )
    own_init = [k for k, said in plan.request.init_sources.items() if said.get("origin") == "init"]
    if own_init:
        raise SpecError(
            f"init: {', '.join(own_init)} cannot take effect: this code is called as a "
            'function, never constructed (kind="layer" or "factory" builds it)',
            spec.location,
        )
    # a page's perturb: applies to the blocks that are layers; a spec made in code states
    # every value, so only a perturb that is not the default counts there
    stated = "perturb" in spec.stated if spec.stated is not None else not spec.perturb_weights
    if stated:
        said = "true" if spec.perturb_weights else "false"
        raise SpecError(
            f"perturb={said} cannot take effect: this code is a function, given its weights as "
            "arguments; only a layer's own weights are moved",
            spec.location,
        )
    call = plan.request.calls.function
    passed = set(call.arrays())
    missing = [t.name for t in plan.oracle.weights if f"wt/{t.name}" not in passed]
    if spec.call is not None and missing:
        raise SpecError(
            f"call={spoken_call(spec.call)!r} never passes {', '.join(missing)}, weights of oracle "
            f"{plan.oracle.name!r}: a function must be given every weight the formula uses",
            spec.location,
        )


def preset_note(plan: Plan, reply: CheckReply) -> list[str]:
    """Where the preset's weights were found, when not on the layer itself."""
    if not reply.preset_root:
        return []
    name = (plan.spec.preset or "").partition("@")[0]
    return [
        f"preset {name}'s weight map read under {reply.preset_root}, the one sub-layer of "
        f'this layer that holds its weights (preset="{name}@{reply.preset_root}" says so)'
    ]


def heatmaps_drawable(plan: Plan, expected: Mapping[str, Array]) -> None:
    """A heatmap the block asks for by name must have values to draw."""
    for name in plan.spec.heatmaps or ():
        if name not in expected:
            raise SpecError(
                f"heatmaps: oracle {plan.oracle.name!r} has no {name!r} to draw (it has "
                f"{', '.join(sorted(expected))})",
                plan.spec.location,
            )


def unjudgeable(plan: Plan, names: Sequence[str], dtypes: Sequence[str]) -> SnippetFailure | None:
    """Why the outputs cannot be judged, or None: code that gave no array where an output is
    compared, or an artifact computing in float16 (a ``.keras`` float16 policy; the worker
    refuses a SavedModel or TFLite file doing so), which needs a tolerance derived tensor by
    tensor: a multiple of float32's rounding let formula drifts pass. (An int8 model's
    rounding, and float16 outputs cast at the end of a float32 graph, come with the outputs:
    ``tol/out/I``.)"""
    if plan.artifact.get("dtype", "") == "float16":
        return SnippetFailure(
            "ArtifactError",
            "an artifact computing in float16 cannot be judged yet: the tolerance its "
            "roundings allow is not derived, and a fixed multiple let formula drifts pass; "
            "check the float32 SavedModel or TFLite conversion (a float16-weight TFLite file "
            "is judged: its weights are rounded as it rounds them; so is an artifact "
            "computing in float32 that casts its outputs to float16)",
        )
    untensored = not_tensors(names, dtypes)
    return SnippetFailure("TypeError", "; ".join(untensored)) if untensored else None


def as_float16(value: Array) -> Array:
    """A weight as a float16-weight artifact computes with it: rounded to float16."""
    rounded: Array = np.asarray(value).astype(np.float16).astype(np.float64)
    return rounded


def dropped_training(reply: CheckReply) -> str:
    """What to say when ``training=`` never reached the layer's own ``call()``."""
    kept = dict(reply.keywords_not_passed)
    if "training" not in kept:
        return ""
    return (
        f"training= never reached {kept['training']}, which takes it only through **kwargs: "
        "Keras 3 passes training on to a call() that names it (its sub-layers still see it), "
        "so code that reads kwargs['training'] runs as if it were not given"
    )


def not_tensors(names: Sequence[str], dtypes: Sequence[str]) -> list[str]:
    """What to say of each output ``returns=`` (or the oracle's order) names at a place where
    the code returned something other than an array (a list, a dict, None, a string)."""
    return [
        f"the code returned a {dtype.removeprefix(NOT_A_TENSOR).strip()} as value {index + 1} "
        f"({name}), not a tensor: return the array there, or skip the value with _ in returns="
        for index, (name, dtype) in enumerate(zip(names, dtypes, strict=False))
        if name not in {"_", ""} and dtype.startswith(NOT_A_TENSOR)
    ]


_ARTIFACT_WORDS = {"saved_model": "SavedModel", "keras": "Keras model", "tflite": "TFLite file"}


def artifact_notes(
    artifact: Mapping[str, str], weights: Mapping[str, Array], plan: Plan
) -> list[str]:
    """What an exported artifact's card says: which artifact was checked, and what checking
    it with its own weights cannot see. Weights that cannot be moved (a SavedModel's, a
    TFLite file's) and hold only zeros or only ones are an error at the block, unless it
    says ``perturb="false"``: a term that left them out would give the same numbers."""
    if not artifact:
        return []
    signature = f", signature {artifact['signature']}" if artifact.get("signature") else ""
    source = (
        f"; weights read from {artifact['weights_from']}" if artifact.get("weights_from") else ""
    )
    notes = [
        f"artifact: the {_ARTIFACT_WORDS[artifact['format']]} {artifact['path']}{signature}, "
        f"computing in {artifact.get('dtype', 'float32')}{source}"
    ]
    if artifact.get("saturated"):
        notes.append(
            "int8 tensors saturated (values clipped at an end of their calibrated range, which "
            f"quantization does not explain): {artifact['saturated']}; calibrate on data like this"
        )
    if artifact.get("perturbed"):
        return notes
    plain = [
        name
        for name, value in weights.items()
        if np.size(value) > 1 and (np.all(value == 0) or np.all(value == 1))
    ]
    if plain and plan.spec.perturb_weights:
        raise SpecError(
            f"weights: the {_ARTIFACT_WORDS[artifact['format']]} {artifact['path']} is checked "
            f"with the weights it was exported with, which cannot be moved, and "
            f"{', '.join(plain)} hold only zeros or only ones there, so code that left their "
            "terms out would give the same numbers: export it after training (or with its "
            "weights moved off their initial values), or check the source, whose weights are "
            "moved",
            plan.spec.location,
        )
    notes.append(
        "weights at their exported values, not perturbed (an exported artifact is checked as "
        "shipped)"
        + (
            f"; {', '.join(plain)} hold only zeros or ones there, so a bug in their terms "
            "would not show: export it after training, or check the source with perturb"
            if plain
            else ""
        )
    )
    return notes
