"""The weights the oracle computes with: the generated ones a function was given, or the
layer's own, read back by the weight map and fitted to the oracle's shapes; and the
parameters the map reads from the layer (its ``epsilon``), checked against the formula's.
Pure NumPy, part of judging a reply (:mod:`..evaluate`)."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from formula_check.errors import SpecError
from formula_check.messages import CheckReply
from formula_check.model import Array, Location
from formula_check.oracles import Oracle
from formula_check.planning.plan import Plan
from formula_check.results import Verdict


def oracle_weights(
    plan: Plan, reply: CheckReply, arrays: Mapping[str, Array]
) -> tuple[dict[str, Array], dict[str, Any]]:
    """Weights the oracle uses: generated ones for functions, the layer's own otherwise; and
    the parameters the weight map read from the layer."""
    spec = plan.spec
    if reply.kind == "function":
        if spec.weights and spec.states("weights"):  # a page's default serves its layer blocks
            raise SpecError(
                "weights: a weight map says where a layer keeps its weights, but this code is "
                "a function: it is given the weights as arguments, so drop weights=",
                spec.location,
            )
        return dict(plan.weights), {}
    read = {key[2:]: value for key, value in arrays.items() if key.startswith("w/")}
    declared = {t.name: t for t in plan.oracle.weights}
    weights: dict[str, Array] = {}
    scalars: dict[str, float] = {}
    for name, value in read.items():  # in the map's order: its first problem is the one said
        if name in declared:
            shape = declared[name].shape(plan.sizes)
            weights[name] = _fit(name, np.asarray(value, dtype=np.float64), shape, spec.location)
        else:
            scalars[name] = _parameter(plan, name, value)
    _default_the_rest(plan, weights, described(reply.unmapped_weights))
    return weights, scalars


def _parameter(plan: Plan, name: str, value: Array) -> float:
    """A parameter of the oracle the weight map read from the layer: a number, or an error."""
    oracle, spec = plan.oracle, plan.spec
    if name not in plan.params:
        raise SpecError(
            f"weights: {name!r} is not a weight or parameter of oracle {oracle.name!r}",
            spec.location,
        )
    stated = plan.params[name]
    number = np.ndim(value) == 0 and np.asarray(value).dtype.kind in "iuf"
    if not number or isinstance(stated, (str, bool)):
        raise SpecError(
            f"weights: {name!r} is a parameter of oracle {oracle.name!r}; only a "
            "number can be read from the layer and checked against the formula's (the "
            f"layer's is {_kind_of(value)}, the formula's {stated!r})",
            spec.location,
        )
    return float(value)


def _default_the_rest(plan: Plan, weights: dict[str, Array], unmapped: str) -> None:
    """Give the oracle's optional weights the layer does not map their defaults, in place; an
    error for a needed one, or where the layer has weights the map does not name (the code
    may apply those instead: no one can tell)."""
    oracle, spec = plan.oracle, plan.spec
    defaulted = []
    for tensor in oracle.weights:
        if tensor.name not in weights:
            if not tensor.optional:
                raise SpecError(
                    f"weights: the layer's {tensor.name!r} is needed by oracle {oracle.name!r}; "
                    f'map it, e.g. weights="{tensor.name}=attribute.path"',
                    spec.location,
                )
            weights[tensor.name] = np.full(tensor.shape(plan.sizes), tensor.default)
            defaulted.append(f"{tensor.name} = {tensor.default:g}")
    if defaulted and unmapped:
        raise SpecError(
            f"weights: the layer has trainable weights the weight map does not name "
            f"({unmapped}), and oracle {oracle.name!r} took its own {', '.join(defaulted)} in "
            "their place, so the check cannot tell whether the code applies them: map them, "
            f'e.g. weights="{_map_example(oracle)}"',
            spec.location,
        )


def _kind_of(value: Array) -> str:
    array = np.asarray(value)
    return f"an array of shape {array.shape}" if array.ndim else f"a {array.dtype.name} value"


def described(unmapped: Sequence[Sequence[Any]]) -> str:
    """Weights as a note lists them: ``name (shape)``, comma-separated."""
    return ", ".join(f"{name} {tuple(shape)}" for name, shape in unmapped)


def _map_example(oracle: Oracle) -> str:
    """``gamma=attribute.path beta=attribute.path``: a map naming each of the oracle's weights."""
    return " ".join(f"{t.name}=attribute.path" for t in oracle.weights)


def param_check(plan: Plan, name: str, value: float) -> tuple[Verdict | None, str]:
    """A parameter the weight map reads from the layer (its ``epsilon``) is checked against
    the formula's, the page's ``params=`` or the oracle's default; it never replaces it, or a
    layer built with the wrong constant would verify itself. A failing verdict, or a note."""
    stated = float(plan.params[name])
    source = "params=" if name in plan.spec.params else "the oracle's default"
    if math.isclose(value, stated, rel_tol=1e-5, abs_tol=0.0):
        return None, f"{name} read from the layer: {value:g}, as the formula says ({source})"
    return Verdict(
        name=name,
        ok=False,
        dims=(),
        expected_shape=(),
        actual_shape=(),
        problem=f"the layer's {name} is {value:g}, the formula's {stated:g} ({source})",
    ), ""


def _fit(name: str, value: Array, shape: tuple[int, ...], where: Location) -> Array:
    if value.shape == shape:
        return value
    if value.ndim != len(shape) and value.size == int(np.prod(shape)):
        return value.reshape(shape)  # per-head kernels -> concatenated heads
    raise SpecError(f"weights: {name} has shape {value.shape}, the oracle expects {shape}", where)


def unused_verdict(plan: Plan, name: str) -> Verdict:
    """A mapped weight whose layer the code never called: the formula uses it, the code not."""
    path = plan.spec.weights.get(name, "?")
    tensor = plan.oracle.tensor(name)
    return Verdict(
        name=name,
        ok=False,
        dims=tensor.dims,
        expected_shape=tensor.shape(plan.sizes),
        actual_shape=(),
        problem=f"the formula uses {name} but the code never calls the layer holding {path}",
    )


def unmoved_notes(plan: Plan, reply: CheckReply, weights: Mapping[str, Array]) -> list[str]:
    """The mapped weights the check could not move off their stored values, named on the
    card. One that holds only zeros or only ones is an error at the block: a term that left
    it out would give the same numbers, so the block cannot be verified."""
    if not reply.unmoved_weights or not plan.spec.perturb_weights:
        return []
    named = "; ".join(f"{name} ({where})" for name, where in reply.unmoved_weights)
    plain = [
        name
        for name, _ in reply.unmoved_weights
        if name in weights and _vanishing(np.asarray(weights[name]))
    ]
    if plain:
        raise SpecError(
            f"weights: {', '.join(plain)} could not be moved before the check ({named}), and "
            "hold only zeros or only ones, so code that leaves their terms out would give the "
            "same numbers: keep each in a tf.Variable held by an attribute that can be set (a "
            "graph reads a variable whenever it runs), or give it values of its own",
            plan.spec.location,
        )
    return [f"weights at their stored values, not moved: {named}"]


def _vanishing(value: Array) -> bool:
    """Only zeros or only ones: a bias or a gain that a forgotten term would not change."""
    return bool(value.size) and (bool(np.all(value == 0)) or bool(np.all(value == 1)))
