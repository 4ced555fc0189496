"""``compile_formula``: LaTeX as written -> a NumPy function, with a readable compiled form."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from ..errors import capped
from ..model import Array, frozen_map
from .evaluate import Env, run
from .grid import Output, scatter
from .ir import Call, Named, describe, leaves
from .limits import within_stack
from .lower import Definition, Lowerer, Scope
from .names import canonical_name
from .nodes import Apply, Script, Statement, Tuple, Word
from .parser import parse
from .symbols import SymbolTable


@dataclass(frozen=True)
class CompiledFormula:
    """A formula as a function of named arrays; ``definition`` is set for ``Name(args) = ...``."""

    source: str
    outputs: tuple[Output, ...]
    families: tuple[Named, ...]
    definition: Definition | None
    table: SymbolTable

    @property
    def output_dims(self) -> dict[str, tuple[str, ...]]:
        """Each output's dims, in the order :meth:`evaluate` returns its axes."""
        return {
            out.name: self.table.outputs[out.name] if out.index else out.op.type.dims
            for out in self.outputs
        }

    @property
    def keys(self) -> frozenset[str]:
        """The array keys the formula reads."""
        found = [leaf for out in self.outputs for op in (out.op, *out.index) for leaf in leaves(op)]
        return frozenset(
            key
            for leaf in found
            for key in (leaf.function.keys if isinstance(leaf, Call) else leaf.symbol.keys)
        )

    def evaluate(
        self, arrays: Mapping[str, Array], sizes: Mapping[str, int]
    ) -> Array | dict[str, Array]:
        """The formula's value; a dict by output name when it has several (``Q = ..., K = ...``)."""
        env = Env(arrays, sizes)
        grouped: dict[str, list[Output]] = {}
        for out in self.outputs:
            grouped.setdefault(out.name, []).append(out)
        results = {
            name: scatter(outs, self.table.outputs[name], env, self.source)
            if outs[0].index
            else run(outs[0].op, env)
            for name, outs in grouped.items()
        }
        return next(iter(results.values())) if len(results) == 1 else results

    def describe(self) -> str:
        """The compiled form, one statement a line: ``matmul(softmax(...), V)`` (capped)."""
        lines = [
            f"{out.label} = {describe(out.op)}" if out.label else describe(out.op)
            for out in self.outputs
        ]
        lines += [f"where {family.label} = {describe(family.body)}" for family in self.families]
        return capped("\n".join(lines))  # it is quoted on the card and in messages


def _family(statement: Statement, table: SymbolTable) -> str | None:
    """``head_i`` when ``statement`` defines a family member for a declared index ``i``."""
    lhs = statement.lhs
    if isinstance(lhs, Script) and isinstance(lhs.base, Word) and lhs.sup is None:
        name = canonical_name(lhs)
        if isinstance(lhs.sub, Word) and lhs.sub.text in table.indices and name:
            return name if name not in table.symbols else None
    return None


class _Compiler:
    def __init__(
        self, source: str, table: SymbolTable, definitions: Mapping[str, Definition]
    ) -> None:
        self.source = source
        self.table = table
        self.lowerer = Lowerer(Scope(source, table, frozen_map(definitions)))
        self.definition: Definition | None = None

    def family(self, statement: Statement, name: str) -> Named:
        body = self.lowerer.lower(statement.rhs)
        family = Named(name, body, None, body.type)
        self.lowerer.scope.families[name] = family
        return family

    def output(self, statement: Statement) -> Output:
        lhs, col = statement.lhs, statement.col
        if lhs is None:
            return Output("output", "", self.lowerer.lower(statement.rhs), col=col)
        if isinstance(lhs, Apply):
            return self.defined(lhs, statement)
        if isinstance(lhs, Script) and isinstance(lhs.sub, Tuple):
            return self.indexed(lhs, statement)
        name = canonical_name(lhs)
        if name is None:
            raise self.lowerer.fail("cannot assign to this left-hand side", col)
        return Output(name, name, self.lowerer.lower(statement.rhs), col=col)

    def defined(self, lhs: Apply, statement: Statement) -> Output:
        params = tuple(canonical_name(arg) or "" for arg in lhs.args)
        for param, arg in zip(params, lhs.args, strict=True):
            if param not in self.table.symbols:
                raise self.lowerer.fail(f"parameter {param or '?'} is not declared", arg.col)
        name = lhs.func.text
        if self.definition is None:
            self.definition = Definition(name, params, statement.rhs, self.table, self.source)
        label = f"{name}({', '.join(params)})"
        return Output(name, label, self.lowerer.lower(statement.rhs), col=statement.col)

    def indexed(self, lhs: Script, statement: Statement) -> Output:
        assert isinstance(lhs.sub, Tuple)
        name = canonical_name(lhs.base)
        dims = self.table.outputs.get(name or "")
        if name is None or dims is None:
            raise self.lowerer.fail("declare the output first, e.g. 'PE: output [n, d]'", lhs.col)
        if len(lhs.sub.items) != len(dims):
            raise self.lowerer.fail(f"{name} has {len(dims)} dims", lhs.sub.col)
        index = tuple(self.lowerer.lower(item) for item in lhs.sub.items)
        value = self.lowerer.lower(statement.rhs)
        for op, node in ((value, statement.rhs), *zip(index, lhs.sub.items, strict=True)):
            if op.type.core:
                raise self.lowerer.fail(f"a cell needs a scalar, got {op.type}", node.col)
        label = f"{name}[{', '.join(describe(op) for op in index)}]"
        return Output(name, label, value, index, statement.col)


def compile_formula(
    latex: str,
    symbols: SymbolTable,
    *,
    definitions: Mapping[str, CompiledFormula] = frozen_map(),
) -> CompiledFormula:
    """Compile ``latex`` as written against ``symbols``.

    ``definitions`` are earlier blocks that define functions (``\\text{Attention}(Q, K, V) =
    ...``), by name. Raises :class:`LatexError` (with a column) or :class:`NotExecutable`,
    also for a formula too long or too deep to compile (see :mod:`.limits`).
    """
    statements = parse(latex)
    known = {name: f.definition for name, f in definitions.items() if f.definition is not None}
    compiler = _Compiler(latex, symbols, known)
    with within_stack(latex):
        families = [
            compiler.family(s, name)
            for s in statements
            if (name := _family(s, symbols)) is not None
        ]
        outputs = tuple(compiler.output(s) for s in statements if _family(s, symbols) is None)
    if not outputs:
        raise compiler.lowerer.fail("the formula defines only family members", 0)
    seen = [out.name for out in outputs if not out.index]
    if len(seen) != len(set(seen)):
        raise compiler.lowerer.fail("two statements assign the same name", outputs[-1].col)
    return CompiledFormula(latex, outputs, tuple(families), compiler.definition, symbols)
