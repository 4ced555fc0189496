"""Positional layers that take an input, and the halves layout of the encoding (pure)."""

from __future__ import annotations

import math
import re
from typing import Any

import numpy as np
import pytest

from formula_check.errors import OracleError
from formula_check.oracles import get_oracle
from formula_check.oracles.tolerance import derive, rounding_samples


def drive(
    name: str, dims: dict[str, int] | None = None, **params: Any
) -> tuple[dict[str, Any], ...]:
    oracle = get_oracle(name)
    merged = {**oracle.params, **params}
    sizes = oracle.resolve_dims(dims or {}, merged)
    rng = np.random.default_rng(2)
    arrays = {**oracle.make_inputs(sizes, rng, merged), **oracle.make_weights(sizes, rng)}
    full = {**merged, **sizes}
    return arrays, dict(oracle.compute(arrays, full)), full


def encoding(n: int, d: int, layout: str = "interleaved") -> np.ndarray:
    return get_oracle("positional_encoding").compute({}, {"n": n, "d_model": d, "layout": layout})[
        "output"
    ]


def test_halves_put_every_sine_first_then_every_cosine() -> None:
    halves = encoding(3, 8, "halves")
    interleaved = encoding(3, 8)
    np.testing.assert_array_equal(halves[:, :4], interleaved[:, 0::2])
    np.testing.assert_array_equal(halves[:, 4:], interleaved[:, 1::2])
    np.testing.assert_allclose(halves[1, 1], math.sin(1 / 10000 ** (2 / 8)), atol=1e-15)
    np.testing.assert_allclose(halves[1, 5], math.cos(1 / 10000 ** (2 / 8)), atol=1e-15)


def test_an_unknown_layout_is_named() -> None:
    oracle = get_oracle("positional_encoding")
    with pytest.raises(OracleError, match=re.escape("param layout must be one of 'interleaved'")):
        oracle.resolve_dims({}, {**oracle.params, "layout": "blocks"})


def test_the_halves_tolerance_is_derived_like_the_interleaved_one() -> None:
    oracle = get_oracle("positional_encoding")
    params = {"base": 10000.0, "layout": "halves", "n": 2048, "d_model": 16}
    expected = oracle.compute({}, params)
    tolerance = derive(
        "output", expected["output"], rounding_samples(oracle.compute, {}, params, expected, 0)
    )
    assert tolerance is not None and tolerance.derived


@pytest.mark.parametrize("scaled", [False, True])
def test_an_encoding_is_added_to_the_input(scaled: bool) -> None:
    arrays, result, _ = drive("add_positional_encoding", scaled=scaled)
    x = arrays["x"]
    scale = math.sqrt(16) if scaled else 1.0
    np.testing.assert_allclose(result["output"], x * scale + encoding(5, 16), atol=1e-12)
    _, halves, _ = drive("add_positional_encoding", layout="halves")
    np.testing.assert_allclose(halves["output"], x + encoding(5, 16, "halves"), atol=1e-12)


def test_an_input_longer_than_the_table_is_an_error() -> None:
    oracle = get_oracle("add_positional_encoding")
    with pytest.raises(OracleError, match=re.escape("n (12) must not exceed max_len (10)")):
        oracle.resolve_dims({"n": 12, "max_len": 10}, oracle.params)
    with pytest.raises(OracleError, match="param scaled must be true or false"):
        oracle.resolve_dims({}, {**oracle.params, "scaled": "yes"})


def test_the_far_regime_covers_the_whole_table() -> None:
    oracle = get_oracle("sinusoidal_embedding")
    (regime,) = oracle.input_regimes()
    assert regime.sizes is not None
    assert regime.sizes(oracle.resolve_dims({}, oracle.params))["n"] == 2048


def test_a_sinusoidal_embedding_scales_the_token_rows() -> None:
    arrays, result, _ = drive("sinusoidal_embedding", layout="halves")
    ids = arrays["ids"].astype(int)
    assert ids.max() == 10  # the last id of the vocabulary is drawn
    rows = arrays["tokens"][ids] * math.sqrt(16)
    np.testing.assert_allclose(result["output"], rows + encoding(5, 16, "halves"), atol=1e-12)


def test_a_learned_embedding_adds_the_position_rows() -> None:
    arrays, result, _ = drive("learned_embedding")
    ids = arrays["ids"].astype(int)
    expected = arrays["tokens"][ids] + arrays["positions"][:5]
    np.testing.assert_allclose(result["output"], expected, atol=1e-12)
    assert [w.name for w in get_oracle("learned_embedding").weights] == ["tokens", "positions"]


def test_ids_moved_by_an_ulp_still_name_their_rows() -> None:
    arrays, result, params = drive("learned_embedding")
    moved = {**arrays, "ids": arrays["ids"] * (1 + 2e-7)}
    again = get_oracle("learned_embedding").compute(moved, params)
    np.testing.assert_array_equal(again["output"], result["output"])
    outside = {**arrays, "ids": np.full((2, 5), 11.0)}
    with pytest.raises(OracleError, match=re.escape("token id 11 is outside [0, 11)")):
        get_oracle("learned_embedding").compute(outside, params)
