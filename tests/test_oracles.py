"""The builtin oracles, checked by hand-worked cases and by properties (pure NumPy, no TF)."""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from typing import Any

import numpy as np
import pytest

from formula_check.errors import OracleError
from formula_check.oracles import all_oracles, catalog, get_oracle
from formula_check.oracles.tolerance import derive, rounding_samples

BUILTINS = (
    "attention",
    "multihead",
    "self_attention",
    "positional_encoding",
    "ffn",
    "softmax",
    "layer_norm",
    "linear",
    "sublayer",
    "attention_sublayer",
    "cross_attention_sublayer",
    "add_norm",
    "encoder_layer",
    "decoder_layer",
    "add_positional_encoding",
    "sinusoidal_embedding",
    "learned_embedding",
    "additive_attention",
    "transformer_lr_schedule",
)


def run(
    name: str,
    dims: Mapping[str, int] | None = None,
    params: Mapping[str, Any] | None = None,
    *,
    keep: np.ndarray | None = None,
    seed: int = 0,
) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    """Drive an oracle the way the engine does; return (arrays fed in, result)."""
    oracle = get_oracle(name)
    merged = {**oracle.params, **(params or {})}
    sizes = oracle.resolve_dims(dims or {}, merged)
    rng = np.random.default_rng(seed)
    arrays = {**oracle.make_inputs(sizes, rng, merged), **oracle.make_weights(sizes, rng)}
    if keep is not None:
        arrays["mask"] = keep
    result = dict(oracle.compute(arrays, {**merged, **sizes}))
    return arrays, result


def compute(name: str, arrays: Mapping[str, Any], **params: Any) -> dict[str, np.ndarray]:
    """Call an oracle's compute on hand-made arrays."""
    oracle = get_oracle(name)
    given = {k: np.asarray(v, dtype=bool if k == "mask" else np.float64) for k, v in arrays.items()}
    return dict(oracle.compute(given, {**oracle.params, **params}))


def causal_keep(b: int, n: int) -> np.ndarray:
    return np.broadcast_to(np.tril(np.ones((n, n), dtype=bool)), (b, n, n)).copy()


# The catalog as a whole ---------------------------------------------------------------------


def test_catalog_holds_exactly_the_builtins_in_order() -> None:
    assert [o.name for o in catalog.BUILTINS] == list(BUILTINS)
    # the builtins are registered first; tests may register oracles of their own after them
    names = [o.name for o in all_oracles()]
    assert names[: len(BUILTINS)] == list(BUILTINS)


@pytest.mark.parametrize("name", BUILTINS)
def test_default_dims_are_pairwise_distinct(name: str) -> None:
    oracle = get_oracle(name)
    resolved = oracle.resolve_dims({}, oracle.params)
    # a derived dim follows others by definition: depth is d_model / h unless stated
    sizes = [size for dim, size in resolved.items() if dim not in oracle.derived_dims]
    assert len(set(sizes)) == len(sizes), oracle.dims


@pytest.mark.parametrize("name", BUILTINS)
def test_every_declared_dim_has_a_default(name: str) -> None:
    oracle = get_oracle(name)
    named = {d for t in (*oracle.inputs, *oracle.weights, *oracle.outputs) for d in t.dims}
    named |= set(oracle.size_args) | set(oracle.mask_dims or ())
    assert {d for d in named if not d.isdigit()} <= set(oracle.dims)


@pytest.mark.parametrize("name", BUILTINS)
def test_metadata_is_complete(name: str) -> None:
    oracle = get_oracle(name)
    assert oracle.title
    assert oracle.summary.endswith(".")
    assert oracle.latex.count("{") == oracle.latex.count("}")
    assert oracle.version == 1
    assert oracle.atol == 1e-5
    assert oracle.rtol == 1e-5


@pytest.mark.parametrize("name", BUILTINS)
def test_outputs_have_declared_shapes_and_are_finite(name: str) -> None:
    oracle = get_oracle(name)
    _, result = run(name)
    sizes = oracle.resolve_dims({}, oracle.params)
    for spec in oracle.outputs:
        assert result[spec.name].shape == spec.shape(sizes)
        assert result[spec.name].dtype == np.float64
        assert np.all(np.isfinite(result[spec.name]))
    for heatmap in oracle.heatmaps:
        assert heatmap in result


