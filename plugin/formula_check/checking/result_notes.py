"""The notes a result carries beside its verdicts: what the sizes cannot tell apart, what
came back other than asked, which input regimes ran, how the tolerances came about, why a
run has no ``tf.function`` timing. Pure, part of judging a reply (:mod:`..evaluate`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from formula_check.checking.oracle_weights import described
from formula_check.messages import CheckReply, TimingResult
from formula_check.model import Array
from formula_check.planning.plan import Plan
from formula_check.results import Verdict


def blind_spots(plan: Plan) -> list[str]:
    """What these sizes and this mask cannot tell apart. Two dims of one size let code that
    swaps them (or scales by the wrong one) pass; a size of 1 hides an operation over the
    wrong axis; a mask that hides nothing lets code that ignores it pass. Said on the card,
    since a verdict is only as strong as the case it was run on."""
    notes = []
    by_size: dict[int, list[str]] = {}
    # a causal mask and self-attention make the queries the keys: n = m is the formula's own
    square = plan.spec.mask in {"causal", "both"} or plan.params.get("variant") == "self"
    for dim, size in plan.sizes.items():
        if not (square and dim == "m" and plan.sizes.get("n") == size) and _settable(plan, dim):
            by_size.setdefault(size, []).append(dim)
    for size, dims in sorted(by_size.items()):
        if size == 1:
            notes.append(
                f"{' = '.join(dims)} = 1: a size of 1 hides code that works along the wrong "
                "axis there (a softmax, a mask, a transpose); give it a size above 1"
            )
        elif len(dims) > 1:
            notes.append(
                f"{' = '.join(dims)} = {size}: code that mixes up {' and '.join(dims)} cannot "
                "be told apart at these sizes; give them different sizes"
            )
    if plan.keep is not None and bool(np.all(plan.keep)):
        notes.append(
            f"the {plan.spec.mask} mask hides nothing at these sizes, so code that ignores it "
            "cannot be told apart"
        )
    return notes


def _settable(plan: Plan, dim: str) -> bool:
    """Whether the block could give ``dim`` a size of its own. A dim the oracle derives (a head's
    width, d_model/h) equals its source by the formula's own definition; stating it helps only
    when the code takes its sizes from its inputs. A layer built from ``init`` arguments (a
    standard multi-head layer) makes it d_model/h by construction: telling its reader to give
    them different sizes would ask for what the layer cannot do."""
    derived = dim in plan.oracle.derived_dims and dim not in plan.spec.dims
    return not (derived and plan.spec.init)


def unmapped_notes(plan: Plan, reply: CheckReply) -> list[str]:
    """Trainable weights of the layer outside the formula: moved before the comparison, so a
    term the formula does not have shows up as a difference."""
    unmapped = described(reply.unmapped_weights)
    if not unmapped:
        return []
    moved = "moved by noise before the comparison" if plan.spec.perturb_weights else "not moved"
    return [f"trainable weights outside the weight map: {unmapped} ({moved})"]


def output_notes(
    plan: Plan,
    names: Sequence[str],
    outputs: Sequence[Array],
    dtypes: Sequence[str],
    keys: Sequence[str] | None = None,
) -> list[str]:
    """What a card notes about the code's outputs: a dict whose keys are not the oracle's,
    more values than compared, a dtype other than float32."""
    notes = []
    if keys and list(keys) != list(names[: len(keys)]):
        left_out = [key for key, name in zip(keys, names, strict=False) if name == "_"]
        if left_out and len(left_out) < len(keys):
            notes.append(
                f"the code returned a dict with keys that name no output compared "
                f"({', '.join(left_out)}): compared by name, those left out"
            )
        else:
            notes.append(
                f"the code returned a dict whose keys ({', '.join(keys)}) are not all among "
                f"the outputs compared: compared in order, as {', '.join(names)}"
            )
    if len(outputs) > len(names):
        notes.append(
            f"the code returned {len(outputs)} values; "
            f"compared the first {len(names)} ({', '.join(names)})"
        )
    for index, (name, actual) in enumerate(zip(names, outputs, strict=False)):
        dtype = dtypes[index] if index < len(dtypes) else np.asarray(actual).dtype.name
        if dtype != "float32" and name not in {"_", ""} and not dtype.startswith("not a tensor:"):
            notes.append(f"{name} came back as {dtype}, not float32")
    return notes


def regime_notes(plan: Plan, skipped: Mapping[str, str], first_call: bool = False) -> list[str]:
    """Which input regimes ran besides the standard one, and which could not, and why;
    ``first_call``: a layer's first call was judged too, before its weights were moved."""
    notes = []
    ran = [f"{r.name} ({r.says})" for r in plan.regimes if r.name not in skipped]
    if first_call:
        ran.append("first call (the weights it was made with, before they were moved)")
    chosen = plan.spec.regimes
    if chosen is not None:  # the block chose: say so, and what it left out
        left = [r.name for r in plan.oracle.input_regimes() if r.name not in chosen]
        notes.append(
            f"input regimes chosen by the block (regimes={', '.join(chosen) or 'none'})"
            + (f": not checked on {', '.join(left)}" if left else "")
        )
    if ran:
        notes.append(f"also checked on other inputs: {'; '.join(ran)}")
    for regime in plan.regimes:
        if regime.name in skipped:
            why = skipped[regime.name]
            notes.append(
                f"not checked on the {regime.name} inputs ({regime.says}): they need other "
                f"sizes{', and ' + why if why else ''}"
            )
    return notes


def tolerance_notes(verdicts: Sequence[Verdict]) -> list[str]:
    """How the tolerances came about, once each. Where the outputs' tolerances came about in
    different ways, each line names the outputs it is for: two bare "tolerance: derived"
    lines would leave the reader to guess which is which."""
    ways: dict[str, list[str]] = {}
    for verdict in verdicts:
        if verdict.tolerance and not verdict.regime:
            ways.setdefault(verdict.tolerance, []).append(verdict.name)
    if len(ways) == 1:
        return [f"tolerance: {how}" for how in ways]
    return [f"tolerance of {', '.join(dict.fromkeys(names))}: {how}" for how, names in ways.items()]


def graph_notes(reply: CheckReply) -> list[str]:
    """Why the code's outputs were not judged as a ``tf.function`` graph: it ran eagerly, but
    tracing or calling it as a graph raised."""
    if not reply.graph_error:
        return []
    return [
        "not judged under tf.function, nor timed so: the code does not run as a graph "
        f"({reply.graph_error})"
    ]


def untraced(runs: Sequence[TimingResult], said: str = "") -> list[str]:
    """Why a run has no ``tf.function`` timing: the code ran eagerly but could not be traced;
    nothing for a run whose reason is ``said`` already (:func:`graph_notes`)."""
    notes = []
    for run in runs:
        if run.graph_error and run.graph_error != said and not run.label.startswith("sweep"):
            which = "" if run.label == "check" else f" ({run.label})"
            notes.append(
                f"no tf.function timing{which}: the code does not trace into a graph "
                f"({run.graph_error})"
            )
    return notes
