r"""Shapes stated in the formula: ``\mathbf{Q} \in \mathbb{R}^{n \times d}``.

A statement that only gives a name's shape is a declaration, not a computation. It is read
against the symbol table like ``symbols=``: each dim written over a declared symbol's last
axes either is that axis's dim (``n``), or names it for the rest of the formula (``d`` for
``d_k``, so that ``\sqrt{d}`` is ``\sqrt{d_k}``). A written dim that is another known dim is
an error: the formula says the tensor has a shape it does not have. A shape after a result
(``… V \in \mathbb{R}^{n \times d_v}``) is checked against the result's dims in the same way.
Batch axes are not written: a shape gives the last axes only.
"""

from __future__ import annotations

from dataclasses import replace

from formula_check.latex.errors import LatexError
from formula_check.latex.names import canonical_name
from formula_check.latex.nodes import Expr, Num, Statement
from formula_check.latex.shapes import Type, base, is_index_axis
from formula_check.latex.symbols import SymbolTable
from formula_check.model import frozen_map


def _written(dim: Expr, source: str) -> str | None:
    """The dim's name, or None for a number (a size the check does not name)."""
    if isinstance(dim, Num):
        return None
    name = canonical_name(dim)
    if name is None:
        raise LatexError(r"a shape is dims separated by \times, as in n \times d", source, dim.col)
    return name


def _match(
    shape: tuple[Expr, ...], dims: tuple[str, ...], what: str, table: SymbolTable, source: str
) -> dict[str, str]:
    """The new names ``shape`` gives ``dims`` (its last axes); an error where they clash."""
    named = [d for d in dims if not is_index_axis(d)]
    if len(shape) > len(named):
        shown = ", ".join(named)
        message = f"{what} has {len(named)} axes ({shown}), the formula gives it {len(shape)}"
        raise LatexError(message, source, shape[0].col if shape else 0)
    learned: dict[str, str] = {}
    for dim, axis in zip(shape, named[len(named) - len(shape) :], strict=True):
        name = _written(dim, source)
        if name is None:
            continue
        meant = base(learned.get(name, table.dim_of(name)))
        if meant == base(axis):
            continue
        if name in table.names or name in learned:
            message = f"{what} is ({', '.join(named)}): its axis {axis} is not {name}"
            raise LatexError(message, source, dim.col)
        learned[name] = base(axis)
    return learned


def declared_shapes(
    statements: tuple[Statement, ...], table: SymbolTable, source: str
) -> SymbolTable:
    """``table`` with the names that the shape declarations among ``statements`` give dims;
    a declaration of a name the table does not hold says nothing the check can use."""
    learned: dict[str, str] = {}
    for statement in statements:
        name = canonical_name(statement.rhs) if statement.declares else None
        symbol = table.symbols.get(name or "")
        if symbol is None or statement.shape is None:
            continue
        current = replace(table, aliases=frozen_map({**table.aliases, **learned}))
        learned |= _match(statement.shape, symbol.dims, symbol.name, current, source)
    return replace(table, aliases=frozen_map({**table.aliases, **learned})) if learned else table


def check_result_shape(statement: Statement, result: Type, table: SymbolTable, source: str) -> None:
    """An error if the shape written after ``statement``'s result is not the result's."""
    if statement.shape is not None:
        _match(statement.shape, result.dims, "the result", table, source)
