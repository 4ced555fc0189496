"""Composite oracles: built from the builtin ones, equal to composing them by hand (pure)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

import numpy as np
import pytest

from formula_check.errors import OracleError
from formula_check.oracles import get_oracle
from formula_check.oracles.base import KEEP_PARAM
from formula_check.oracles.compose import Add, Apply, Rename, compose, residual
from formula_check.oracles.composite import LARGE_WEIGHTS
from formula_check.oracles.layers import FFN, LAYER_NORM
from formula_check.oracles.tensors import X, tensor
from formula_check.oracles.tolerance import derive, rounding_samples

COMPOSITES = (
    "attention_sublayer",
    "cross_attention_sublayer",
    "add_norm",
    "encoder_layer",
    "decoder_layer",
)

Arrays = dict[str, np.ndarray]


def drive(
    name: str, dims: Mapping[str, int] | None = None, **params: Any
) -> tuple[Arrays, Arrays, dict[str, Any]]:
    """(arrays fed in, result, params with sizes), the way the engine drives an oracle."""
    oracle = get_oracle(name)
    merged = {**oracle.params, **params}
    sizes = oracle.resolve_dims(dims or {}, merged)
    rng = np.random.default_rng(1)
    arrays = {**oracle.make_inputs(sizes, rng, merged), **oracle.make_weights(sizes, rng)}
    full = {**merged, **sizes}
    return arrays, dict(oracle.compute(arrays, full)), full


def part(arrays: Mapping[str, np.ndarray], prefix: str) -> Arrays:
    """The weights of one sublayer, without their prefix."""
    return {k.split(".", 1)[1]: v for k, v in arrays.items() if k.startswith(f"{prefix}.")}


def mha(x: np.ndarray, context: np.ndarray, weights: Arrays, h: int, **extra: Any) -> Arrays:
    multihead = get_oracle("multihead")
    arrays = {"q": x, "k": context, "v": context, **weights}
    return dict(multihead.compute(arrays, {**multihead.params, "h": h, **extra}))


def norm(x: np.ndarray, weights: Arrays, epsilon: float = 1e-6) -> np.ndarray:
    return LAYER_NORM.compute({"x": x, **weights}, {"epsilon": epsilon})["output"]


def ffn(x: np.ndarray, weights: Arrays) -> np.ndarray:
    return FFN.compute({"x": x, **weights}, {})["output"]


@pytest.mark.parametrize("name", COMPOSITES)
def test_composites_are_registered_with_complete_metadata(name: str) -> None:
    oracle = get_oracle(name)
    assert oracle.title and oracle.summary.endswith(".")
    assert oracle.latex.count("{") == oracle.latex.count("}")
    resolved = oracle.resolve_dims({}, oracle.params)
    free = [size for dim, size in resolved.items() if dim not in oracle.derived_dims]
    assert len(set(free)) == len(free), resolved
    for spec in (*oracle.inputs, *oracle.weights, *oracle.outputs):
        assert all(d in resolved for d in spec.dims if not d.isdigit()), spec


def test_weights_are_the_parts_under_their_prefixes() -> None:
    names = [w.name for w in get_oracle("encoder_layer").weights]
    assert names == [
        *(f"attn.{kind}_{part}" for part in "qkvo" for kind in "Wb"),
        "norm1.gamma", "norm1.beta",
        "ffn.W_1", "ffn.b_1", "ffn.W_2", "ffn.b_2",
        "norm2.gamma", "norm2.beta",
    ]  # fmt: skip
    decoder = {w.name for w in get_oracle("decoder_layer").weights}
    assert {"self_attn.W_q", "cross_attn.W_o", "norm3.beta", "ffn.W_2"} <= decoder
    biases = [w for w in get_oracle("encoder_layer").weights if w.name.startswith("attn.b_")]
    assert all(w.optional for w in biases)


def test_a_stated_head_width_reaches_the_parts() -> None:
    oracle = get_oracle("encoder_layer")
    sizes = oracle.resolve_dims({"d_model": 12, "h": 3, "depth": 12}, oracle.params)
    assert oracle.tensor("attn.W_q").shape(sizes) == (12, 36)
    assert oracle.tensor("attn.W_o").shape(sizes) == (36, 12)
    assert oracle.resolve_dims({}, oracle.params)["h*depth"] == 12
    with pytest.raises(OracleError, match=re.escape("d_model (10) must be divisible by h (3)")):
        oracle.resolve_dims({"d_model": 10}, oracle.params)


@pytest.mark.parametrize("placement", ["post", "pre"])
def test_encoder_layer_is_its_sublayers_composed_by_hand(placement: str) -> None:
    arrays, result, params = drive("encoder_layer", norm=placement)
    x, h = arrays["x"], params["h"]
    attn, ffn_weights = part(arrays, "attn"), part(arrays, "ffn")
    norm1, norm2 = part(arrays, "norm1"), part(arrays, "norm2")
    if placement == "post":
        y = norm(x + mha(x, x, attn, h)["output"], norm1)
        expected = norm(y + ffn(y, ffn_weights), norm2)
    else:
        y = x + mha(norm(x, norm1), norm(x, norm1), attn, h)["output"]
        expected = y + ffn(norm(y, norm2), ffn_weights)
    np.testing.assert_allclose(result["output"], expected, atol=1e-12)
    assert result["weights"].shape == (2, 3, 5, 5)
    assert result["hidden"].shape == (2, 5, 9)


def test_decoder_layer_attends_causally_then_to_the_context() -> None:
    arrays, result, params = drive("decoder_layer")
    x, context, h = arrays["x"], arrays["context"], params["h"]
    own = mha(x, x, part(arrays, "self_attn"), h, variant="causal")
    y = norm(x + own["output"], part(arrays, "norm1"))
    z = norm(y + mha(y, context, part(arrays, "cross_attn"), h)["output"], part(arrays, "norm2"))
    expected = norm(z + ffn(z, part(arrays, "ffn")), part(arrays, "norm3"))
    np.testing.assert_allclose(result["output"], expected, atol=1e-12)
    future = ~np.tril(np.ones((5, 5), dtype=bool))
    assert np.all(result["weights"][:, :, future] == 0.0)
    assert result["cross_weights"].shape == (2, 3, 5, 7)


def test_the_blocks_mask_goes_to_the_attention() -> None:
    arrays, _, params = drive("encoder_layer")
    keep = np.ones((2, 5, 5), dtype=bool)
    keep[0, :, 3:] = False
    masked = get_oracle("encoder_layer").compute({**arrays, "mask": keep}, params)
    assert np.all(masked["weights"][0, :, :, 3:] == 0.0)
    decoder_arrays, _, decoder_params = drive("decoder_layer")
    cross_keep = np.ones((2, 5, 7), dtype=bool)
    cross_keep[1, :, 4:] = False
    both = get_oracle("decoder_layer").compute(
        {**decoder_arrays, "mask": cross_keep}, decoder_params
    )
    assert np.all(both["cross_weights"][1, :, :, 4:] == 0.0)
    assert np.all(both["weights"][:, :, ~np.tril(np.ones((5, 5), dtype=bool))] == 0.0)


def test_causal_attention_sublayer_and_cross_sublayer() -> None:
    arrays, result, params = drive("attention_sublayer", variant="causal", norm="pre")
    x = arrays["x"]
    normed = norm(x, part(arrays, "norm"))
    own = mha(normed, normed, part(arrays, "attn"), params["h"], variant="causal")
    np.testing.assert_allclose(result["output"], x + own["output"], atol=1e-12)
    arrays, result, params = drive("cross_attention_sublayer", norm="pre")
    x, context = arrays["x"], arrays["context"]
    normed = norm(x, part(arrays, "norm"))
    cross = mha(normed, context, part(arrays, "attn"), params["h"])  # the context as it is
    np.testing.assert_allclose(result["output"], x + cross["output"], atol=1e-12)


def test_add_norm_adds_then_normalises() -> None:
    arrays, result, _ = drive("add_norm")
    expected = norm(arrays["x"] + arrays["y"], {k: arrays[k] for k in ("gamma", "beta")})
    np.testing.assert_allclose(result["output"], expected, atol=1e-12)


@pytest.mark.parametrize(
    ("name", "params", "message"),
    [
        ("encoder_layer", {"norm": "middle"}, "param norm must be one of 'post', 'pre'"),
        ("attention_sublayer", {"variant": "cross"}, "param variant must be one of 'self'"),
    ],
)
def test_bad_params_are_named(name: str, params: dict[str, Any], message: str) -> None:
    oracle = get_oracle(name)
    with pytest.raises(OracleError, match=re.escape(message)):
        oracle.resolve_dims({}, {**oracle.params, **params})


@pytest.mark.parametrize("name", COMPOSITES)
def test_the_tolerance_is_derived_from_the_composites_own_float32_runs(name: str) -> None:
    arrays, _, params = drive(name)
    rounded = {k: v.astype(np.float32).astype(np.float64) for k, v in arrays.items()}
    oracle = get_oracle(name)
    expected = dict(oracle.compute(rounded, params))
    samples = rounding_samples(oracle.compute, rounded, params, expected, seed=0)
    tolerance = derive("output", expected["output"], samples)
    assert tolerance is not None and tolerance.derived
    assert 0 < float(np.max(tolerance.allowed)) < 1e-3


def test_large_weights_are_for_pre_norm_blocks_only() -> None:
    assert LARGE_WEIGHTS.weight_scale == 4.0
    assert LARGE_WEIGHTS.inputs is not None
    standard = {"x": np.ones((1, 2, 3))}
    rng = np.random.default_rng(0)
    assert LARGE_WEIGHTS.inputs(standard, {}, rng, {"norm": "post"}) is None
    assert LARGE_WEIGHTS.inputs(standard, {}, rng, {"norm": "pre", KEEP_PARAM: None}) is not None


# composing one's own ------------------------------------------------------------------------


def _sandwich(params: Mapping[str, Any]) -> tuple[Apply | Add | Rename, ...]:
    """A layer of one's own: a norm, a feed-forward sublayer, a norm (weights shared by none)."""
    return (
        Apply(LAYER_NORM, "pre", {"x": "x"}, "x"),
        *residual(FFN, "ffn", {"x": "x"}, norm="post", placement="post"),
        Rename("x", "output"),
    )


