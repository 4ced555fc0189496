"""The compiled form: typed operations on named-dim arrays, and their readable description."""

from __future__ import annotations

from dataclasses import dataclass

from .shapes import SCALAR, Type
from .symbols import Symbol, TableFunction


@dataclass(frozen=True)
class Leaf:
    """A declared symbol's values."""

    symbol: Symbol
    type: Type


@dataclass(frozen=True)
class Size:
    """The size of a named dim, as a number (``d_k``)."""

    label: str
    dim: str
    type: Type = SCALAR


@dataclass(frozen=True)
class Const:
    """A number written in the formula."""

    value: float
    type: Type = SCALAR


@dataclass(frozen=True)
class Map:
    """An element-wise function (``sqrt``, ``sin``, ``neg``), or ``softmax`` over the last dim."""

    fn: str
    arg: Op
    type: Type


@dataclass(frozen=True)
class Binary:
    """An element-wise ``+ - * / ^ max``; each side's dims renamed into the result's."""

    op: str
    left: Op
    right: Op
    type: Type
    left_dims: tuple[str, ...]
    right_dims: tuple[str, ...]


@dataclass(frozen=True)
class MatMul:
    """A matrix product over the last two dims."""

    left: Op
    right: Op
    type: Type


@dataclass(frozen=True)
class Transpose:
    """The last two dims swapped."""

    arg: Op
    type: Type


@dataclass(frozen=True)
class Concat:
    """A family's members side by side along the last dim (``Concat(head_1, ..., head_h)``)."""

    arg: Op
    index: str
    type: Type


@dataclass(frozen=True)
class Call:
    """A table function that keeps its argument's shape (``LayerNorm``)."""

    function: TableFunction
    arg: Op
    type: Type


@dataclass(frozen=True)
class Named:
    """A named piece: an inlined definition (``Attention(...)``) or a family (``head_i``)."""

    label: str
    body: Op
    args: tuple[Op, ...] | None
    type: Type


Op = Leaf | Size | Const | Map | Binary | MatMul | Transpose | Concat | Call | Named

INFIX = {"+": 1, "-": 1, "*": 2, "/": 2, "^": 3}


def _number(value: float) -> str:
    return str(int(value)) if value.is_integer() and abs(value) < 1e15 else repr(value)


def _operand(op: Op, parent: int, right: bool) -> str:
    text = describe(op)
    if isinstance(op, Binary) and op.op in INFIX:
        level = INFIX[op.op]
        if level < parent or (right and level == parent and op.op in "-/^"):
            return f"({text})"
    if isinstance(op, Map) and op.fn == "neg":
        return f"({text})"
    return text


def describe(op: Op) -> str:  # noqa: PLR0911, PLR0912  (one line per kind of operation)
    """``matmul(softmax(matmul(Q, transpose(K)) / sqrt(d_k)), V)``."""
    match op:
        case Leaf(symbol=symbol):
            return symbol.name.lstrip("\\")
        case Size(label=label):
            return label
        case Const(value=value):
            return _number(value)
        case Map(fn="neg", arg=arg):
            return f"-{_operand(arg, 3, right=True)}"
        case Map(fn=fn, arg=arg):
            return f"{fn}({describe(arg)})"
        case Binary(op="max" | "min", left=left, right=right):
            return f"{op.op}({describe(left)}, {describe(right)})"
        case Binary(op=symbol, left=left, right=right):
            level = INFIX[symbol]
            return f"{_operand(left, level, False)} {symbol} {_operand(right, level, True)}"
        case MatMul(left=left, right=right):
            return f"matmul({describe(left)}, {describe(right)})"
        case Transpose(arg=arg):
            return f"transpose({describe(arg)})"
        case Concat(arg=arg, index=index):
            return f"concat({describe(arg)} for each {index})"
        case Call(function=function, arg=arg):
            return f"{function.name}({describe(arg)})"
        case Named(label=label, args=None):
            return label
        case Named(label=label, args=args):
            return f"{label}({', '.join(describe(a) for a in args or ())})"
    raise AssertionError(op)  # pragma: no cover


def leaves(op: Op) -> list[Leaf | Call]:
    """Every symbol and table function ``op`` reads, for the array keys it needs."""
    match op:
        case Leaf() | Size() | Const():
            return [op] if isinstance(op, Leaf) else []
        case Binary(left=left, right=right) | MatMul(left=left, right=right):
            return leaves(left) + leaves(right)
        case Call(arg=arg):
            return [op, *leaves(arg)]
        case Map(arg=arg) | Transpose(arg=arg) | Concat(arg=arg):
            return leaves(arg)
        case Named(body=body):
            return leaves(body)
    raise AssertionError(op)  # pragma: no cover
