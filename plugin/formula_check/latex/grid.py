"""Outputs assigned cell by cell (``PE_{(pos, 2i)} = ...``): every cell exactly once."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from formula_check.latex.errors import EvaluationError, LatexError
from formula_check.latex.interpreter import Env, arrange, run
from formula_check.latex.ir import Op, describe
from formula_check.latex.shapes import base
from formula_check.model import Array


@dataclass(frozen=True)
class Output:
    """One statement's value. ``index`` is set for a cell-by-cell output; ``col`` is its lhs."""

    name: str
    label: str
    op: Op
    index: tuple[Op, ...] = ()
    col: int = 0


def _cells(out: Output, shape: tuple[int, ...], env: Env, source: str) -> tuple[Array, Array]:
    """The values of ``out`` and the integer cells they go to, over the whole index grid."""
    parts = (out.op, *out.index)
    common: list[str] = []
    for part in parts:
        common += [d for d in part.type.dims if d not in common]
    value, *index = np.broadcast_arrays(
        *(arrange(run(part, env), part.type.dims, tuple(common)) for part in parts)
    )
    cells = []
    for axis, (values, op) in enumerate(zip(index, out.index, strict=True)):
        rounded = np.rint(values)
        if not np.array_equal(values, rounded) or rounded.min() < 0 or rounded.max() >= shape[axis]:
            message = f"index {describe(op)} of {out.name} leaves 0 .. {shape[axis] - 1}"
            raise LatexError(message, source, out.col)
        cells.append(rounded.astype(np.intp))
    return value, np.stack(cells)


def scatter(outputs: Sequence[Output], dims: tuple[str, ...], env: Env, source: str) -> Array:
    """The output ``outputs`` assign cell by cell; each cell must be covered exactly once."""
    missing = [d for d in map(base, dims) if d not in env.sizes]
    if missing:
        raise EvaluationError(f"no size was given for dim {missing[0]}")
    shape = tuple(env.sizes[base(d)] for d in dims)
    result, hits = np.zeros(shape), np.zeros(shape, dtype=np.int64)
    for out in outputs:
        value, cells = _cells(out, shape, env, source)
        np.add.at(hits, tuple(cells), 1)
        result[tuple(cells)] = value
        if hits.max() > 1:
            cell = tuple(int(c) for c in np.argwhere(hits > 1)[0])
            raise LatexError(
                f"the formula gives {out.name} at {cell} more than one value: its statements "
                "together must give each element exactly one (for instance one for even "
                "columns, 2i, and one for odd ones, 2i+1)",
                source,
                out.col,
            )
    if hits.min() == 0:
        cell = tuple(int(c) for c in np.argwhere(hits == 0)[0])
        message = (
            f"the formula gives {outputs[0].name} no value at {cell}: its statements together "
            "must give each element exactly one (for instance one for even columns, 2i, and one "
            "for odd ones, 2i+1)"
        )
        raise LatexError(message, source, outputs[0].col)
    return result
