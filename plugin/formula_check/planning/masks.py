"""Attention masks: one logical *keep* mask for the oracle, in the form the code expects.

The oracle always works from a boolean ``(b, n, m)`` keep mask. The code receives it as a
block asks, which is how the code in the wild takes it:

* ``additive`` — TF tutorials: a float mask with **1 = masked**, used as ``logits += mask * -1e9``;
* ``keep`` — Keras: a boolean mask with **True = may attend** (``attention_mask=``);
  ``keep-float`` is the same as 0/1 floats;
* ``neg-inf`` and ``neg-large`` — a float mask added to the logits as it is: 0 where a key
  is kept, ``-inf`` (or ``-1e9``) where it is hidden;
* ``lengths`` — d2l's ``valid_lens``: how many leading keys each batch element (``(b,)``) or
  each query (``(b, n)``) may see, as int32.

``mask_dims`` names the axes of the array the code gets, from the oracle's mask axes (batch,
query, key: ``b n m``), with ``1`` for a broadcast axis: ``b 1 m`` is a key-padding mask
shared by every query, ``n m`` a causal mask shared by the batch, ``b 1 1 m`` one shared by
every head and query too. An axis left out must be one the mask does not vary along, and
named axes may come in another order (the array is transposed to it); anything else is an
error, never a reshape that silently means something else.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from formula_check.errors import SpecError
from formula_check.model import MASK_CONVENTIONS as CONVENTIONS
from formula_check.model import Array, MaskKind

LARGE_NEGATIVE = -1e9
"""The hidden keys' value under ``neg-large``."""

_ROLES = ("batch", "query", "key")


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


def default_dims(keep: Array, convention: str, oracle_dims: Sequence[str]) -> tuple[str, ...]:
    """The mask's axes when a block names none: the oracle's; for ``lengths``, one length
    per batch element when every query sees the same keys, else one per query."""
    if convention != "lengths":
        return tuple(oracle_dims)
    batch, query, _ = _named(oracle_dims)
    return (batch,) if _constant(keep, 1) else (batch, query)


def snippet_mask(
    keep: Array, convention: str, dims: Sequence[str], oracle_dims: Sequence[str]
) -> Array:
    """``keep`` laid out on ``dims`` (the oracle's mask axes are ``oracle_dims``) and encoded
    in ``convention``; a layout or encoding that cannot hold this mask is a :class:`SpecError`
    (the caller adds the block's place)."""
    if convention not in CONVENTIONS:
        raise SpecError(
            f"unknown mask convention {convention!r}; use one of {', '.join(CONVENTIONS)}"
        )
    if convention == "lengths":
        return _lengths(keep, dims, oracle_dims)
    laid = _laid_out(keep, dims, oracle_dims)
    if convention == "additive":
        return (~laid).astype(np.float32)
    if convention == "keep":
        kept: Array = laid.copy()
        return kept
    if convention == "keep-float":
        return laid.astype(np.float32)
    hidden = -np.inf if convention == "neg-inf" else LARGE_NEGATIVE
    return np.where(laid, 0.0, hidden).astype(np.float32)


def _named(oracle_dims: Sequence[str]) -> tuple[str, str, str]:
    named = [d for d in oracle_dims if not d.isdigit()]
    if len(named) != 3:  # an oracle's declaration, not a block's
        raise SpecError(f"an oracle's mask has three named axes, got ({', '.join(oracle_dims)})")
    return named[0], named[1], named[2]


def _positions(
    dims: Sequence[str], oracle_dims: Sequence[str], *, lengths: bool = False
) -> list[int]:
    """Which logical axis (0 batch, 1 query, 2 key) each named axis of ``dims`` is. Where the
    query and the key axes share a name (self-attention's ``b n n``) and ``dims`` names it
    once, it is the key axis (a padding mask, ``b 1 1 n``), or for valid lengths, which count
    keys, the query axis (``b n``)."""
    axes = _named(oracle_dims)
    spelled = " ".join(axes)
    for part in dims:
        if part.isdigit() and part != "1":
            raise SpecError(f"mask_dims: {part!r} is not an axis: use a name of ({spelled}) or 1")
    named = [d for d in dims if not d.isdigit()]
    positions: list[int] = []
    for name in named:
        free = [i for i, axis in enumerate(axes) if axis == name and i not in positions]
        if not free:
            known = "" if name in axes else f" (the mask's axes are {spelled})"
            said = "is named twice" if name in axes else "is not an axis of the mask"
            raise SpecError(f"mask_dims: {name!r} {said}{known}")
        shared = named.count(name) < axes.count(name)
        positions.append(free[0] if lengths or not shared else free[-1])
    return positions


def _constant(keep: Array, axis: int) -> bool:
    return bool(np.all(keep == keep.take([0], axis=axis)))


def _left_out(keep: Array, positions: Sequence[int], dims: Sequence[str]) -> Array:
    """``keep`` without the logical axes ``positions`` leaves out (each must be constant)."""
    for axis in (a for a in range(3) if a not in positions):
        if not _constant(keep, axis):
            raise SpecError(
                f"mask_dims={' '.join(dims)!r} leaves out the {_ROLES[axis]} axis, but this "
                f"mask differs from one {_ROLES[axis]} to the next: name that axis"
            )
    taken: Array = keep[tuple(slice(None) if a in positions else 0 for a in range(3))]
    return taken


def _laid_out(keep: Array, dims: Sequence[str], oracle_dims: Sequence[str]) -> Array:
    positions = _positions(dims, oracle_dims)
    reduced = _left_out(keep, positions, dims)
    # the reduced array's axes are the kept positions in ascending order; put them in dims'
    order = [sorted(positions).index(p) for p in positions]
    moved = np.transpose(reduced, order) if order else reduced
    shape = iter(moved.shape)
    laid: Array = moved.reshape(tuple(1 if d.isdigit() else next(shape) for d in dims))
    return laid


def _lengths(keep: Array, dims: Sequence[str], oracle_dims: Sequence[str]) -> Array:
    """Valid lengths: the number of leading keys each row may see, laid out on ``dims``."""
    positions = _positions(dims, oracle_dims, lengths=True)
    if 2 in positions or any(d.isdigit() for d in dims) or 0 not in positions:
        batch, query, _ = _named(oracle_dims)
        raise SpecError(
            f"mask_dims={' '.join(dims)!r}: valid lengths count keys per batch element "
            f"({batch!r}) or per query ({batch} {query!r}); name no key axis and no 1"
        )
    counts = keep.sum(axis=-1)
    prefix = np.arange(keep.shape[-1]) < counts[..., np.newaxis]
    if not np.array_equal(prefix, keep):
        raise SpecError(
            "mask_convention='lengths': this mask hides keys that are not at the end of a row, "
            "which valid lengths cannot say"
        )
    if positions == [0]:
        if not _constant(keep, 1):
            raise SpecError(
                f"mask_dims={' '.join(dims)!r}: one valid length per batch element cannot hold "
                f"this mask, whose queries see different keys: name the query axis too"
            )
        per_batch: Array = counts[:, 0].astype(np.int32)
        return per_batch
    lengths: Array = counts.astype(np.int32)
    return lengths if positions == [0, 1] else lengths.T.copy()
