"""Syntax tree -> typed operations: names resolved, juxtapositions decided, definitions inlined."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from ..model import frozen_map
from .errors import LatexError, NotExecutable
from .ir import Binary as BinaryOp
from .ir import Const, Leaf, Map, MatMul, Named, Op, Size, Transpose
from .names import TRANSPOSE_MARKS, readings, script_text, spell, stuck_at
from .nodes import Apply, Binary, Dots, Expr, Neg, Num, Script, Tuple, Word
from .shapes import (
    ShapeMismatch,
    Type,
    elementwise_type,
    matmul_type,
    transpose_type,
)
from .symbols import SymbolTable

UNARY = {
    "softmax": "softmax",
    "sqrt": "sqrt",
    "sin": "sin",
    "cos": "cos",
    "tan": "tan",
    "exp": "exp",
    "log": "log",
    "ln": "log",
    "tanh": "tanh",
    "relu": "relu",
}
ROW_WISE = frozenset({"softmax"})


@dataclass(frozen=True)
class Definition:
    """``Name(params) = body`` from an earlier block, inlined wherever ``Name(...)`` is called."""

    name: str
    params: tuple[str, ...]
    body: Expr
    table: SymbolTable
    source: str


@dataclass(frozen=True)
class Scope:
    """What names mean while lowering one formula, or one inlined definition's body."""

    source: str
    table: SymbolTable
    definitions: Mapping[str, Definition] = field(default_factory=frozen_map)
    families: dict[str, Named] = field(default_factory=dict)
    params: Mapping[str, Op] = field(default_factory=frozen_map)
    renames: Mapping[str, str] = field(default_factory=frozen_map)
    caller: SymbolTable | None = None
    label: str = ""


class Lowerer:
    """Lowers expressions in one :class:`Scope`; every error carries a column."""

    def __init__(self, scope: Scope) -> None:
        self.scope = scope

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
            case Script(base=Word() as word, sub=sub, sup=sup):
                return self.name(word, sub, sup)
            case Script(base=inner, sub=None, sup=sup) if sup is not None:
                return self.superscript(self.lower(inner), sup, node.col)
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
        return self.scope.table.names | set(self.scope.params) | set(self.scope.families)

    def name(self, word: Word, sub: Expr | None, sup: Expr | None) -> Op:
        names = self.vocabulary()
        found = readings(word, sub, sup, names)
        written = spell(word.text, script_text(sub), script_text(sup))
        if len(found) > 1:
            options = " or ".join(" ".join(r.names) for r in found)
            raise self.fail(f"ambiguous name {written!r}: it reads as {options}", word.col)
        if not found:
            stuck = 0 if word.upright else stuck_at(word.text, names)
            # A subscript is part of a name (d_q); a superscript may be an operator (X^T).
            unknown = (written if sub is not None else word.text)[stuck:]
            unknown = written if stuck >= len(word.text) else unknown
            where = f" in {written!r}" if unknown != written else ""
            raise self.fail(f"undeclared name {unknown!r}{where}", word.col + stuck)
        reading = found[0]
        values = [self.symbol(name, word.col) for name in reading.names]
        if reading.transpose or reading.power:
            assert sup is not None
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
        if name not in scope.table.symbols:
            return Size(name, scope.renames.get(name, name))
        symbols = (scope.caller or scope.table).symbols
        if name not in symbols:
            raise self.fail(f"{name} is not a parameter, and the caller declares no {name}", col)
        symbol = symbols[name]
        return Leaf(symbol, Type(symbol.dims, symbol.core))

    def superscript(self, value: Op, sup: Expr, col: int) -> Op:
        if script_text(sup) in TRANSPOSE_MARKS:
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
        from .calls import call

        return call(self, node)