@pytest.mark.parametrize("name", BUILTINS)
def test_seeded_runs_are_reproducible(name: str) -> None:
    first = run(name, seed=3)[1]
    second = run(name, seed=3)[1]
    for key, value in first.items():
        np.testing.assert_array_equal(value, second[key])


def test_attention_signature_text() -> None:
    assert get_oracle("attention").signature() == (
        "attention(q: (b, n, d_k), k: (b, m, d_k), v: (b, m, d_v)) "
        "-> output: (b, n, d_v), weights: (b, n, m)"
    )


def test_function_argument_order_reads_like_the_paper() -> None:
    ffn = get_oracle("ffn")
    assert [t.name for t in ffn.weights] == ["W_1", "b_1", "W_2", "b_2"]
    multihead = get_oracle("multihead")
    assert [t.name for t in multihead.weights] == [
        "W_q", "b_q", "W_k", "b_k", "W_v", "b_v", "W_o", "b_o",
    ]  # fmt: skip
    assert get_oracle("positional_encoding").signature() == (
        "positional_encoding(n: int, d_model: int) -> output: (n, d_model)"
    )
    assert [t.name for t in get_oracle("linear").weights] == ["W"]


def test_mask_dims() -> None:
    assert get_oracle("attention").mask_dims == ("b", "n", "m")
    assert get_oracle("multihead").mask_dims == ("b", "1", "n", "m")
    assert get_oracle("self_attention").mask_dims == ("b", "n", "n")
    assert get_oracle("ffn").mask_dims is None


def test_unknown_oracle_error_lists_the_known_ones() -> None:
    with pytest.raises(OracleError) as info:
        get_oracle("nope")
    message = str(info.value)
    assert "unknown oracle 'nope'" in message
    for name in BUILTINS:
        assert name in message


@pytest.mark.parametrize(
    ("name", "dims", "params", "message"),
    [
        ("multihead", {"d_model": 10, "h": 3}, {}, "d_model (10) must be divisible by h (3)"),
        ("multihead", {}, {"variant": "both"}, "param variant must be one of 'cross', 'self'"),
        ("positional_encoding", {"d_model": 7}, {}, "d_model (7) must be even"),
        ("positional_encoding", {}, {"base": 0}, "param base must be a positive number"),
        ("sublayer", {}, {"norm": "middle"}, "param norm must be one of 'post', 'pre'"),
        ("softmax", {}, {"axis": 3}, "param axis must be an integer in [-3, 2]"),
        ("attention", {"n": 0}, {}, "dim n must be a positive integer, got 0"),
        ("ffn", {"d_ff": 2.5}, {}, "dim d_ff must be a positive integer, got 2.5"),
    ],
)
def test_derive_errors_are_clear(
    name: str, dims: dict[str, Any], params: dict[str, Any], message: str
) -> None:
    oracle = get_oracle(name)
    with pytest.raises(OracleError, match=re.escape(message)):
        oracle.resolve_dims(dims, {**oracle.params, **params})


# softmax ------------------------------------------------------------------------------------


def test_softmax_of_two_elements_by_hand() -> None:
    out = compute("softmax", {"x": [[[0.0, math.log(3.0)]]]})["output"]
    np.testing.assert_allclose(out, [[[0.25, 0.75]]], rtol=0, atol=1e-15)


def test_softmax_is_stable_for_huge_logits() -> None:
    out = compute("softmax", {"x": [[[1000.0, 1000.0 + math.log(3.0)], [-1e4, -1e4]]]})
    np.testing.assert_allclose(out["output"], [[[0.25, 0.75], [0.5, 0.5]]], atol=1e-12)


def test_softmax_axis_param() -> None:
    arrays, result = run("softmax", params={"axis": 1})
    np.testing.assert_allclose(result["output"].sum(axis=1), 1.0, atol=1e-12)
    assert not np.allclose(result["output"].sum(axis=-1), 1.0)
    assert arrays["x"].shape == (2, 5, 7)


# attention ----------------------------------------------------------------------------------


