"""Run the compiled form with NumPy, float64, on arrays whose axes follow each value's dims."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

import numpy as np

from formula_check.latex.errors import EvaluationError
from formula_check.latex.ir import (
    Binary,
    Call,
    Concat,
    Const,
    Leaf,
    Map,
    MatMul,
    Named,
    Op,
    Reduce,
    Relabel,
    Size,
    Transpose,
)
from formula_check.latex.shapes import index_axis
from formula_check.model import Array


def _softmax(x: Array) -> Array:
    shifted = np.exp(x - np.max(x, axis=-1, keepdims=True))
    result: Array = shifted / np.sum(shifted, axis=-1, keepdims=True)
    return result


MAPS: dict[str, Callable[[Array], Array]] = {
    "neg": np.negative,
    "sqrt": np.sqrt,
    "sin": np.sin,
    "cos": np.cos,
    "tan": np.tan,
    "exp": np.exp,
    "log": np.log,
    "tanh": np.tanh,
    "relu": lambda x: np.maximum(0.0, x),
    "sigmoid": lambda x: 0.5 * (1.0 + np.tanh(0.5 * x)),  # exact, and no overflow warning
    "softmax": _softmax,
}
REDUCE: dict[str, Callable[..., Array]] = {
    "sum": np.sum,
    "prod": np.prod,
    "max": np.max,
    "min": np.min,
}
BINARY: dict[str, Callable[[Array, Array], Array]] = {
    "+": np.add,
    "-": np.subtract,
    "*": np.multiply,
    "/": np.divide,
    "^": np.power,
    "max": np.maximum,
    "min": np.minimum,
}


@dataclass(frozen=True)
class Env:
    """The arrays and dim sizes a formula runs on."""

    arrays: Mapping[str, Array]
    sizes: Mapping[str, int]


def arrange(array: Array, dims: tuple[str, ...], target: tuple[str, ...]) -> Array:
    """``array`` (axes named ``dims``) with its axes in ``target`` order, size 1 where absent."""
    order = [dims.index(d) for d in target if d in dims]
    moved = np.transpose(array, order)
    sizes = iter(moved.shape)
    return moved.reshape([next(sizes) if d in dims else 1 for d in target])


def run(op: Op, env: Env) -> Array:  # noqa: PLR0911, PLR0912  (one line per kind of operation)
    """The values of ``op``, axes in ``op.type.dims`` order."""
    match op:
        case Leaf(symbol=symbol):
            return symbol.load(env.arrays, env.sizes)
        case Size(dim=dim):
            if dim not in env.sizes:
                raise EvaluationError(f"no size was given for dim {dim}")
            return np.asarray(float(env.sizes[dim]))
        case Const(value=value):
            return np.asarray(value)
        case Map(fn=fn, arg=arg, axis=""):
            return MAPS[fn](run(arg, env))
        case Map(fn=fn, arg=arg, axis=axis):
            at = arg.type.dims.index(axis)
            return np.moveaxis(MAPS[fn](np.moveaxis(run(arg, env), at, -1)), -1, at)
        case Binary():
            left = arrange(run(op.left, env), op.left_dims, op.type.dims)
            return BINARY[op.op](left, arrange(run(op.right, env), op.right_dims, op.type.dims))
        case MatMul(left=left, right=right):
            batch = op.type.batch
            product: Array = np.matmul(
                arrange(run(left, env), left.type.dims, (*batch, *left.type.core_dims)),
                arrange(run(right, env), right.type.dims, (*batch, *right.type.core_dims)),
            )
            return product
        case Transpose(arg=arg):
            return np.swapaxes(run(arg, env), -1, -2)
        case Concat(arg=arg, index=index):
            return _concat(run(arg, env), arg.type.dims, index)
        case Call(function=function, arg=arg):
            return function.apply(run(arg, env), env.arrays)
        case Named(body=body):
            return run(body, env)
        case Relabel(arg=arg, dims=dims):
            return arrange(run(arg, env), dims, op.type.dims)
        case Reduce(fn=fn, arg=arg, index=index):
            return REDUCE[fn](run(arg, env), axis=arg.type.dims.index(index_axis(index)))
    raise AssertionError(op)  # pragma: no cover


def _concat(array: Array, dims: tuple[str, ...], index: str) -> Array:
    """Fold axis ``index`` into the last axis, the index varying slowest (head 1 first)."""
    rest = tuple(d for d in dims[:-1] if d != index)
    moved = arrange(array, dims, (*rest, index, dims[-1]))
    return moved.reshape((*moved.shape[:-2], -1))
