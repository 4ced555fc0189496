"""Static types of values: named dims, and how many trailing ones are matrix dims.

Leading dims broadcast by name (a batch ``b``, a family index ``i``); the ``core`` trailing
dims take part in matrix products. Juxtaposition is a matrix product between two tensors and
a scaling when either side is a scalar (or a grid of scalars, such as ``pos``).
A matrix product whose row and column dims share a name (``X X^T``) primes the column: ``n'``.
In index notation an index is an axis of its own, ``#i`` (see :mod:`.indices`), so values
broadcast by index as ``einsum`` does; no declared dim starts with ``#``.
"""

from __future__ import annotations

from dataclasses import dataclass


class ShapeMismatch(Exception):  # noqa: N818  (internal; the compiler adds the column)
    """Two operands whose dims do not fit the operation."""


@dataclass(frozen=True)
class Type:
    """A value's dims by name; the last ``core`` of them are its matrix (or vector) dims."""

    dims: tuple[str, ...]
    core: int

    @property
    def batch(self) -> tuple[str, ...]:
        return self.dims[: len(self.dims) - self.core]

    @property
    def core_dims(self) -> tuple[str, ...]:
        return self.dims[len(self.dims) - self.core :]

    def __str__(self) -> str:
        kind = {0: "scalar", 1: "vector", 2: "matrix"}[self.core]
        shown = ", ".join(d.removeprefix(INDEX) for d in self.dims)
        return f"{kind} ({shown})" if self.dims else kind


SCALAR = Type((), 0)
INDEX = "#"


def index_axis(letter: str) -> str:
    """The axis an index names: ``#i`` for ``i``."""
    return INDEX + letter


def is_index_axis(dim: str) -> bool:
    """Whether ``dim`` is an index's axis rather than a declared dim."""
    return dim.startswith(INDEX)


def base(dim: str) -> str:
    """``n`` for ``n'``: primes only keep a product's dims apart."""
    return dim.rstrip("'")


def _union(*groups: tuple[str, ...]) -> tuple[str, ...]:
    seen: list[str] = []
    for group in groups:
        seen += [d for d in group if d not in seen]
    return tuple(seen)


def fresh(dim: str, taken: tuple[str, ...]) -> str:
    """``dim``, primed until no dim in ``taken`` has its name."""
    while dim in taken:
        dim += "'"
    return dim


def matmul_type(left: Type, right: Type) -> Type:
    """``left @ right`` over the last two dims; the batch dims broadcast by name."""
    if left.core != 2 or right.core != 2:
        raise ShapeMismatch(f"a matrix product needs two matrices, got {left} and {right}")
    if base(left.dims[-1]) != base(right.dims[-2]):
        raise ShapeMismatch(
            f"cannot multiply {left} by {right}: {left.dims[-1]} does not match {right.dims[-2]}"
        )
    batch = _union(left.batch, right.batch)
    row = left.dims[-2]
    if row in batch or base(right.dims[-1]) in batch:
        raise ShapeMismatch(f"cannot multiply {left} by {right}: a dim is both batch and matrix")
    return Type((*batch, row, fresh(right.dims[-1], (*batch, row))), 2)


def elementwise_type(left: Type, right: Type) -> tuple[Type, tuple[str, ...], tuple[str, ...]]:
    """The result of ``left op right`` element by element, and each side's dims renamed into it.

    The shorter matrix part must be a suffix of the longer one (a bias ``(d_ff)`` adds to
    ``(n, d_ff)``); everything else broadcasts by name.
    """
    longer, shorter = (left, right) if left.core >= right.core else (right, left)
    core = longer.core_dims
    suffix = core[len(core) - shorter.core :]
    if [base(d) for d in suffix] != [base(d) for d in shorter.core_dims]:
        raise ShapeMismatch(f"cannot combine {left} with {right} element by element")
    batch = tuple(d for d in _union(left.batch, right.batch) if d not in core)
    result = Type((*batch, *core), longer.core)

    def renamed(side: Type) -> tuple[str, ...]:
        return (*side.batch, *core[len(core) - side.core :])

    return result, renamed(left), renamed(right)


def transpose_type(value: Type) -> Type:
    """The last two dims swapped."""
    if value.core != 2:
        raise ShapeMismatch(f"only a matrix can be transposed, got {value}")
    return Type((*value.batch, value.dims[-1], value.dims[-2]), 2)


def concat_type(value: Type, index: str, merged: str) -> Type:
    """The family index ``index`` folded into the last dim, which becomes ``merged``."""
    if index not in value.batch or value.core == 0:
        raise ShapeMismatch(f"the members do not vary with {index}: {value}")
    batch = tuple(d for d in value.batch if d != index)
    return Type((*batch, *value.core_dims[:-1], merged), value.core)
