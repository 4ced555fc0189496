"""``compile_formula``: LaTeX as written -> a NumPy function, with a readable compiled form."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np

from formula_check.errors import capped
from formula_check.latex.errors import LatexError, NotExecutable
from formula_check.latex.grid import Output, scatter
from formula_check.latex.indices import alias_names, assigned, index_letters
from formula_check.latex.interpreter import Env, run
from formula_check.latex.ir import Call, Named, Op, describe, leaves
from formula_check.latex.limits import within_stack
from formula_check.latex.lower import Lowerer
from formula_check.latex.names import canonical_name
from formula_check.latex.nodes import Apply, Expr, Script, Statement, Tuple, Word
from formula_check.latex.parser import parse
from formula_check.latex.scope import Definition, Local, Locals, Scope
from formula_check.latex.shaped import check_result_shape, declared_shapes
from formula_check.latex.shapes import base
from formula_check.latex.symbols import SymbolTable
from formula_check.latex.where import as_local, lower_local, where_line
from formula_check.model import Array, frozen_map


@dataclass(frozen=True)
class CompiledFormula:
    """A formula as a function of named arrays; ``definition`` is set for ``Name(args) = ...``."""

    source: str
    outputs: tuple[Output, ...]
    where: tuple[Named, ...]
    """What the outputs use, each on a ``where`` line: families (``head_i``), then the
    statements other statements use (``\\mu``), in the order first used."""
    definition: Definition | None
    table: SymbolTable
    aliases: Mapping[str, str] = field(default_factory=frozen_map)
    """The sizes upper limits name (``@d`` of ``\\sum_{i=1}^{d}``), by the dim each is."""
    along: str = ""
    """When the formula was compiled along an oracle's ``axis`` (see :mod:`.along`), a line
    saying which dim its last axis was taken to be; the compiled form ends with it."""
    conditions: tuple[str, ...] = ()
    r"""Side conditions set aside (``\forall i``, see :mod:`.conditions`): the compiled form
    names each, so that the card says what was not read."""

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
        limits = {key: sizes[base(dim)] for key, dim in self.aliases.items() if base(dim) in sizes}
        env = Env(arrays, {**sizes, **limits})
        with np.errstate(all="ignore"):  # a wrong formula's NaN is its difference, not a warning
            return self._evaluate(env)

    def _evaluate(self, env: Env) -> Array | dict[str, Array]:
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
        lines += [f"where {where_line(named)} = {describe(named.body)}" for named in self.where]
        lines += [f"({self.along})"] if self.along else []
        lines += [f"(side condition set aside, not checked: {c})" for c in self.conditions]
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
        self,
        source: str,
        table: SymbolTable,
        definitions: Mapping[str, Definition],
        statements: tuple[Statement, ...],
    ) -> None:
        self.source = source
        self.table = table
        taken = table.names | set(table.indices)
        assignments: dict[str, Local] = {}
        self.assigning: dict[int, Local] = {}  # by the column its statement starts at
        for statement in statements:
            local = None if _family(statement, table) else as_local(statement, table, taken)
            if local is not None and local.name in assignments:
                raise LatexError("two statements assign the same name", source, statement.col)
            if local is not None:
                assignments[local.name] = self.assigning[statement.col] = local
        roots = (node for s in statements for node in (s.lhs, s.rhs) if node is not None)
        self.lowerer = Lowerer(
            Scope(
                source,
                table,
                frozen_map(definitions),
                locals=Locals(assignments),
                alias_names=alias_names(roots, taken | set(assignments)),
            )
        )
        self.definition: Definition | None = None

    def family(self, statement: Statement, name: str) -> Named:
        with self.lowerer.statement():
            body = assigned(self.lowerer, self.lowerer.lower(statement.rhs), (), statement.col)
        family = Named(name, body, None, body.type)
        self.lowerer.scope.families[name] = family
        return family

    def output(self, statement: Statement) -> Output:
        lhs, col = statement.lhs, statement.col
        local = self.assigning.get(col)
        if local is not None:
            written = ", ".join(w.text for w in local.indices)
            label = f"{local.label}[{written}]" if written else local.name
            return Output(local.name, label, lower_local(self.lowerer, local.name).body, col=col)
        if lhs is None:
            return Output("output", "", self.value(statement.rhs, None, col), col=col)
        if isinstance(lhs, Apply):
            return self.defined(lhs, None, statement)
        if isinstance(lhs, Script) and isinstance(lhs.base, Apply) and lhs.sup is None:
            letters = index_letters(lhs.sub, self.lowerer.taken()) if lhs.sub else None
            if letters:  # softmax(x)_i = ...
                return self.defined(lhs.base, letters, statement)
        if isinstance(lhs, Script) and isinstance(lhs.sub, Tuple):
            return self.indexed(lhs, statement)
        name = canonical_name(lhs)
        if name is None:
            raise self.lowerer.fail("cannot assign to this left-hand side", col)
        return Output(name, name, self.value(statement.rhs, None, col), col=col)

    def value(self, rhs: Expr, letters: tuple[Word, ...] | None, col: int) -> Op:
        """One statement's right side, its free indices given back their dims."""
        with self.lowerer.statement():
            return assigned(self.lowerer, self.lowerer.lower(rhs), letters, col)

    def defined(self, lhs: Apply, letters: tuple[Word, ...] | None, statement: Statement) -> Output:
        params = tuple(canonical_name(arg) or "" for arg in lhs.args)
        taken = self.lowerer.taken()
        for arg in lhs.args:  # \alpha(q, k_i): a function of one key at a time
            if isinstance(arg, Script) and arg.sub is not None and index_letters(arg.sub, taken):
                raise NotExecutable(
                    f"{lhs.func.text} of one element at a time ({canonical_name(arg)}) is "
                    "outside the executable subset: write it over whole tensors"
                )
        for param, arg in zip(params, lhs.args, strict=True):
            if param not in self.table.symbols:
                raise self.lowerer.fail(f"parameter {param or '?'} is not declared", arg.col)
        name = lhs.func.text
        if self.definition is None:
            where = tuple(self.lowerer.scope.locals.statements.values())
            self.definition = Definition(
                name, params, statement.rhs, self.table, self.source, where, letters
            )
        label = f"{name}({', '.join(params)})"
        label += f"[{', '.join(w.text for w in letters)}]" if letters else ""
        value = self.value(statement.rhs, letters, statement.col)
        return Output(name, label, value, col=statement.col)

    def indexed(self, lhs: Script, statement: Statement) -> Output:
        assert isinstance(lhs.sub, Tuple)
        name = canonical_name(lhs.base)
        dims = self.table.outputs.get(name or "")
        if name is None or dims is None:
            raise self.lowerer.fail("declare the output first, e.g. 'PE: output [n, d]'", lhs.col)
        if len(lhs.sub.items) != len(dims):
            raise self.lowerer.fail(f"{name} has {len(dims)} dims", lhs.sub.col)
        index = tuple(self.value(item, (), item.col) for item in lhs.sub.items)
        value = self.value(statement.rhs, (), statement.col)
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
    r"""Compile ``latex`` as written against ``symbols``.

    ``definitions`` are earlier blocks that define functions (``\text{Attention}(Q, K, V) =
    ...``), by name. Raises :class:`LatexError` (with a column) or :class:`NotExecutable`,
    also for a formula too long or too deep to compile (see :mod:`.limits`).
    """
    written = parse(latex)
    statements = tuple(s for s in written if not s.declares)
    if not statements:
        raise LatexError("the formula only states shapes: add what it computes", latex, 0)
    symbols = declared_shapes(written, symbols, latex)
    known = {name: f.definition for name, f in definitions.items() if f.definition is not None}
    compiler = _Compiler(latex, symbols, known, statements)
    with within_stack(latex):
        families = [
            compiler.family(s, name)
            for s in statements
            if (name := _family(s, symbols)) is not None
        ]
        outputs = tuple(compiler.output(s) for s in statements if _family(s, symbols) is None)
    locals_ = compiler.lowerer.scope.locals
    outputs = tuple(out for out in outputs if out.name not in locals_.used)
    _check_results(compiler, outputs, statements, (symbols, latex))
    where = tuple(locals_.lowered[name] for name in locals_.used)
    return CompiledFormula(
        latex,
        outputs,
        (*families, *where),
        compiler.definition,
        symbols,
        frozen_map(compiler.lowerer.scope.aliases),
        conditions=tuple(s.condition for s in written if s.condition),
    )


def _check_results(
    compiler: _Compiler,
    outputs: tuple[Output, ...],
    statements: tuple[Statement, ...],
    against: tuple[SymbolTable, str],
) -> None:
    """What the formula gives as its results (``outputs``, its intermediates left out):
    at least one, no name assigned twice, each of the shape its statement's left side says."""
    symbols, latex = against
    if not outputs:
        raise compiler.lowerer.fail(
            "the formula defines only the members of a family (such as head_i = ...) and no "
            "result made of them: add the statement that combines them, for instance "
            "MultiHead(Q, K, V) = Concat(head_1, ..., head_h) W^O",
            0,
        )
    seen = [out.name for out in outputs if not out.index]
    if len(seen) != len(set(seen)):
        raise compiler.lowerer.fail("two statements assign the same name", outputs[-1].col)
    for statement in statements:
        shown = [out for out in outputs if out.col == statement.col and not out.index]
        if shown:
            check_result_shape(statement, shown[0].op.type, symbols, latex)
