"""Masks as published code takes them: valid lengths (1-D and 2-D), Keras' boolean
``attention_mask``, additive ``-inf`` and large-negative fills, and broadcast layouts
(``b 1 m``, ``n m``, ``b 1 1 m``). Each correct style verifies; each realistic slip (the
mask ignored, inverted, a length off by one, lengths repeated along the wrong axis, a mask
transposed) is caught. The fixtures are our own code, written in each style."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import pytest

from formula_check.model import Status
from formula_check.oracles import Oracle, TensorSpec, register
from formula_check.results import CheckResult
from implementations import CORRECT
from support import run

pytestmark = pytest.mark.tf


def _masked_softmax(
    arrays: Mapping[str, np.ndarray], params: Mapping[str, Any]
) -> dict[str, np.ndarray]:
    x, keep = arrays["x"], np.asarray(arrays["mask"], dtype=bool)
    shifted = np.where(keep, x, -np.inf)
    shifted = shifted - shifted.max(axis=-1, keepdims=True)
    e = np.where(keep, np.exp(shifted), 0.0)
    return {"output": e / e.sum(axis=-1, keepdims=True)}


MASKED_SOFTMAX = register(
    Oracle(
        name="test_masked_softmax",
        title="Masked softmax",
        latex=r"\text{softmax}(x + M)",
        compute=_masked_softmax,
        inputs=(TensorSpec("x", ("b", "n", "m")),),
        outputs=(TensorSpec("output", ("b", "n", "m")),),
        dims={"b": 3, "n": 4, "m": 7},
        mask_dims=("b", "n", "m"),
        regimes=(),
    ),
    replace=True,
)

# Valid lengths, as a textbook's TensorFlow tab passes them: a masked softmax over the last
# axis, the lengths repeated over the queries when there is one per batch element.
LENGTHS = """
import tensorflow as tf


def keep_leading(scores, lengths, fill):
    positions = tf.range(tf.shape(scores)[-1])
    kept = positions[tf.newaxis, :] < tf.cast(lengths, tf.int32)[:, tf.newaxis]
    return tf.where(kept, scores, fill)


def masked_softmax(scores, valid_lens):
    if valid_lens is None:
        return tf.nn.softmax(scores, axis=-1)
    shape = tf.shape(scores)
    if len(valid_lens.shape) == 1:
        lengths = tf.repeat(valid_lens, repeats=shape[1])
    else:
        lengths = tf.reshape(valid_lens, [-1])
    flat = keep_leading(tf.reshape(scores, [-1, shape[-1]]), lengths, -1e6)
    return tf.nn.softmax(tf.reshape(flat, shape), axis=-1)


def attention(queries, keys, values, valid_lens=None):
    d = tf.cast(tf.shape(queries)[-1], tf.float32)
    scores = tf.matmul(queries, keys, transpose_b=True) / tf.math.sqrt(d)
    weights = masked_softmax(scores, valid_lens)
    return tf.matmul(weights, values), weights
"""

LENGTH_SLIPS = {
    "off by one": ("positions[tf.newaxis, :] <", "positions[tf.newaxis, :] <="),
    "ignored": ("weights = masked_softmax(scores, valid_lens)", "weights = tf.nn.softmax(scores)"),
    "repeated along the wrong axis": (
        "tf.repeat(valid_lens, repeats=shape[1])",
        "tf.tile(valid_lens, [shape[1]])",
    ),
    "inverted": ("tf.where(kept, scores, fill)", "tf.where(kept, fill, scores)"),
}

# Keras' convention, True = may attend, shared by every query: (b, 1, m).
KEEP_BROADCAST = """
import tensorflow as tf


def attend(q, k, v, attention_mask=None):
    scores = tf.matmul(q, k, transpose_b=True) / tf.sqrt(tf.cast(tf.shape(k)[-1], tf.float32))
    if attention_mask is not None:
        scores = tf.where(attention_mask, scores, -1e9)
    weights = tf.nn.softmax(scores, axis=-1)
    return tf.matmul(weights, v), weights
"""

# A mask already in logits: 0 where kept, -inf (or -1e9) where hidden, added as it is.
ADDED = """
import tensorflow as tf


def attend(q, k, v, mask):
    scores = tf.matmul(q, k, transpose_b=True) / tf.sqrt(tf.cast(tf.shape(k)[-1], tf.float32))
    weights = tf.nn.softmax(scores + mask, axis=-1)
    return tf.matmul(weights, v), weights
