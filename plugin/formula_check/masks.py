"""Attention masks: one logical *keep* mask for the oracle, in the convention the code expects.

Two conventions are common in the wild:

* ``additive`` — TF tutorials: a float mask with **1 = masked**, used as ``logits += mask * -1e9``;
* ``keep`` — Keras: a boolean mask with **True = may attend** (``attention_mask=``);
  ``keep-float`` is the same as 0/1 floats.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from .errors import SpecError
from .model import Array, MaskConvention, MaskKind


def keep_mask(kind: MaskKind, b: int, n: int, m: int, rng: np.random.Generator) -> Array:
    """A boolean ``(b, n, m)`` array, True where a query may attend to a key."""
    keep = np.ones((b, n, m), dtype=bool)
    if kind in ("padding", "both"):
        # Each batch element keeps a different number of keys (at least one, at most all but one).
        lengths = rng.integers(max(1, m // 2), m, size=b) if m > 1 else np.ones(b, dtype=int)
        lengths[0] = max(1, m - 1)
        for row, length in enumerate(lengths):
            keep[row, :, length:] = False
    if kind in ("causal", "both"):
        keep &= np.tril(np.ones((n, m), dtype=bool), k=max(0, m - n))[None]
    return keep


def snippet_mask(keep: Array, convention: MaskConvention, dims: Sequence[str]) -> Array:
    """``keep`` reshaped to ``dims`` (e.g. ``(b, 1, n, m)``) in the code's convention.

    Digits in ``dims`` are literal size-1 axes; the three named ones take ``keep``'s sizes.
    """
    named = [d for d in dims if not d.isdigit()]
    if len(named) != 3:
        raise SpecError(
            f"mask dims need three named axes (batch, query, key), got ({', '.join(dims)})"
        )
    sizes_in_order = iter(keep.shape)
    shape = tuple(1 if d.isdigit() else next(sizes_in_order) for d in dims)
    reshaped = keep.reshape(shape)
    if convention == "additive":
        return (~reshaped).astype(np.float32)
    if convention == "keep":
        kept: Array = reshaped.copy()
        return kept
    if convention == "keep-float":
        return reshaped.astype(np.float32)
    raise SpecError(f"unknown mask convention {convention!r}; use additive, keep or keep-float")
