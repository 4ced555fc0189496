"""What the code returned, named: the oracle output each returned value is compared with
(in order, or by a returned dict's keys), the values under a call's prefix, how many it
returned, those it never returned, and heads folded into the batch axis.

Pure NumPy: runs in the build process, never touches TensorFlow.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from formula_check.checking.compare import squeeze_leading
from formula_check.checking.output_verdicts import (
    unfolded,
    unmatched,
)
from formula_check.model import Array
from formula_check.planning.plan import Plan, attribute_outputs
from formula_check.results import Verdict


def fold_notes(plan: Plan, names: Sequence[str], outputs: Sequence[Array]) -> list[str]:
    """Which outputs were read with their heads folded into the batch axis."""
    notes = []
    for name, actual in zip(names, outputs, strict=False):
        if not any(t.name == name for t in plan.oracle.outputs):
            continue
        tensor = plan.oracle.tensor(name)
        want = tensor.shape(plan.sizes)
        got = squeeze_leading(np.asarray(actual), len(want))
        if got.shape != want and unfolded(got, np.empty(want), tensor.dims).shape == want:
            first, second = tensor.dims[0], tensor.dims[1]
            notes.append(
                f"{name} came back as {got.shape}: its first axis read as ({first}, {second}) "
                f"= {want[:2]}, {first}-major (heads folded into the batch)"
            )
    return notes


def returned_values(
    plan: Plan, arrays: Mapping[str, Array], prefix: str, count: int
) -> list[Array | None]:
    """The code's first ``count`` returned values, then the outputs it keeps on the layer
    (``returns="output weights=attention_weights"``), on the arrays under ``prefix``."""
    returned = [arrays.get(f"{prefix}out/{i}") for i in range(count)]
    return returned + [arrays.get(f"{prefix}attr/{name}") for name in attribute_outputs(plan.spec)]


def unreturned(plan: Plan, names: Sequence[str], count: int) -> list[Verdict]:
    """``returns=`` names more values than the code returned: each missing one fails."""
    named = [word for word in plan.spec.returns or () if "=" not in word]
    return [
        unmatched(
            name,
            f"returns= names it as value {index + 1}, but the code returned only {count}",
        )
        for index, name in enumerate(named)
        if index >= count and name != "_"
    ]


def returned_count(arrays: Mapping[str, Array], prefix: str = "") -> int:
    """How many values the call whose arrays are under ``prefix`` returned."""
    start = f"{prefix}out/"
    return sum(1 for key in arrays if key.startswith(start) and key[len(start) :].isdigit())


def output_names(plan: Plan, count: int, keys: Sequence[str] | None = None) -> list[str]:
    """The oracle output each returned value is compared with. In a returned dict read by
    name (:func:`by_name`), a key naming an output is compared with it and one naming none
    is left out (a SavedModel signature's extra outputs, in whatever order they come back).
    Otherwise, and for a tuple or list, the values are compared in order with those wanted
    (``returns=``'s, else the oracle's)."""
    if by_name(plan, keys):
        wanted = wanted_names(plan)
        return [key if key in wanted else "_" for key in keys or ()]
    return declared(plan)[:count]


def declared(plan: Plan) -> list[str]:
    """``returns=``'s names of returned values (``_`` included), else the oracle's outputs."""
    named = plan.spec.returns
    if named is not None:
        return [word for word in named if "=" not in word]
    return [t.name for t in plan.oracle.outputs]


def wanted_names(plan: Plan) -> list[str]:
    """The outputs compared, by name: those declared, less the ``_`` left out."""
    return [name for name in declared(plan) if name != "_"]


def by_name(plan: Plan, keys: Sequence[str] | None) -> bool:
    """Whether a returned dict is read by name. With ``returns=``, when a key names one of
    its outputs (one it names that the dict lacks then fails, named); without, when a key
    names the oracle's first output, so a misspelt one (``{"Output": …}``) is read in order,
    never left out unchecked."""
    wanted = wanted_names(plan)
    if not keys or not wanted:
        return False
    if plan.spec.returns is not None:
        return bool(set(keys) & set(wanted))
    return wanted[0] in keys


def missing_keys(plan: Plan, keys: Sequence[str]) -> list[Verdict]:
    """A dict read by name that lacks an output ``returns=`` names: that output fails, named
    (without ``returns=``, code may return fewer outputs than the oracle has)."""
    if plan.spec.returns is None:
        return []
    return [
        unmatched(
            name,
            f"returns= names it, but the dict the code returned has no key {name!r} "
            f"(its keys: {', '.join(keys)})",
        )
        for name in wanted_names(plan)
        if name not in keys
    ]