"""

SIZES = {"b": 3, "n": 4, "m": 7, "d_k": 5, "d_v": 6}
SQUARE = {"b": 2, "n": 5, "m": 5, "d_k": 4, "d_v": 3}

CASES: dict[str, tuple[str, str, dict[str, Any], dict[str, tuple[str, str]]]] = {
    "valid lengths (b,)": (
        "attention",
        LENGTHS,
        {"mask": "padding", "mask_convention": "lengths", "call": ("q", "k", "v", "mask")},
        LENGTH_SLIPS,
    ),
    "valid lengths (b, n)": (
        "attention",
        LENGTHS,
        {"mask": "both", "mask_convention": "lengths", "call": ("q", "k", "v", "mask")},
        {k: v for k, v in LENGTH_SLIPS.items() if k != "repeated along the wrong axis"},
    ),
    "masked softmax, valid lengths": (
        "test_masked_softmax",
        LENGTHS,
        {
            "mask": "padding",
            "mask_convention": "lengths",
            "entry": "masked_softmax",
            "call": ("x", "mask"),
        },
        {k: v for k, v in LENGTH_SLIPS.items() if k != "ignored"},
    ),
    "keras boolean (b, 1, m)": (
        "attention",
        KEEP_BROADCAST,
        {
            "mask": "padding",
            "mask_convention": "keep",
            "params": {"mask_dims": "b 1 m"},
            "call": ("q", "k", "v", "attention_mask=mask"),
        },
        {
            "inverted": ("tf.where(attention_mask,", "tf.where(~attention_mask,"),
            "ignored": ("if attention_mask is not None:", "if False:"),
        },
    ),
    "additive -inf": (
        "attention",
        ADDED,
        {"mask": "both", "mask_convention": "neg-inf"},
        {
            "subtracted": ("scores + mask", "scores - mask"),
            "ignored": ("scores + mask", "scores"),
        },
    ),
    "large negative, causal (n, m)": (
        "attention",
        ADDED,
        {"mask": "causal", "mask_convention": "neg-large", "params": {"mask_dims": "n m"}},
        {
            "transposed": ("scores + mask", "scores + tf.transpose(mask)"),
            "ignored": ("scores + mask", "scores"),
        },
    ),
    "tutorial padding mask (b, 1, 1, m)": (
        "multihead",
        CORRECT["multihead-tutorial"][1],
        {**CORRECT["multihead-tutorial"][2], "mask": "padding", "params": {"mask_dims": "b 1 1 m"}},
        {
            "inverted": ("(mask * -1e9)", "((1 - mask) * -1e9)"),
            "ignored": ("(mask * -1e9)", "(mask * 0)"),
        },
    ),
}


def _sizes(oracle: str, options: Mapping[str, Any]) -> dict[str, Any]:
    if oracle != "attention":
        return {}
    square = options.get("mask") == "causal"
    return {"dims": SQUARE if square else SIZES}


def _check(oracle: str, source: str, options: Mapping[str, Any]) -> CheckResult:
    return run(oracle, source, **{**_sizes(oracle, options), **options})


@pytest.mark.parametrize("case", sorted(CASES))
def test_the_mask_as_the_code_takes_it_verifies(case: str) -> None:
    oracle, source, options, _ = CASES[case]
    result = _check(oracle, source, options)
    assert result.status is Status.VERIFIED, result.headline()
    assert not any("hides nothing" in note for note in result.notes)


@pytest.mark.parametrize(
    ("case", "slip"),
    [(case, slip) for case, (*_, slips) in sorted(CASES.items()) for slip in slips],
)
def test_a_slip_in_the_mask_is_caught(case: str, slip: str) -> None:
    oracle, source, options, slips = CASES[case]
    old, new = slips[slip]
    assert old in source, f"{slip!r} no longer applies to {case}"
    result = _check(oracle, source.replace(old, new, 1), options)
    assert result.status is Status.MISMATCH, result.headline()
    assert result.headline().startswith("docs/page.md:6 [")


def test_one_length_per_batch_element_cannot_hold_a_causal_mask() -> None:
    from formula_check.errors import SpecError

    options = {"mask": "causal", "mask_convention": "lengths", "params": {"mask_dims": "b"}}
    with pytest.raises(SpecError, match="name the query axis too") as raised:
        _check("attention", LENGTHS, {**options, "call": ("q", "k", "v", "mask")})
    assert str(raised.value.location) == "docs/page.md:6"