def test_attention_one_query_two_keys_by_hand() -> None:
    q = [[[1.0, 0.0]]]
    k = [[[1.0, 0.0], [0.0, 1.0]]]
    v = [[[1.0, 2.0], [3.0, 4.0]]]
    result = compute("attention", {"q": q, "k": k, "v": v})
    # logits: (1/sqrt(2), 0); w0 = 1 / (1 + exp(-1/sqrt(2))).
    w0 = 1.0 / (1.0 + math.exp(-1.0 / math.sqrt(2.0)))
    np.testing.assert_allclose(result["weights"], [[[w0, 1.0 - w0]]], atol=1e-15)
    expected = [w0 * 1.0 + (1.0 - w0) * 3.0, w0 * 2.0 + (1.0 - w0) * 4.0]
    np.testing.assert_allclose(result["output"], [[expected]], atol=1e-15)


def test_attention_weight_rows_sum_to_one() -> None:
    _, result = run("attention")
    np.testing.assert_allclose(result["weights"].sum(axis=-1), 1.0, atol=1e-12)
    assert np.all(result["weights"] > 0)


def test_attention_scales_by_the_real_key_width() -> None:
    # d_k is read from q, so a layer whose width differs from the dims still checks.
    q = np.full((1, 1, 4), 1.0)
    k = np.array([[[1.0, 1.0, 1.0, 1.0], [0.0, 0.0, 0.0, 0.0]]])
    v = np.array([[[1.0], [0.0]]])
    result = compute("attention", {"q": q, "k": k, "v": v}, d_k=99)
    w0 = 1.0 / (1.0 + math.exp(-4.0 / 2.0))  # logit q.k / sqrt(4) = 2
    np.testing.assert_allclose(result["output"], [[[w0]]], atol=1e-15)


def test_causal_keep_mask_zeroes_future_weights() -> None:
    keep = causal_keep(2, 5)
    _, result = run("attention", {"m": 5}, keep=keep)
    weights = result["weights"]
    assert np.all(weights[~keep] == 0.0)
    np.testing.assert_allclose(weights.sum(axis=-1), 1.0, atol=1e-12)
    np.testing.assert_allclose(weights[:, 0, 0], 1.0)  # the first query sees only itself


def test_padding_mask_equals_dropping_the_padded_keys() -> None:
    keep = np.ones((2, 5, 7), dtype=bool)
    keep[:, :, 4:] = False
    arrays, result = run("attention", keep=keep)
    assert np.all(result["weights"][:, :, 4:] == 0.0)
    short = compute(
        "attention", {"q": arrays["q"], "k": arrays["k"][:, :4], "v": arrays["v"][:, :4]}
    )
    np.testing.assert_allclose(result["output"], short["output"], atol=1e-12)


def test_fully_masked_row_is_uniform_like_tensorflow() -> None:
    keep = np.ones((2, 5, 7), dtype=bool)
    keep[1, 2, :] = False
    arrays, result = run("attention", keep=keep)
    np.testing.assert_allclose(result["weights"][1, 2], 1.0 / 7.0, atol=1e-15)
    np.testing.assert_allclose(result["output"][1, 2], arrays["v"][1].mean(axis=0), atol=1e-12)


# multihead ----------------------------------------------------------------------------------


def projections(arrays: Mapping[str, np.ndarray]) -> tuple[np.ndarray, ...]:
    return tuple(arrays[t] @ arrays[f"W_{t}"] + arrays[f"b_{t}"] for t in "qkv")


def test_multihead_with_one_head_is_projected_attention() -> None:
    arrays, result = run("multihead", {"d_model": 6, "h": 1})
    Q, K, V = projections(arrays)
    single = compute("attention", {"q": Q, "k": K, "v": V})
    np.testing.assert_allclose(result["weights"][:, 0], single["weights"], atol=1e-12)
    expected = single["output"] @ arrays["W_o"] + arrays["b_o"]
    np.testing.assert_allclose(result["output"], expected, atol=1e-12)


def test_multihead_with_identity_projections_is_plain_attention() -> None:
    arrays, _ = run("multihead", {"d_model": 6, "h": 1})
    eye = np.eye(6)
    plain = {name: arrays[name] for name in ("q", "k", "v")}
    result = compute("multihead", {**plain, "W_q": eye, "W_k": eye, "W_v": eye, "W_o": eye}, h=1)
    single = compute("attention", plain)
    np.testing.assert_allclose(result["output"], single["output"], atol=1e-12)


