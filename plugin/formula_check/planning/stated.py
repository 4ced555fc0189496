"""What a block states takes effect, or the block is an error: a size the oracle would
derive otherwise, an option with nothing to act on, an input a ``call=`` never passes.
Never silence: a value that would be ignored is named, with what to change."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from formula_check.errors import SpecError
from formula_check.model import Array, CheckSpec
from formula_check.oracles import Oracle
from formula_check.planning.calls import call_names
from formula_check.planning.option_values import spoken_call


def dims_as_stated(spec: CheckSpec, oracle: Oracle, sizes: Mapping[str, int]) -> None:
    """A size the block states is the size checked: an oracle that derives another (a
    multi-head ``depth`` is ``d_model / h``; self-attention's ``m`` is ``n``) is an error."""
    for dim, size in spec.dims.items():
        if dim in sizes and sizes[dim] != size:
            raise SpecError(
                f"dims: {dim}={size} cannot take effect: oracle {oracle.name!r} makes {dim} "
                f"{sizes[dim]} from the other sizes and parameters; drop {dim}= or change those",
                spec.location,
            )


def options_that_apply(spec: CheckSpec) -> None:
    """Options whose value would be ignored by this block: an error, never silence."""
    stated_mask = [
        f"{key}={value!r}"
        for key, value, unset in (
            ("mask_convention", spec.mask_convention, "additive"),
            ("mask_dims", spec.params.get("mask_dims"), None),
        )
        if value != unset
    ]
    if spec.mask == "none" and stated_mask:
        raise SpecError(
            f"{' and '.join(stated_mask)} cannot take effect: the block passes no mask "
            '(add mask="padding", "causal" or "both", here or in the page\'s defaults)',
            spec.location,
        )
    if spec.sweep_dim != "n" and not spec.sweep:
        raise SpecError(
            f"sweep_dim={spec.sweep_dim!r} cannot take effect without sweep= (the sizes to time "
            "at)",
            spec.location,
        )
    if spec.symbols and not spec.check_formula:
        raise SpecError(
            "symbols= cannot take effect: the formula check is off (formula=off), so no "
            "formula is compiled",
            spec.location,
        )


def inputs_the_call_passes(
    spec: CheckSpec, oracle: Oracle, inputs: Mapping[str, Array], *, has_mask: bool
) -> tuple[str, ...]:
    """Every oracle input must reach the code, and the block's mask too: a ``call=`` that
    leaves one out is an error, unless it passes another input holding the same numbers (a
    self-attention's ``q``, ``k`` and ``v``), which the card notes."""
    if spec.call is None:
        return ()
    named = call_names(spec.call)
    if has_mask and "mask" not in named:
        raise SpecError(
            f"call={spoken_call(spec.call)!r} never passes the block's mask ({spec.mask}), which "
            "the oracle applies: pass it, e.g. mask=mask",
            spec.location,
        )
    notes = []
    for tensor in oracle.inputs:
        if tensor.name in named:
            continue
        same = [
            other
            for other in sorted(named & set(inputs))
            if np.array_equal(inputs[other], inputs[tensor.name])
        ]
        if not same:
            raise SpecError(
                f"call={spoken_call(spec.call)!r} never passes {tensor.name!r}, an input of oracle "
                f"{oracle.name!r}: the code would compute without it",
                spec.location,
            )
        notes.append(
            f"call= passes no {tensor.name}: its values are {same[0]}'s in this check, which "
            "the code receives"
        )
    return tuple(notes)
