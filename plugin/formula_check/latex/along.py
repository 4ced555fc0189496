r"""An oracle's ``axis`` param, and the axis a formula's indices run along.

Index notation places an index by position only: ``x_i`` is x's last axis. The textbook
softmax, ``\text{softmax}(x)_i = e^{x_i} / \sum_j e^{x_j}``, is a function of a vector and
says nothing of which axis of a tensor that vector lies along; a block's ``axis=1`` says it.
So a formula none of whose indices ranges over the axis's dim is compiled with that dim moved
last in the symbols read from the oracle's input: its ``x_i`` then runs along the axis, as the
block's code and the oracle do, and the compiled form says so. A formula that indexes the dim
itself (``e^{x_{ij}} / \sum_k e^{x_{kj}}`` for axis 1 of ``(b, n, m)``) says where it sums
and is taken as written: if it sums elsewhere, it differs.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

import numpy as np

from formula_check.latex.compiler import CompiledFormula, compile_formula
from formula_check.latex.errors import LatexError
from formula_check.latex.ir import Relabel, walk
from formula_check.latex.shapes import base
from formula_check.latex.symbols import Symbol, SymbolTable
from formula_check.model import Array, frozen_map
from formula_check.oracles import Oracle


def axis_dim(oracle: Oracle, params: Mapping[str, Any]) -> str | None:
    """The dim of the oracle's first input that ``params["axis"]`` names, when it is not the
    last one (the axis index notation assumes); None otherwise."""
    axis = params.get("axis")
    if not oracle.inputs or isinstance(axis, bool) or not isinstance(axis, int):
        return None
    dims = oracle.inputs[0].dims
    if not -len(dims) <= axis < len(dims) or axis % len(dims) == len(dims) - 1:
        return None  # out of range: the oracle itself says so
    return dims[axis]


def indexed_dims(compiled: CompiledFormula) -> frozenset[str]:
    """The declared dims the formula's indices range over (``x_{ij}`` of ``(b, n, m)``:
    ``n`` and ``m``), inlined definitions included."""
    roots = [op for out in compiled.outputs for op in (out.op, *out.index)]
    return frozenset(
        base(before)
        for op in walk(*roots)
        if isinstance(op, Relabel) and op.element
        for before, after in zip(op.arg.type.dims, op.dims, strict=True)
        if before != after
    )


def moved_last(table: SymbolTable, key: str, dim: str) -> SymbolTable:
    """``table`` with ``dim`` made the last axis of every symbol read from array ``key``."""
    symbols = {name: _moved(symbol, key, dim) for name, symbol in table.symbols.items()}
    return dataclasses.replace(table, symbols=frozen_map(symbols))


def _moved(symbol: Symbol, key: str, dim: str) -> Symbol:
    if key not in symbol.keys or dim not in symbol.dims or symbol.dims[-1] == dim:
        return symbol
    at = symbol.dims.index(dim)
    dims = (*symbol.dims[:at], *symbol.dims[at + 1 :], dim)

    def load(arrays: Mapping[str, Array], sizes: Mapping[str, int]) -> Array:
        return np.moveaxis(symbol.load(arrays, sizes), at, -1)

    return dataclasses.replace(symbol, dims=dims, load=load)


def compile_along(
    latex: str,
    table: SymbolTable,
    definitions: Mapping[str, CompiledFormula],
    oracle: Oracle,
    params: Mapping[str, Any],
) -> CompiledFormula:
    """``latex`` compiled for ``oracle``: as written, or, when the oracle's ``axis`` param names
    a dim the formula's indices do not, along that dim (see the module docstring).

    A formula that compiles only as written (its sum's upper limit names the last dim) is
    taken as written; one that compiles neither way raises the error of the formula as
    written."""
    dim = axis_dim(oracle, params)
    if dim is None:
        return compile_formula(latex, table, definitions=definitions)
    moved = moved_last(table, oracle.inputs[0].name, dim)
    said = (
        f"along {dim}, the block's axis={params['axis']}, which the formula's indices do not name"
    )
    try:
        written = compile_formula(latex, table, definitions=definitions)
    except LatexError:
        along = _compiled(latex, moved, definitions)
        if along is None:
            raise
        return dataclasses.replace(along, along=said)
    if dim in indexed_dims(written):
        return written
    along = _compiled(latex, moved, definitions)
    return written if along is None else dataclasses.replace(along, along=said)


def _compiled(
    latex: str, table: SymbolTable, definitions: Mapping[str, CompiledFormula]
) -> CompiledFormula | None:
    try:
        return compile_formula(latex, table, definitions=definitions)
    except LatexError:
        return None
