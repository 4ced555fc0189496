"""The additive-attention oracle: against a computation written out pair by pair, its regimes
and formulas (pure NumPy), and real TensorFlow code through the engine: correct code
verifies, each wrong version is a mismatch."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest

from formula_check.latex import NotExecutable, check_against_oracle
from formula_check.model import Status
from formula_check.oracles import get_oracle
from formula_check.planning.masks import keep_mask
from support import run

ORACLE = get_oracle("additive_attention")
PRINTED = (
    r"a(\mathbf q, \mathbf k) = \mathbf w_v^\top \tanh(\mathbf W_q \mathbf q + \mathbf W_k "
    r"\mathbf k) \in \mathbb{R}"
)


def case(seed: int = 0, *, masked: bool = False) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
    sizes = ORACLE.resolve_dims({}, ORACLE.params)
    rng = np.random.default_rng(seed)
    arrays = {**ORACLE.make_inputs(sizes, rng, ORACLE.params), **ORACLE.make_weights(sizes, rng)}
    if masked:
        arrays["mask"] = keep_mask("padding", sizes["b"], sizes["n"], sizes["m"], rng)
    return arrays, {**ORACLE.params, **sizes}


def by_pairs(arrays: dict[str, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """Output and weights one query and one key at a time, in plain Python arithmetic."""
    q, k, v = arrays["q"], arrays["k"], arrays["v"]
    w_q, w_k, w_v = arrays["W_q"], arrays["W_k"], arrays["w_v"].ravel()
    b, n, m, hidden = q.shape[0], q.shape[1], k.shape[1], w_v.size
    keep = arrays.get("mask", np.ones((b, n, m), dtype=bool))
    weights = np.zeros((b, n, m))
    for batch in range(b):
        for i in range(n):
            scores = []
            for j in range(m):
                total = 0.0
                for unit in range(hidden):
                    pre = sum(q[batch, i, r] * w_q[r, unit] for r in range(q.shape[2]))
                    pre += sum(k[batch, j, s] * w_k[s, unit] for s in range(k.shape[2]))
                    total += w_v[unit] * math.tanh(pre)
                scores.append(total)
            kept = [j for j in range(m) if keep[batch, i, j]]
            top = max(scores[j] for j in kept)
            norm = sum(math.exp(scores[j] - top) for j in kept)
            for j in kept:
                weights[batch, i, j] = math.exp(scores[j] - top) / norm
    return np.einsum("bnm,bmd->bnd", weights, v), weights


# -- the oracle, pure ---------------------------------------------------------------------------


@pytest.mark.parametrize("masked", [False, True])
def test_the_oracle_is_the_pairwise_computation(masked: bool) -> None:
    arrays, params = case(1, masked=masked)
    result = ORACLE.compute(arrays, params)
    output, weights = by_pairs(arrays)
    np.testing.assert_allclose(result["weights"], weights, rtol=0, atol=1e-12)
    np.testing.assert_allclose(result["output"], output, rtol=0, atol=1e-12)
    if masked:
        assert np.all(result["weights"][~arrays["mask"]] == 0.0)


def test_a_scoring_vector_kept_flat_gives_the_same_result() -> None:
    arrays, params = case(2)
    flat = {**arrays, "w_v": arrays["w_v"].ravel()}
    for name, value in ORACLE.compute(flat, params).items():
        np.testing.assert_array_equal(value, ORACLE.compute(arrays, params)[name])


def test_float32_arrays_give_float32_results_for_the_derived_tolerance() -> None:
    arrays, params = case(3, masked=True)
    single = {k: v if k == "mask" else v.astype(np.float32) for k, v in arrays.items()}
    for draw in (0, 1):  # the softmax two usual ways
        result = ORACLE.compute(single, {**params, "_draw": draw})
        assert {value.dtype for value in result.values()} == {np.dtype(np.float32)}


def test_the_regimes_saturate_tanh_and_widen_the_scores() -> None:
    arrays, params = case(4)
    saturated, large = ORACLE.input_regimes()
    inputs = {name: arrays[name] for name in ("q", "k", "v")}
    assert saturated.inputs is not None
    wide = saturated.inputs(inputs, params, np.random.default_rng(0), params)
    assert wide is not None
    np.testing.assert_array_equal(wide["q"], 8 * arrays["q"])
    np.testing.assert_array_equal(wide["v"], arrays["v"])
    hidden = np.tanh((wide["q"] @ arrays["W_q"])[:, :, None] + (wide["k"] @ arrays["W_k"])[:, None])
    assert np.mean(np.abs(hidden) > 0.95) > 0.5
    assert large.weight_scale == 8.0


def test_the_catalog_formula_compiles_and_agrees_with_a_mask() -> None:
    arrays, params = case(5, masked=True)
    agreement = check_against_oracle(ORACLE.latex, "additive_attention", arrays, params)
    assert agreement.ok, agreement.message


def test_a_formula_with_another_activation_differs() -> None:
    arrays, params = case(6)
    relu = ORACLE.latex.replace(r"\tanh\left(", r"\max\left(0, ")
    assert relu != ORACLE.latex
    assert not check_against_oracle(relu, "additive_attention", arrays, params).ok


def test_the_textbooks_column_vector_formula_is_not_executable_and_says_why() -> None:
    arrays, params = case(7)
    with pytest.raises(NotExecutable, match=r"the transpose of a vector \(h\)"):
        check_against_oracle(PRINTED, "additive_attention", arrays, params)


# -- real TensorFlow code through the engine ------------------------------------------------------

FUNCTION = """
import tensorflow as tf