def einsum_multihead(
    arrays: Mapping[str, np.ndarray], h: int, keep: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """An independent formulation: slice each head's columns, attend, concatenate."""
    Q, K, V = projections(arrays)
    depth = Q.shape[-1] // h
    outputs, weights = [], []
    for head in range(h):
        cols = slice(head * depth, (head + 1) * depth)
        logits = np.einsum("bnd,bmd->bnm", Q[..., cols], K[..., cols]) / math.sqrt(depth)
        if keep is not None:
            logits = np.where(keep, logits, -1e9)
        w = np.exp(logits - logits.max(axis=-1, keepdims=True))
        w /= w.sum(axis=-1, keepdims=True)
        weights.append(w)
        outputs.append(np.einsum("bnm,bmd->bnd", w, V[..., cols]))
    concat = np.concatenate(outputs, axis=-1)
    return concat @ arrays["W_o"] + arrays["b_o"], np.stack(weights, axis=1)


def test_multihead_matches_per_head_slices() -> None:
    arrays, result = run("multihead")
    output, weights = einsum_multihead(arrays, h=3)
    assert result["weights"].shape == (2, 3, 5, 7)
    np.testing.assert_allclose(result["weights"], weights, atol=1e-12)
    np.testing.assert_allclose(result["output"], output, atol=1e-12)


def test_multihead_mask_applies_to_every_head() -> None:
    keep = np.ones((2, 5, 7), dtype=bool)
    keep[0, :, 5:] = False
    keep[1, 3, :2] = False
    arrays, result = run("multihead", keep=keep)
    for head in range(3):
        assert np.all(result["weights"][:, head][~keep] == 0.0)
    output, weights = einsum_multihead(arrays, h=3, keep=keep)
    np.testing.assert_allclose(result["weights"], weights, atol=1e-12)
    np.testing.assert_allclose(result["output"], output, atol=1e-12)


def test_multihead_derives_depth() -> None:
    oracle = get_oracle("multihead")
    assert oracle.resolve_dims({"d_model": 16, "h": 8}, oracle.params)["depth"] == 2


def test_multihead_self_variant_feeds_one_sequence() -> None:
    params = {"variant": "self"}
    sizes = get_oracle("multihead").resolve_dims({}, params)
    assert sizes["m"] == sizes["n"]
    arrays, result = run("multihead", params=params)
    np.testing.assert_array_equal(arrays["q"], arrays["k"])
    np.testing.assert_array_equal(arrays["q"], arrays["v"])
    assert result["weights"].shape == (2, 3, 5, 5)


def test_multihead_cross_variant_feeds_three_sequences() -> None:
    arrays, _ = run("multihead")
    assert arrays["k"].shape == (2, 7, 12)
    assert not np.allclose(arrays["k"], arrays["v"])


def test_multihead_optional_biases_default_to_zero() -> None:
    arrays, _ = run("multihead")
    unbiased = {k: v for k, v in arrays.items() if not k.startswith("b_")}
    result = compute("multihead", unbiased, h=3)
    zeroed = {**arrays, **{k: np.zeros_like(v) for k, v in arrays.items() if k.startswith("b_")}}
    np.testing.assert_allclose(result["output"], einsum_multihead(zeroed, h=3)[0], atol=1e-12)


# self_attention -----------------------------------------------------------------------------


def test_self_attention_is_attention_over_projections_of_x() -> None:
    keep = causal_keep(2, 5)
    arrays, result = run("self_attention", keep=keep)
    x = arrays["x"]
    Q, K, V = (x @ arrays[f"W_{t}"] + arrays[f"b_{t}"] for t in "qkv")
    single = compute("attention", {"q": Q, "k": K, "v": V, "mask": keep})
    assert result["weights"].shape == (2, 5, 5)
    assert np.all(result["weights"][~keep] == 0.0)
    np.testing.assert_allclose(result["weights"], single["weights"], atol=1e-12)
    expected = single["output"] @ arrays["W_o"] + arrays["b_o"]
    np.testing.assert_allclose(result["output"], expected, atol=1e-12)


# positional_encoding ------------------------------------------------------------------------


def test_positional_encoding_first_positions_by_hand() -> None:
    out = run("positional_encoding", {"n": 2, "d_model": 4})[1]["output"]
    np.testing.assert_allclose(out[0], [0.0, 1.0, 0.0, 1.0], atol=0)
    slow = 1.0 / 100.0  # 1 / 10000^(2/4)
    expected = [math.sin(1.0), math.cos(1.0), math.sin(slow), math.cos(slow)]
    np.testing.assert_allclose(out[1], expected, atol=1e-15)


def test_positional_encoding_base_param() -> None:
    out = run("positional_encoding", {"n": 2, "d_model": 4}, {"base": 16.0})[1]["output"]
    np.testing.assert_allclose(out[1, 2], math.sin(0.25), atol=1e-15)


@pytest.mark.parametrize("shift", [1, 3, 17])
def test_positional_encoding_shift_is_a_rotation_per_frequency(shift: int) -> None:
    out = run("positional_encoding")[1]["output"]
    d_model = out.shape[1]
    for i in range(d_model // 2):
        now, later = out[:-shift, 2 * i : 2 * i + 2], out[shift:, 2 * i : 2 * i + 2]
        rotation, *_ = np.linalg.lstsq(now, later, rcond=None)
        assert np.max(np.abs(now @ rotation - later)) < 1e-12
        angle = shift / 10000.0 ** (2 * i / d_model)
        c, s = math.cos(angle), math.sin(angle)
        np.testing.assert_allclose(rotation, [[c, -s], [s, c]], atol=1e-8)


def _pe_tolerance(n: int, d_model: int) -> tuple[np.ndarray, np.ndarray]:
    """The reference encoding and each element's derived tolerance."""
    oracle = get_oracle("positional_encoding")
    params = {"base": 10000.0, "n": n, "d_model": d_model}
    expected = oracle.compute({}, params)["output"]
    samples = rounding_samples(oracle.compute, {}, params, {"output": expected}, seed=0)
    tolerance = derive("output", expected, samples)
    assert tolerance is not None and tolerance.derived
    return expected, np.broadcast_to(tolerance.allowed, expected.shape)


def _pe_float32_exp(n: int, d_model: int) -> np.ndarray:
    """The encoding as TensorFlow code often computes it: float32, rates through exp(log)."""
    pos = np.arange(n, dtype=np.float32)[:, None]
    rates = np.exp(
        np.arange(0, d_model, 2, dtype=np.float32) * np.float32(-np.log(10000.0) / d_model)
    )
    out = np.empty((n, d_model), dtype=np.float32)
    out[:, 0::2], out[:, 1::2] = np.sin(pos * rates), np.cos(pos * rates)
    return out


def test_positional_tolerance_grows_with_position() -> None:
    expected, allowed = _pe_tolerance(10001, 16)
    assert allowed[10000].max() > 3 * allowed[10].max()
    assert _pe_tolerance(50, 16)[1][:10].max() < 1e-5  # early positions are held tighter
    # another float32 formulation of the same formula passes at every position
    error = np.abs(_pe_float32_exp(10001, 16) - expected)
    assert np.all(error <= allowed)
    assert error[5000:].max() > 1e-4  # the drift is real, and covered


def _pe_variant(n: int, d_model: int, *, base: float, exponent_i: bool, swap: bool) -> np.ndarray:
    pos = np.arange(n)[:, None]
    i = np.arange(d_model // 2)[None, :]
    angles = pos / base ** ((i if exponent_i else 2 * i) / d_model)
    first, second = (np.cos, np.sin) if swap else (np.sin, np.cos)
    out = np.empty((n, d_model))
    out[:, 0::2], out[:, 1::2] = first(angles), second(angles)
    return out


@pytest.mark.parametrize(
    "wrong",
    [
        {"base": 1000.0, "exponent_i": False, "swap": False},
        {"base": 10000.0, "exponent_i": True, "swap": False},
        {"base": 10000.0, "exponent_i": False, "swap": True},
    ],
)
def test_positional_tolerance_catches_classic_mistakes(wrong: dict[str, Any]) -> None:
    out, allowed = _pe_tolerance(50, 16)
    right = _pe_variant(50, 16, base=10000.0, exponent_i=False, swap=False)
    assert np.all(np.abs(right - out) <= allowed)
    error = np.abs(_pe_variant(50, 16, **wrong) - out)
    assert np.max(error / allowed) > 1e3


# ffn, linear ---------------------------------------------------------------------------------


def test_ffn_hidden_is_a_relu() -> None:
    arrays, result = run("ffn")
    hidden = result["hidden"]
    assert hidden.shape == (2, 5, 9)
    assert np.all(hidden >= 0.0)
    assert np.any(hidden == 0.0)
    pre = arrays["x"] @ arrays["W_1"] + arrays["b_1"]
    np.testing.assert_array_equal(hidden, np.where(pre > 0, pre, 0.0))
    expected = hidden @ arrays["W_2"] + arrays["b_2"]
    np.testing.assert_allclose(result["output"], expected, atol=1e-12)


def test_ffn_by_hand() -> None:
    arrays = {"x": [[[1.0, -2.0]]], "W_1": [[1.0], [1.0]], "b_1": [0.5], "W_2": [[2.0, 3.0]]}
    result = compute("ffn", {**arrays, "b_2": [1.0, 0.0]})
    # x W1 + b1 = -0.5 -> relu 0 -> output is b_2
    np.testing.assert_array_equal(result["output"], [[[1.0, 0.0]]])


def test_linear_is_a_bias_free_product() -> None:
    arrays, result = run("linear")
    assert result["output"].shape == (2, 5, 4)
    np.testing.assert_allclose(result["output"], arrays["x"] @ arrays["W"], atol=1e-12)
    np.testing.assert_allclose(
        compute("linear", {"x": np.zeros((1, 1, 6)), "W": arrays["W"]})["output"], 0.0
    )


# layer_norm, sublayer -----------------------------------------------------------------------


def test_layer_norm_of_one_two_three_by_hand() -> None:
    out = compute("layer_norm", {"x": [[[1.0, 2.0, 3.0]]]}, epsilon=0.0)["output"]
    # mean 2, biased variance 2/3 -> (x - 2) * sqrt(3/2)
    np.testing.assert_allclose(out, [[[-math.sqrt(1.5), 0.0, math.sqrt(1.5)]]], atol=1e-15)


def test_layer_norm_uses_gamma_beta_and_epsilon() -> None:
    x = [[[1.0, 2.0, 3.0]]]
    plain = compute("layer_norm", {"x": x}, epsilon=0.0)["output"]
    scaled = compute("layer_norm", {"x": x, "gamma": [2.0] * 3, "beta": [1.0] * 3}, epsilon=0.0)
    np.testing.assert_allclose(scaled["output"], 2.0 * plain + 1.0, atol=1e-15)
    default_eps = compute("layer_norm", {"x": x})["output"]
    expected = np.array([-1.0, 0.0, 1.0]) / math.sqrt(2.0 / 3.0 + 1e-6)
    np.testing.assert_allclose(default_eps[0, 0], expected, atol=1e-15)
    keras_eps = compute("layer_norm", {"x": x}, epsilon=1e-3)["output"]
    assert np.max(np.abs(keras_eps - default_eps)) > 1e-4  # eps mix-ups are visible


def test_post_norm_sublayer_rows_are_normalised() -> None:
    arrays, result = run("sublayer")
    unit = compute("sublayer", {k: v for k, v in arrays.items() if k not in {"gamma", "beta"}})
    np.testing.assert_allclose(unit["output"].mean(axis=-1), 0.0, atol=1e-12)
    np.testing.assert_allclose(unit["output"].var(axis=-1), 1.0, atol=1e-5)
    ffn = compute("ffn", {k: arrays[k] for k in ("x", "W_1", "b_1", "W_2", "b_2")})["output"]
    ln = compute(
        "layer_norm", {"x": arrays["x"] + ffn, "gamma": arrays["gamma"], "beta": arrays["beta"]}
    )
    np.testing.assert_allclose(result["output"], ln["output"], atol=1e-12)


def test_pre_norm_sublayer_adds_the_ffn_of_the_normalised_input() -> None:
    arrays, result = run("sublayer", params={"norm": "pre"})
    ln = compute("layer_norm", {k: arrays[k] for k in ("x", "gamma", "beta")})["output"]
    ffn_weights = {k: arrays[k] for k in ("W_1", "b_1", "W_2", "b_2")}
    ffn = compute("ffn", {"x": ln, **ffn_weights})
    np.testing.assert_allclose(result["output"], arrays["x"] + ffn["output"], atol=1e-12)
    np.testing.assert_array_equal(result["hidden"], ffn["hidden"])


def test_pre_and_post_norm_differ() -> None:
    post = run("sublayer")[1]["output"]
    pre = run("sublayer", params={"norm": "pre"})[1]["output"]
    assert np.max(np.abs(post - pre)) > 0.1
