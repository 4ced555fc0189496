"""Default symbol tables for the builtin oracles: their canonical formulas need no declarations."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from formula_check.latex.compiler import CompiledFormula, compile_formula
from formula_check.latex.declarations import parse_symbols
from formula_check.latex.errors import EvaluationError
from formula_check.latex.symbols import (
    Symbol,
    SymbolTable,
    TableFunction,
    array_loader,
    constant_loader,
)
from formula_check.model import Array, frozen_map

_FFN = "x: [b, n, d_model]; W_1: [d_model, d_ff]; b_1: [d_ff]; W_2: [d_ff, d_model]; b_2: [d_model]"
_NORM = r"\gamma: [d_model] = gamma; \beta: [d_model] = beta"
_HEADS = "; ".join(
    f"W_i^{letter}: [d_model, depth] for i < h = W_{letter.lower()}" for letter in "QKV"
)

DECLARATIONS = {
    "attention": "Q: [b, n, d_k] = q; K: [b, m, d_k] = k; V: [b, m, d_v] = v\n"
    "M: [b, n, m] = additive(mask)",
    "multihead": "Q: [b, n, d_model] = q; K: [b, m, d_model] = k; V: [b, m, d_model] = v\n"
    f"{_HEADS}\nW^O: [d_model, d_model] = W_o; M: [b, n, m] = additive(mask)\n"
    "d_model = h * depth",
    "self_attention": "X: [b, n, d_model] = x; W_Q: [d_model, d_k] = W_q\n"
    "W_K: [d_model, d_k] = W_k; W_V: [d_model, d_v] = W_v; W_O: [d_v, d_model] = W_o\n"
    "M: [b, n, n] = additive(mask)",
    "positional_encoding": "pos: range(n); i: range(d_model / 2); PE: output [n, d_model]",
    "ffn": _FFN,
    "softmax": "x: [b, n, m]",
    "layer_norm": f"x: [b, n, d_model]; {_NORM}",
    # The linear oracle checks one projection: every W_* names it.
    "linear": "X: [b, n, d_model] = x; W_Q: [d_model, d_k] = W; W_K: [d_model, d_k] = W\n"
    "W_V: [d_model, d_k] = W",
    "sublayer": f"{_FFN}; {_NORM}",
    # Index notation: each query's features meet each key's, which matrix products cannot say.
    "additive_attention": "Q: [b, n, d_q] = q; K: [b, m, d_k] = k; V: [b, m, d_v] = v\n"
    "W_q: [d_q, h]; W_k: [d_k, h]; M: [b, n, m] = additive(mask)",
    "transformer_lr_schedule": "",
}
"""Author-style declarations for each builtin oracle, in :func:`parse_symbols` syntax."""

SUBLAYER = r"\text{Sublayer}(x) = \max(0, xW_1 + b_1)W_2 + b_2"
ATTENTION = r"\text{Attention}(Q, K, V) = \text{softmax}\left(\frac{QK^T}{\sqrt{d_k}} + M\right)V"


def _epsilon(params: Mapping[str, Any]) -> float:
    return float(params.get("epsilon", 1e-6))


def _moment(key: str, moment: str) -> Symbol:
    r"""``\mu`` or ``\sigma`` of ``arrays[key]`` over its last axis (biased, as Keras)."""
    whole = array_loader(key, ("b", "n", "d_model"))

    def load(arrays: Mapping[str, Array], sizes: Mapping[str, int]) -> Array:
        x = whole(arrays, sizes)
        result: Array = np.mean(x, axis=-1) if moment == "mu" else np.std(x, axis=-1)
        return result

    return Symbol(f"\\{moment}", ("b", "n"), 0, load, (key,), f"{moment}({key})")


def layer_norm_function(epsilon: float) -> TableFunction:
    """``LayerNorm`` over the last axis with the gain and shift read from gamma and beta."""

    def apply(x: Array, arrays: Mapping[str, Array]) -> Array:
        gamma, beta = arrays.get("gamma", 1.0), arrays.get("beta", 0.0)
        mean = np.mean(x, axis=-1, keepdims=True)
        spread = np.sqrt(np.var(x, axis=-1, keepdims=True) + epsilon)
        result: Array = np.asarray(gamma) * (x - mean) / spread + np.asarray(beta)
        return result

    return TableFunction("LayerNorm", apply, ("gamma", "beta"))


def _step_grid(name: str) -> Symbol:
    """The training steps as a grid of scalars: a schedule's formula raises them to powers
    and takes minima element by element, as it would of one step."""
    return Symbol(name, ("n",), 0, array_loader("step", ("n",)), ("step",), "step")


def _size(name: str) -> Symbol:
    """A size the formula names as a number (``warmup_steps``): no axis of any tensor has it,
    so it is no dim the table would read as its size by itself."""

    def load(arrays: Mapping[str, Array], sizes: Mapping[str, int]) -> Array:
        if name not in sizes:
            raise EvaluationError(f"no size named {name!r} was given")
        return np.asarray(float(sizes[name]))

    return Symbol(name, (), 0, load, (), name)


def _scoring_vector() -> Symbol:
    """``w_v``, ``(h)``: the scoring vector, read whether the code keeps it as a Dense kernel
    ``(h, 1)`` or as a vector."""

    def load(arrays: Mapping[str, Array], sizes: Mapping[str, int]) -> Array:
        if "w_v" not in arrays:
            raise EvaluationError("no array named 'w_v' was given")
        vector: Array = np.asarray(arrays["w_v"], dtype=np.float64).reshape(-1)
        return vector

    return Symbol("w_v", ("h",), 1, load, ("w_v",), "w_v")


def _one_pair() -> tuple[Symbol, Symbol]:
    """``q`` and ``k``: one query and one key, as a textbook scores a pair with column
    vectors (``w_v^T tanh(W_q q + W_k k)``); vectors, with the others as batch axes."""
    query, key = ("b", "n", "d_q"), ("b", "m", "d_k")
    return (
        Symbol("q", query, 1, array_loader("q", query), ("q",), "q"),
        Symbol("k", key, 1, array_loader("k", key), ("k",), "k"),
    )


def default_symbols(
    oracle_name: str, params: Mapping[str, Any] = frozen_map()
) -> SymbolTable | None:
    """The symbol table for a builtin oracle's formulas, or None for an unknown oracle."""
    if oracle_name not in DECLARATIONS:
        return None
    table = parse_symbols(DECLARATIONS[oracle_name])
    epsilon = Symbol("\\epsilon", (), 0, constant_loader(_epsilon(params)), (), "epsilon")
    varepsilon = Symbol("\\varepsilon", (), 0, epsilon.load, (), "epsilon")
    if oracle_name == "layer_norm":
        return table.extended(_moment("x", "mu"), _moment("x", "sigma"), epsilon, varepsilon)
    if oracle_name == "additive_attention":
        return table.extended(_scoring_vector(), *_one_pair())
    if oracle_name == "transformer_lr_schedule":
        sizes = (_size("d_model"), _size("warmup_steps"))
        return table.extended(_step_grid("step_num"), _step_grid("step"), *sizes)
    if oracle_name == "sublayer":  # epsilon too, for a page's LayerNorm written out in full
        function = layer_norm_function(_epsilon(params))
        return table.extended(epsilon, varepsilon, LayerNorm=function)
    return table


def default_definitions(
    oracle_name: str, params: Mapping[str, Any] = frozen_map()
) -> dict[str, CompiledFormula]:
    """Functions a builtin oracle's formula may call without an earlier block defining them."""
    if oracle_name == "multihead":
        attention = default_symbols("attention", params)
        assert attention is not None
        return {"Attention": compile_formula(ATTENTION, attention)}
    if oracle_name == "sublayer":
        table = default_symbols("sublayer", params)
        assert table is not None
        sublayer = compile_formula(SUBLAYER, table)
        return {"Sublayer": sublayer, "FFN": sublayer}
    return {}
