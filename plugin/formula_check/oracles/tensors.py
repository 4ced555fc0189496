"""Reading an oracle's arguments: tensor specs from short strings, arrays in the precision they
were given, the block's mask, choices among named values, positive sizes."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from formula_check.errors import OracleError
from formula_check.lazy import numpy as np  # imported on first use
from formula_check.model import Array
from formula_check.oracles.base import TensorSpec


def tensor(
    name: str, dims: str, description: str = "", *, default: float | None = None
) -> TensorSpec:
    """A TensorSpec from ``"b n d_k"``; giving ``default`` makes the weight optional."""
    return TensorSpec(
        name,
        tuple(dims.split()),
        description,
        optional=default is not None,
        default=0.0 if default is None else default,
    )


def given(arrays: Mapping[str, Array], spec: TensorSpec) -> Array:
    """The array for ``spec`` in the precision it was given (float64 for the reference,
    float32 for the rounding sample), or its default when an optional weight was left out."""
    if spec.name in arrays:
        value = np.asarray(arrays[spec.name])
        return value if value.dtype in (np.float32, np.float64) else value.astype(np.float64)
    if spec.optional:
        dtype = next((a.dtype for a in arrays.values() if a.dtype == np.float32), np.float64)
        return np.asarray(spec.default, dtype=dtype)
    raise OracleError(f"missing tensor {spec.name!r}")


def keep_mask(arrays: Mapping[str, Array]) -> Array | None:
    """The boolean keep mask (True = may attend), if the block asked for one."""
    mask = arrays.get("mask")
    return None if mask is None else np.asarray(mask, dtype=bool)


def choice(params: Mapping[str, Any], name: str, allowed: tuple[str, ...]) -> str:
    """Param ``name``: one of ``allowed`` (the first when unset), or an error naming them."""
    value = params.get(name, allowed[0])
    if value not in allowed:
        options = ", ".join(repr(a) for a in allowed)
        raise OracleError(f"param {name} must be one of {options}, got {value!r}")
    return str(value)


def positive_sizes(sizes: dict[str, int], params: Mapping[str, Any]) -> dict[str, int]:
    """Every dim must be a positive integer; the base of each oracle's ``derive``."""
    for name, size in sizes.items():
        if isinstance(size, bool) or not isinstance(size, int | np.integer) or size < 1:
            raise OracleError(f"dim {name} must be a positive integer, got {size!r}")
    return {name: int(size) for name, size in sizes.items()}


X = tensor("x", "b n d_model")
"""The activations most layers take: one sequence of ``d_model``-wide positions."""
