"""Syntax tree -> typed operations: names resolved, juxtapositions decided, definitions inlined."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager

from formula_check.latex.calls import call
from formula_check.latex.errors import LatexError, NotExecutable
from formula_check.latex.indices import ALIAS, element, index_letters, reduction
from formula_check.latex.ir import Binary as BinaryOp
from formula_check.latex.ir import Const, Leaf, Map, MatMul, Op, Size, Transpose
from formula_check.latex.names import (
    TRANSPOSE_MARKS,
    Reading,
    as_written,
    readings,
    script_text,
    spell,
    stuck_at,
)
from formula_check.latex.nodes import (
    Apply,
    BigOp,
    Binary,
    Dots,
    Expr,
    Neg,
    Num,
    Script,
    Tuple,
    Word,
)
from formula_check.latex.scope import Bindings, Scope
from formula_check.latex.shapes import (
    ShapeMismatch,
    Type,
    elementwise_type,
    matmul_type,
    transpose_type,
)
from formula_check.latex.where import use_local


class Lowerer:
    """Lowers expressions in one :class:`.scope.Scope`; every error carries a column.

    It is the :class:`.scope.Lowering` that index notation, assignments and calls use."""

    def __init__(self, scope: Scope) -> None:
        self.scope = scope
        self.bindings = Bindings()

    def nested(self, scope: Scope) -> Lowerer:
        return Lowerer(scope)

    @contextmanager
    def statement(self) -> Iterator[None]:
        """Lower one statement: its indices are its own."""
        outer, self.bindings = self.bindings, Bindings()
        try:
            yield
        finally:
            self.bindings = outer

    def fail(self, message: str, col: int) -> LatexError:
        return LatexError(self.scope.label + message, self.scope.source, col)

    def typed(self, rule: Callable[..., Type], col: int, *args: object) -> Type:
        try:
            return rule(*args)
        except ShapeMismatch as mismatch:
            raise self.fail(str(mismatch), col) from None

    def lower(self, node: Expr) -> Op:  # noqa: PLR0911  (one line per kind of syntax)
        match node:
            case Num(value=number):
                return Const(number)
            case Word():
                return self.name(node, None, None)
            case Script(base=Word(text="e", upright=False), sub=None, sup=sup) if (
                sup is not None and "e" not in self.vocabulary()
            ):
                power = self.lower(sup)
                return Map("exp", power, power.type)
            case Script(base=Word() as word, sub=sub, sup=sup):
                return self.name(word, sub, sup)
            case Script(base=inner, sub=None, sup=sup) if sup is not None:
                return self.superscript(self.lower(inner), sup, node.col)
            case Script(base=inner, sub=sub, sup=sup) if sub is not None and (
                letters := index_letters(sub, self.taken())
            ):
                value = element(self, self.lower(inner), letters, sub.col)
                return value if sup is None else self.superscript(value, sup, node.col)
            case BigOp():
                return reduction(self, node)
            case Apply():
                return self.apply(node)
            case Binary():
                return self.binary(node)
            case Neg(operand=operand):
                negated = self.lower(operand)
                return Map("neg", negated, negated.type)
            case Dots():
                raise self.fail("\\dots only stands in Concat(head_1, \\dots, head_h)", node.col)
            case Tuple():
                raise self.fail("a tuple only indexes an output, as in PE_{(pos, 2i)}", node.col)
        raise self.fail("only a name can have a subscript", node.col)

    # Names --------------------------------------------------------------------------------

    def vocabulary(self) -> frozenset[str]:
        scope = self.scope
        return (
            scope.table.names
            | set(scope.params)
            | set(scope.families)
            | scope.locals.visible()
            | scope.alias_names
        )

    def taken(self) -> frozenset[str]:
        """The letters that cannot be indices: names, and the indices of declared families."""
        return self.vocabulary() | set(self.scope.table.indices)

    def name(self, word: Word, sub: Expr | None, sup: Expr | None) -> Op:
        written = spell(word.text, script_text(sub), script_text(sup))
        exact = (sub is None or script_text(sub)) and (sup is None or script_text(sup))
        assignment = use_local(self, written) if exact else None
        if assignment is not None:  # \sigma^2 = ... makes \sigma^2 one name, not a power
            return assignment
        names = self.vocabulary()
        found = readings(word, sub, sup, names)
        letters = None if found or sub is None else index_letters(sub, self.taken())
        plain = readings(word, None, None, names) if letters else []
        if letters and len(plain) == 1:  # x_i: an element of x, x_i being no name of its own
            return self.product(word, plain[0], sup, letters)
        if len(found) > 1:
            options = " or ".join(" ".join(r.names) for r in found)
            raise self.fail(f"ambiguous name {written!r}: it reads as {options}", word.col)
        if not found:
            raise self.undeclared(word, sub, sup, names)
        return self.product(word, found[0], sup, None)

    def undeclared(
        self, word: Word, sub: Expr | None, sup: Expr | None, names: frozenset[str]
    ) -> LatexError:
        r"""The error for a name nobody declared, shown as written (``\alpha_{ij}``), with
        the declaration that fixes it: of the name itself, or of the tensor whose elements
        its indices read (``\alpha`` for ``\alpha_{ij}``)."""
        stuck = 0 if word.upright else stuck_at(word.text, names)
        stuck = 0 if stuck >= len(word.text) else stuck
        # A subscript is part of a name (d_q); a superscript may be an operator (X^T).
        sub_text = script_text(sub)
        sup_text = script_text(sup) if sub is not None else None
        base = word.text[stuck:]
        unknown = as_written(base, sub_text, sup_text, upright=word.upright)
        whole = as_written(word.text, script_text(sub), script_text(sup), upright=word.upright)
        where = f" in '{whole}'" if unknown != whole else ""
        hint = self.alias_hint(spell(base, sub_text, sup_text))
        if not hint and not word.upright:
            letters = index_letters(sub, self.taken()) if sub is not None else None
            tensor = f'symbols="{as_written(base, None, None)}: [axes] = array" if '
            if letters:
                verb = "indexes" if len(letters) == 1 else "index"
                tensor += f"{', '.join(w.text for w in letters)} {verb} it, else "
            hint = (
                f'; declare it: {tensor if letters else ""}symbols="{unknown}: [axes] = array" '
                "(its axes, and the oracle's array it reads)"
            )
        return self.fail(f"undeclared name '{unknown}'{where}{hint}", word.col + stuck)

    def alias_hint(self, unknown: str) -> str:
        """``; if it is d_k, declare it: symbols="d = d_k"`` for a ``d`` where dims ``d_k``
        exist, the short name papers write for a dim; otherwise nothing."""
        dims = sorted(d for d in self.scope.table.dims if d.startswith(f"{unknown}_"))
        if not dims:
            return ""
        return f'; if it is {" or ".join(dims)}, declare it: symbols="{unknown} = {dims[0]}"'

    def product(
        self, word: Word, reading: Reading, sup: Expr | None, letters: tuple[Word, ...] | None
    ) -> Op:
        """The names of ``reading`` multiplied; the last one indexed by ``letters`` (``ax_i``
        is ``a`` times ``x_i``), then raised or transposed when ``sup`` is not part of it."""
        values = [self.symbol(name, word.col) for name in reading.names]
        if letters:
            values[-1] = element(self, values[-1], letters, letters[0].col)
        if sup is not None and (letters or reading.transpose or reading.power):
            values[-1] = self.superscript(values[-1], sup, word.col)
        product = values[0]
        for value in values[1:]:
            product = self.juxtapose(product, value, word.col)
        return product

    def symbol(self, name: str, col: int) -> Op:
        scope = self.scope
        if name in scope.params:
            return scope.params[name]
        if name in scope.families:
            return scope.families[name]
        assignment = use_local(self, name)
        if assignment is not None:
            return assignment
        if name in scope.alias_names:
            return Size(name, ALIAS + name)
        if name not in scope.table.symbols:  # a dim, read as its size (d for d_k: an alias)
            dim = scope.table.dim_of(name)
            return Size(name, scope.renames.get(dim, dim))
        symbols = (scope.caller or scope.table).symbols
        if name not in symbols:
            raise self.fail(f"{name} is not a parameter, and the caller declares no {name}", col)
        symbol = symbols[name]
        return Leaf(symbol, Type(symbol.dims, symbol.core))

    def superscript(self, value: Op, sup: Expr, col: int) -> Op:
        if script_text(sup) in TRANSPOSE_MARKS:
            if value.type.core == 1:  # w^T x: a formula in column vectors, not a wrong one
                raise NotExecutable(
                    f"the transpose of a {value.type} is outside the executable "
                    "subset: column-vector products (w^T x, W x) are not compiled"
                )
            return Transpose(value, self.typed(transpose_type, col, value.type))
        if value.type.core:
            raise NotExecutable(f"a power of a {value.type} is outside the executable subset")
        return self.elementwise("^", value, self.lower(sup), col)

    # Operators ----------------------------------------------------------------------------

    def binary(self, node: Binary) -> Op:
        left, right = self.lower(node.left), self.lower(node.right)
        if node.op == "mul":
            return self.juxtapose(left, right, node.col)
        if node.op == "/" and right.type.core:
            raise self.fail(f"can only divide by a scalar, got {right.type}", node.col)
        return self.elementwise("*" if node.op == "odot" else node.op, left, right, node.col)

    def juxtapose(self, left: Op, right: Op, col: int) -> Op:
        """A matrix product between tensors; a scaling when either side is a scalar."""
        if left.type.core == 0 or right.type.core == 0:
            return self.elementwise("*", left, right, col)
        return MatMul(left, right, self.typed(matmul_type, col, left.type, right.type))

    def elementwise(self, op: str, left: Op, right: Op, col: int) -> Op:
        try:
            result, left_dims, right_dims = elementwise_type(left.type, right.type)
        except ShapeMismatch as mismatch:
            raise self.fail(str(mismatch), col) from None
        return BinaryOp(op, left, right, result, left_dims, right_dims)

    # Functions ----------------------------------------------------------------------------

    def apply(self, node: Apply) -> Op:
        return call(self, node)
