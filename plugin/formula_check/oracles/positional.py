"""Positional oracles: the sinusoidal encoding, and the layers that give an input its
positions (an encoding added to activations, token embeddings plus a sinusoidal or a learned
position table)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from formula_check.errors import OracleError
from formula_check.lazy import numpy as np  # imported on first use
from formula_check.model import Array
from formula_check.oracles.base import Oracle, Regime
from formula_check.oracles.numerics import positional_encoding, second_way
from formula_check.oracles.regimes import FAR
from formula_check.oracles.tensors import X, choice, given, positive_sizes, tensor
from formula_check.oracles.tolerance import DTYPE_PARAM

LAYOUTS = ("interleaved", "halves")
"""Where the sines and cosines go: ``interleaved`` (the paper's: sines in even columns,
cosines in odd ones) or ``halves`` (every sine first, then every cosine: the TensorFlow
tutorial's ``concatenate([sin, cos])``)."""

# positional_encoding ------------------------------------------------------------------------


def _encoding(n: int, params: Mapping[str, Any], dtype: Any) -> Array:
    """The ``(n, d_model)`` encoding the block's params describe, in ``dtype``."""
    return positional_encoding(
        n,
        int(params["d_model"]),
        float(params.get("base", 10000.0)),
        dtype,
        through_exp=second_way(params),
        layout=choice(params, "layout", LAYOUTS),
    )


def _positional_encoding(
    arrays: Mapping[str, Array], params: Mapping[str, Any]
) -> dict[str, Array]:
    return {"output": _encoding(int(params["n"]), params, params.get(DTYPE_PARAM, np.float64))}


def _derive_positional(sizes: dict[str, int], params: Mapping[str, Any]) -> dict[str, int]:
    sizes = positive_sizes(sizes, params)
    if sizes["d_model"] % 2:
        raise OracleError(f"d_model ({sizes['d_model']}) must be even: sin and cos alternate")
    base = params.get("base", 10000.0)
    if isinstance(base, bool) or not isinstance(base, int | float) or base <= 0:
        raise OracleError(f"param base must be a positive number, got {base!r}")
    choice(params, "layout", LAYOUTS)
    return sizes


POSITIONAL_ENCODING = Oracle(
    name="positional_encoding",
    title="Sinusoidal positional encoding",
    summary="Each position gets sines and cosines of geometrically spaced frequencies, "
    "interleaved across the model dimension (or in two halves, with layout=halves).",
    latex=r"PE_{(pos, 2i)} = \sin\left(\frac{pos}{10000^{2i/d_{\text{model}}}}\right), \quad "
    r"PE_{(pos, 2i+1)} = \cos\left(\frac{pos}{10000^{2i/d_{\text{model}}}}\right)",
    compute=_positional_encoding,
    inputs=(),
    outputs=(tensor("output", "n d_model"),),
    size_args=("n", "d_model"),
    dims={"n": 50, "d_model": 16},
    params={"base": 10000.0, "layout": "interleaved"},
    heatmaps=("output",),
    derive=_derive_positional,
    regimes=(FAR,),
)


# Layers that take an input --------------------------------------------------------------------


def _whole_table(sizes: Mapping[str, int]) -> dict[str, int]:
    return {**sizes, "n": int(sizes["max_len"])}


WHOLE_TABLE = Regime(
    "whole table",
    "every position the layer holds: n = max_len",
    sizes=_whole_table,
)
"""A positional layer keeps a table of ``max_len`` positions (the tutorial's 2048, the
textbook's 1000, Keras' example's ``maxlen``): the far positions are those of its table,
where float32 angles have lost digits and an off-by-one slice shows."""


def _scaled(x: Array, params: Mapping[str, Any]) -> Array:
    """``x`` times √d_model when the block says ``scaled=true`` (the paper's and the tutorial's
    embedding scale), in ``x``'s own precision."""
    scale = params.get("scaled", False)
    if not isinstance(scale, bool):
        raise OracleError(f"param scaled must be true or false, got {scale!r}")
    scaled: Array = x * math.sqrt(int(params["d_model"])) if scale else x
    return scaled


def _table_sizes(sizes: dict[str, int], params: Mapping[str, Any]) -> dict[str, int]:
    """Positive sizes, a ``scaled`` that is true or false, and no more positions than the
    layer's table holds."""
    sizes = positive_sizes(sizes, params)
    _scaled(np.zeros(1), {**params, "d_model": sizes["d_model"]})
    if sizes["n"] > sizes["max_len"]:
        raise OracleError(
            f"n ({sizes['n']}) must not exceed max_len ({sizes['max_len']}), the positions "
            "the layer's table holds"
        )
    return sizes


def _derive_table(sizes: dict[str, int], params: Mapping[str, Any]) -> dict[str, int]:
    return _table_sizes(_derive_positional(sizes, params), params)


def _add_positional_encoding(
    arrays: Mapping[str, Array], params: Mapping[str, Any]
) -> dict[str, Array]:
    x = given(arrays, X)
    encoding = _encoding(x.shape[1], params, x.dtype.type)
    return {"output": _scaled(x, params) + encoding, "encoding": encoding}


ADD_POSITIONAL_ENCODING = Oracle(
    name="add_positional_encoding",
    title="Positional encoding added to an input",
    summary="Adds the sinusoidal encoding of each position to the activations at it "
    "(after scaling them by √d_model, with scaled=true); dropout is off in a check.",
    latex=r"\text{output} = X + P, \quad P_{pos, 2i} = \sin\left(\frac{pos}{10000^{2i/d}}\right),"
    r" \quad P_{pos, 2i+1} = \cos\left(\frac{pos}{10000^{2i/d}}\right)",
    compute=_add_positional_encoding,
    inputs=(X,),
    outputs=(tensor("output", "b n d_model"),),
    dims={"b": 2, "n": 5, "d_model": 16, "max_len": 1000},
    params={"base": 10000.0, "layout": "interleaved", "scaled": False},
    heatmaps=("output",),
    derive=_derive_table,
    regimes=(WHOLE_TABLE,),
)


# Token embeddings -----------------------------------------------------------------------------

IDS = tensor("ids", "b n", "token ids, whole numbers below vocab")
TOKENS = tensor("tokens", "vocab d_model", "the token embedding table")
POSITIONS = tensor("positions", "max_len d_model", "the learned position table")


def _generate_ids(
    sizes: Mapping[str, int], rng: np.random.Generator, params: Mapping[str, Any]
) -> dict[str, Array]:
    """Token ids over the whole vocabulary, its last id included."""
    ids = rng.integers(0, sizes["vocab"], size=(sizes["b"], sizes["n"]))
    ids[0, -1] = sizes["vocab"] - 1
    return {"ids": ids.astype(np.float64)}


def _lookup(table: Array, ids: Array) -> Array:
    """Rows of ``table`` at ``ids`` (float ids, rounded: a rounding draw moves them by an
    ulp); an error naming the first id outside the table."""
    whole = np.rint(ids).astype(np.int64)
    outside = (whole < 0) | (whole >= table.shape[0])
    if np.any(outside):
        raise OracleError(f"token id {int(whole[outside][0])} is outside [0, {table.shape[0]})")
    rows: Array = table[whole]
    return rows


def _sinusoidal_embedding(
    arrays: Mapping[str, Array], params: Mapping[str, Any]
) -> dict[str, Array]:
    tokens = given(arrays, TOKENS)
    embedded = _scaled(_lookup(tokens, given(arrays, IDS)), params)
    encoding = _encoding(embedded.shape[1], params, tokens.dtype.type)
    return {"output": embedded + encoding, "encoding": encoding}


SINUSOIDAL_EMBEDDING = Oracle(
    name="sinusoidal_embedding",
    title="Token embedding with a sinusoidal position encoding",
    summary="Looks each token id up in an embedding table, scales it by √d_model (unless "
    "scaled=false) and adds the sinusoidal encoding of its position.",
    latex=r"\text{output} = E_{\text{ids}}\sqrt{d_{\text{model}}} + PE",
    compute=_sinusoidal_embedding,
    inputs=(IDS,),
    outputs=(tensor("output", "b n d_model"),),
    weights=(TOKENS,),
    dims={"b": 2, "n": 5, "d_model": 16, "vocab": 11, "max_len": 2048},
    params={"base": 10000.0, "layout": "interleaved", "scaled": True},
    heatmaps=("output",),
    derive=_derive_table,
    generate=_generate_ids,
    regimes=(WHOLE_TABLE,),
)


def _learned_embedding(arrays: Mapping[str, Array], params: Mapping[str, Any]) -> dict[str, Array]:
    ids = given(arrays, IDS)
    embedded = _scaled(_lookup(given(arrays, TOKENS), ids), params)
    return {"output": embedded + given(arrays, POSITIONS)[: ids.shape[1]]}


LEARNED_EMBEDDING = Oracle(
    name="learned_embedding",
    title="Token and learned position embeddings",
    summary="Looks each token id up in a token table and each position in a learned "
    "position table, and adds the two rows (Keras' TokenAndPositionEmbedding).",
    latex=r"\text{output}_{pos} = E_{\text{ids}_{pos}} + P_{pos}",
    compute=_learned_embedding,
    inputs=(IDS,),
    outputs=(tensor("output", "b n d_model"),),
    weights=(TOKENS, POSITIONS),
    dims={"b": 2, "n": 5, "d_model": 6, "vocab": 11, "max_len": 9},
    params={"scaled": False},
    derive=_table_sizes,
    generate=_generate_ids,
    regimes=(WHOLE_TABLE,),
)
