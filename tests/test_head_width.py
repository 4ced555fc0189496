"""A head width stated apart from ``d_model / h`` (Keras' ``key_dim``) is used as written."""

from __future__ import annotations

import math

import numpy as np
import pytest

from formula_check.errors import OracleError, SpecError
from formula_check.model import Status
from formula_check.oracles import get_oracle
from formula_check.planning.plan import plan_check
from implementations import CORRECT, KERAS_MHA_FACTORY
from support import run, spec_for


def sizes(**given: int) -> dict[str, int]:
    oracle = get_oracle("multihead")
    return oracle.resolve_dims(given, oracle.params)


def test_an_unstated_head_width_follows_d_model() -> None:
    assert sizes(d_model=16, h=8)["depth"] == 2
    resolved = sizes(d_model=512, h=8)
    assert (resolved["depth"], resolved["depth_v"], resolved["h*depth"]) == (64, 64, 512)


def test_a_stated_head_width_is_used_as_written() -> None:
    resolved = sizes(d_model=12, h=3, depth=12)  # the tutorial's key_dim=d_model
    assert (resolved["depth"], resolved["depth_v"], resolved["h*depth"]) == (12, 12, 36)
    oracle = get_oracle("multihead")
    shapes = {t.name: t.shape(resolved) for t in oracle.weights}
    assert shapes["W_q"] == shapes["W_k"] == shapes["W_v"] == (12, 36)
    assert shapes["W_o"] == (36, 12)
    assert shapes["b_q"] == (36,)


def test_a_stated_head_width_needs_no_divisible_d_model() -> None:
    assert sizes(d_model=10, h=3, depth=4)["h*depth"] == 12
    with pytest.raises(OracleError, match=r"or the head width stated \(dims=\"depth=…\"\)"):
        sizes(d_model=10, h=3)


def test_a_value_width_of_its_own() -> None:
    resolved = sizes(d_model=12, h=3, depth=5, depth_v=7)
    oracle = get_oracle("multihead")
    shapes = {t.name: t.shape(resolved) for t in oracle.weights}
    assert shapes["W_k"] == (12, 15)
    assert shapes["W_v"] == (12, 21)
    assert shapes["W_o"] == (21, 12)


def test_wide_heads_are_attended_and_scaled_by_their_own_width() -> None:
    oracle = get_oracle("multihead")
    resolved = sizes(d_model=6, h=2, depth=5)
    rng = np.random.default_rng(0)
    arrays = {
        **oracle.make_inputs(resolved, rng, oracle.params),
        **oracle.make_weights(resolved, rng),
    }
    result = oracle.compute(arrays, {**oracle.params, **resolved})
    q, k, v = (arrays[t] @ arrays[f"W_{t}"] + arrays[f"b_{t}"] for t in "qkv")
    heads = []
    for head in range(2):
        cols = slice(5 * head, 5 * head + 5)
        logits = q[..., cols] @ np.swapaxes(k[..., cols], -1, -2) / math.sqrt(5)
        weights = np.exp(logits - logits.max(-1, keepdims=True))
        weights /= weights.sum(-1, keepdims=True)
        np.testing.assert_allclose(result["weights"][:, head], weights, atol=1e-12)
        heads.append(weights @ v[..., cols])
    expected = np.concatenate(heads, -1) @ arrays["W_o"] + arrays["b_o"]
    np.testing.assert_allclose(result["output"], expected, atol=1e-12)


def test_the_keras_preset_builds_the_stated_key_dim() -> None:
    spec = spec_for(
        "multihead",
        KERAS_MHA_FACTORY,
        preset="keras-mha",
        dims={"d_model": 12, "h": 3, "depth": 12},
        mask="padding",
    )
    plan = plan_check(spec, ".")
    assert plan.request.init == {"num_heads": 3, "key_dim": 12}
    assert plan.weights["W_q"].shape == (12, 36)


@pytest.mark.tf
def test_keras_key_dim_d_model_is_verified_and_one_that_ignores_it_is_an_error() -> None:
    oracle, source, options = CORRECT["multihead-keras-key-dim-d-model"]
    assert run(oracle, source, **options).status is Status.VERIFIED
    ignoring = source.replace("key_dim=key_dim", "key_dim=12 // num_heads")
    with pytest.raises(SpecError) as raised:
        run(oracle, ignoring, **options)
    assert str(raised.value).startswith("docs/page.md:6: weights: W_q has shape (12, 3, 4)")
    assert "the oracle expects (12, 36)" in raised.value.message