def test_a_users_composite_threads_streams_and_namespaces_weights() -> None:
    sandwich = compose(
        "sandwich",
        "Sandwich",
        r"\text{LayerNorm}(y + \text{FFN}(y)), y = \text{LayerNorm}(x)",
        layout=_sandwich,
        inputs=(X,),
        outputs=(tensor("output", "b n d_model"),),
        dims={"b": 2, "n": 3, "d_model": 4, "d_ff": 5},
        params={"epsilon": 1e-6},
    )
    assert [w.name for w in sandwich.weights] == [
        "pre.gamma", "pre.beta", "ffn.W_1", "ffn.b_1", "ffn.W_2", "ffn.b_2",
        "post.gamma", "post.beta",
    ]  # fmt: skip
    sizes = sandwich.resolve_dims({}, sandwich.params)
    rng = np.random.default_rng(0)
    arrays = {**sandwich.make_inputs(sizes, rng, {}), **sandwich.make_weights(sizes, rng)}
    result = sandwich.compute(arrays, {**sandwich.params, **sizes})
    y = norm(arrays["x"], part(arrays, "pre"))
    expected = norm(y + ffn(y, part(arrays, "ffn")), part(arrays, "post"))
    np.testing.assert_allclose(result["output"], expected, atol=1e-12)


def test_a_composite_whose_steps_write_no_output_says_so() -> None:
    broken = compose(
        "broken",
        "Broken",
        "y = x",
        layout=lambda params: (Apply(LAYER_NORM, "", {"x": "x"}, "y"),),
        inputs=(X,),
        outputs=(tensor("output", "b n d_model"),),
        dims={"b": 2, "n": 3, "d_model": 4},
    )
    with pytest.raises(OracleError, match="no step writes output"):
        broken.compute({"x": np.ones((2, 3, 4))}, {})