def additive(q, k, v, W_q, W_k, w_v, mask=None):
    features = tf.tanh(tf.matmul(q, W_q)[:, :, None, :] + tf.matmul(k, W_k)[:, None, :, :])
    scores = tf.einsum("bnmh,ho->bnm", features, w_v)
    if mask is not None:
        scores += mask * -1e9
    weights = tf.nn.softmax(scores, axis=-1)
    return tf.matmul(weights, v), weights
"""
"""A correct version with the tutorials' float mask (1 hides a key)."""

LAYER = """
import tensorflow as tf


class Additive(tf.keras.layers.Layer):
    def __init__(self, num_hiddens):
        super().__init__()
        self.W_q = tf.keras.layers.Dense(num_hiddens, use_bias=False)
        self.W_k = tf.keras.layers.Dense(num_hiddens, use_bias=False)
        self.w_v = tf.keras.layers.Dense(1, use_bias=False)

    def call(self, queries, keys, values, valid_lens=None):
        pairs = self.W_q(queries)[:, :, tf.newaxis] + self.W_k(keys)[:, tf.newaxis]
        scores = tf.squeeze(self.w_v(tf.tanh(pairs)), -1)
        if valid_lens is not None:
            seen = tf.sequence_mask(valid_lens, tf.shape(scores)[-1])[:, tf.newaxis]
            scores = tf.where(seen, scores, -1e6)
        self.attention_weights = tf.nn.softmax(scores)
        return tf.matmul(self.attention_weights, values)
"""
"""A Keras layer in the textbook's shape: valid lengths, weights kept on an attribute."""

LAYER_OPTIONS: dict[str, Any] = {
    "kind": "layer",
    "init": {"num_hiddens": "h"},
    "mask": "padding",
    "mask_convention": "lengths",
    "call": ("q", "k", "v", "mask"),
    "returns": ("output", "weights=attention_weights"),
    "weights": {"W_q": "W_q.kernel", "W_k": "W_k.kernel", "w_v": "w_v.kernel"},
}

MUTANTS = {
    "relu for tanh": (FUNCTION, "tf.tanh(", "tf.nn.relu("),
    "no mask": (FUNCTION, "scores += mask * -1e9", "pass"),
    "scores scaled by sqrt(h)": (
        FUNCTION,
        "weights = tf.nn.softmax(scores, axis=-1)",
        "weights = tf.nn.softmax(scores / tf.sqrt(tf.cast(tf.shape(W_q)[-1], tf.float32)))",
    ),
    "softmax over the queries": (FUNCTION, "softmax(scores, axis=-1)", "softmax(scores, axis=1)"),
    "keys subtracted": (FUNCTION, "[:, :, None, :] + tf.matmul", "[:, :, None, :] - tf.matmul"),
    "layer: no valid lengths": (LAYER, "scores = tf.where(seen, scores, -1e6)", "pass"),
    "layer: sigmoid for tanh": (LAYER, "tf.tanh(pairs)", "tf.sigmoid(pairs)"),
}


def _options(source: str) -> dict[str, Any]:
    if source is LAYER:
        return LAYER_OPTIONS
    return {"mask": "padding", "mask_convention": "additive"}


@pytest.mark.tf
@pytest.mark.parametrize("source", [FUNCTION, LAYER], ids=["function", "layer"])
def test_correct_code_verifies_on_every_regime(source: str) -> None:
    result = run("additive_attention", source, **_options(source))
    assert result.status is Status.VERIFIED, result.headline()
    regimes = {verdict.regime for verdict in result.verdicts}
    # every code's graph is judged, on every regime; a layer's first call (on its weights
    # before they move) too
    graphs = {"tf.function", "tf.function, saturated tanh", "tf.function, large scores"}
    judged_too = {*graphs, "first call"} if source is LAYER else graphs
    assert regimes == {"", "saturated tanh", "large scores", *judged_too}
    assert {verdict.name for verdict in result.verdicts} == {"output", "weights"}


@pytest.mark.tf
@pytest.mark.parametrize("name", sorted(MUTANTS))
def test_each_wrong_version_is_a_mismatch(name: str) -> None:
    source, before, after = MUTANTS[name]
    assert source.count(before) == 1
    wrong = source.replace(before, after)
    result = run("additive_attention", wrong, **_options(source))
    assert result.status is Status.MISMATCH, result.headline()
