r"""Definitions split over several statements: ``\mu = …``, ``\sigma^2 = …``, then the result.

A statement that assigns a name (``\mu``, ``\sigma^2``, ``\alpha_{ij}``) is an intermediate
when another statement uses the name, and an output otherwise. Intermediates are lowered when
first used, in any order (``… \text{where} \mu = …`` works too), so they may use each other;
within its own right side a name means what the symbol table declares (``x = x + 1``).
"""

from __future__ import annotations

from collections.abc import Collection

from formula_check.latex.indices import assigned, index_letters
from formula_check.latex.ir import Named, Op, Relabel, subscript
from formula_check.latex.names import canonical_name
from formula_check.latex.nodes import Apply, Script, Statement, Word
from formula_check.latex.scope import Local, Lowering
from formula_check.latex.symbols import SymbolTable


def as_local(statement: Statement, table: SymbolTable, taken: Collection[str]) -> Local | None:
    """The assignment ``statement`` makes, or None for a definition, a cell of a declared
    output or a bare expression. ``y_i`` assigns ``y`` with index ``i`` unless ``y_i`` is a
    declared name."""
    lhs = statement.lhs
    if lhs is None or isinstance(lhs, Apply):
        return None
    if isinstance(lhs, Script) and isinstance(lhs.base, Word) and lhs.sup is None:
        letters = None if lhs.sub is None else index_letters(lhs.sub, taken)
        if letters and canonical_name(lhs) not in table.names:
            if lhs.base.text in table.outputs:
                return None
            return Local(lhs.base.text, letters, statement.rhs, statement.col)
    name = canonical_name(lhs)
    if name is None or name in table.outputs:
        return None
    return Local(name, (), statement.rhs, statement.col)


def lower_local(lowerer: Lowering, name: str) -> Named:
    """The value of assignment ``name`` (lowered on first use, then kept)."""
    found = lowerer.scope.locals
    if name not in found.lowered:
        local = found.statements[name]
        found.running.append(name)
        try:
            with lowerer.statement():
                value = lowerer.lower(local.rhs)
                value = assigned(lowerer, value, local.indices, local.col)
        finally:
            found.running.pop()
        found.lowered[name] = Named(local.label, value, None, value.type)
    return found.lowered[name]


def use_local(lowerer: Lowering, name: str) -> Op | None:
    """``name``'s assignment used by another statement, or None if nothing assigns it here."""
    found = lowerer.scope.locals
    if name not in found.visible():
        return None
    if name not in found.used:
        found.used.append(name)
    return lower_local(lowerer, name)


def where_line(named: Named) -> str:
    """``mu``, ``alpha[i, j]``: how an intermediate reads after ``where``."""
    body = named.body
    return named.label + (subscript(body) if isinstance(body, Relabel) else "")
