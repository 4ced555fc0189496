"""The compiled form: typed operations on named-dim arrays, and their readable description."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TypeGuard, get_args

from formula_check.latex.shapes import INDEX, SCALAR, Type, base
from formula_check.latex.symbols import Symbol, TableFunction


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
    """An element-wise function (``sqrt``, ``sin``, ``neg``), or ``softmax`` over the last dim,
    or over ``axis`` when a subscript names one (``softmax_k``)."""

    fn: str
    arg: Op
    type: Type
    axis: str = ""


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


@dataclass(frozen=True)
class Relabel:
    """Index notation's renaming: ``x_i`` names x's last axis ``#i`` (``element``); ``y_i = …``
    gives each index axis back the dim it ranged over, last, in the left side's order.
    ``dims`` are ``arg``'s dims renamed, in ``arg``'s axis order."""

    arg: Op
    indices: tuple[str, ...]
    dims: tuple[str, ...]
    type: Type
    element: bool


@dataclass(frozen=True)
class Reduce:
    r"""``\sum_j``, ``\prod_j``, ``\max_j``, ``\min_j``: the axis of index ``index`` reduced."""

    fn: str
    arg: Op
    index: str
    type: Type


Op = (
    Leaf
    | Size
    | Const
    | Map
    | Binary
    | MatMul
    | Transpose
    | Concat
    | Call
    | Named
    | Relabel
    | Reduce
)


def is_op(value: object) -> TypeGuard[Op]:
    """Whether ``value`` is one of the operations above."""
    return isinstance(value, get_args(Op))


def walk(*roots: Op) -> Iterator[Op]:
    """Every operation under ``roots``, inlined bodies included. Each operation's fields are
    walked, so a kind of operation added later is walked too."""
    stack = list(roots)
    while stack:
        op = stack.pop()
        yield op
        for part in dataclasses.fields(op):
            value = getattr(op, part.name)
            stack += [v for v in (value if isinstance(value, tuple) else (value,)) if is_op(v)]


INFIX = {"+": 1, "-": 1, "*": 2, "/": 2, "^": 3}


def _number(value: float) -> str:
    return str(int(value)) if value.is_integer() and abs(value) < 1e15 else repr(value)


def _operand(op: Op, parent: int, right: bool, parent_op: str = "") -> str:
    """``op`` as an operand of ``parent_op`` (binding as ``parent``), in parentheses when it
    would otherwise read differently: ``a - (b + c)``, ``a / (b * c)``, ``(a ^ b) ^ c``."""
    text = describe(op)
    if isinstance(op, Binary) and op.op in INFIX:
        level = INFIX[op.op]
        regrouped = (right and parent_op in ("-", "/")) or (not right and parent_op == "^")
        if level < parent or (level == parent and regrouped):
            return f"({text})"
    if isinstance(op, Map) and op.fn == "neg":
        return f"({text})"
    return text


def subscript(op: Relabel) -> str:
    """``[..., i, j]``: the indices after the dims they leave alone."""
    rest = len(op.type.dims) - len(op.indices) if op.element else 0
    return f"[{'..., ' if rest else ''}{', '.join(op.indices)}]"


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
        case Map(fn=fn, arg=arg, axis=axis):
            along = f"_{base(axis).removeprefix(INDEX)}" if axis else ""
            return f"{fn}{along}({describe(arg)})"
        case Binary(op="max" | "min", left=left, right=right):
            return f"{op.op}({describe(left)}, {describe(right)})"
        case Binary(op=symbol, left=left, right=right):
            level = INFIX[symbol]
            left_text = _operand(left, level, False, symbol)
            return f"{left_text} {symbol} {_operand(right, level, True, symbol)}"
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
        case Relabel(arg=arg, element=True):
            return f"{_operand(arg, 4, right=False)}{subscript(op)}"
        case Relabel(arg=arg):
            return describe(arg)
        case Reduce(fn=fn, arg=arg, index=index):
            return f"{fn}_{index}({describe(arg)})"
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
        case (
            Map(arg=arg) | Transpose(arg=arg) | Concat(arg=arg) | Relabel(arg=arg) | Reduce(arg=arg)
        ):
            return leaves(arg)
        case Named(body=body):
            return leaves(body)
    raise AssertionError(op)  # pragma: no cover
