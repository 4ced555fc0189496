"""Positional oracles: the sinusoidal encoding itself."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from ..errors import OracleError
from ..model import Array
from ..tolerance import DTYPE_PARAM
from .base import Oracle
from .numerics import positional_encoding, second_way
from .regimes import FAR
from .tensors import positive_sizes, tensor

# positional_encoding ------------------------------------------------------------------------


def _positional_encoding(
    arrays: Mapping[str, Array], params: Mapping[str, Any]
) -> dict[str, Array]:
    base = float(params.get("base", 10000.0))
    dtype = params.get(DTYPE_PARAM, np.float64)
    size = int(params["n"]), int(params["d_model"])
    return {"output": positional_encoding(*size, base, dtype, through_exp=second_way(params))}


def _derive_positional(sizes: dict[str, int], params: Mapping[str, Any]) -> dict[str, int]:
    sizes = positive_sizes(sizes, params)
    if sizes["d_model"] % 2:
        raise OracleError(f"d_model ({sizes['d_model']}) must be even: sin and cos alternate")
    base = params.get("base", 10000.0)
    if isinstance(base, bool) or not isinstance(base, int | float) or base <= 0:
        raise OracleError(f"param base must be a positive number, got {base!r}")
    return sizes


POSITIONAL_ENCODING = Oracle(
    name="positional_encoding",
    title="Sinusoidal positional encoding",
    summary="Each position gets sines and cosines of geometrically spaced frequencies, "
    "interleaved across the model dimension.",
    latex=r"PE_{(pos, 2i)} = \sin\left(\frac{pos}{10000^{2i/d_{\text{model}}}}\right), \quad "
    r"PE_{(pos, 2i+1)} = \cos\left(\frac{pos}{10000^{2i/d_{\text{model}}}}\right)",
    compute=_positional_encoding,
    inputs=(),
    outputs=(tensor("output", "n d_model"),),
    size_args=("n", "d_model"),
    dims={"n": 50, "d_model": 16},
    params={"base": 10000.0},
    heatmaps=("output",),
    derive=_derive_positional,
    regimes=(FAR,),
)
