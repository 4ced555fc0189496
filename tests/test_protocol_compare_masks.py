"""Pure pieces: the wire protocol, the comparison, the masks."""

from __future__ import annotations

import io
from typing import Any

import numpy as np
import pytest

from formula_check import wire
from formula_check.checking.compare import delta_array, squeeze_leading
from formula_check.errors import SpecError
from formula_check.planning.masks import keep_mask, snippet_mask
from support import compare


def test_protocol_round_trip_keeps_dtypes_and_shapes() -> None:
    arrays = {
        "f": np.arange(6, dtype=np.float32).reshape(2, 3),
        "b": np.array([True, False]),
        "i": np.array(7, dtype=np.int64),
        "e": np.zeros((0, 4)),
    }
    header, back = wire.decode(wire.encode({"x": [1, "two"]}, arrays))
    assert header == {"x": [1, "two"]}
    for name, value in arrays.items():
        assert back[name].dtype == value.dtype and back[name].shape == value.shape
        assert np.array_equal(back[name], value)


def test_protocol_refuses_objects_and_foreign_versions() -> None:
    with pytest.raises(wire.ProtocolError, match="unsupported dtype"):
        wire.encode({}, {"o": np.array([object()])})
    message = bytearray(wire.encode({}, {}))
    message[4] = 99
    with pytest.raises(wire.ProtocolError, match="protocol version 99"):
        wire.decode(bytes(message))
    with pytest.raises(wire.ProtocolError, match="not a formula-check message"):
        wire.decode(b"PICKLE" + bytes(30))


def test_protocol_stream_reads_one_message_at_a_time() -> None:
    stream = io.BytesIO(wire.encode({"n": 1}) + wire.encode({"n": 2}, {"a": np.ones(3)}))
    assert wire.read_message(stream)[0] == {"n": 1}
    assert wire.read_message(stream)[0] == {"n": 2}
    with pytest.raises(EOFError):
        wire.read_message(stream)
    with pytest.raises(wire.ProtocolError, match="stream closed"):
        wire.read_message(io.BytesIO(wire.encode({"n": 3})[:-2]))


def test_compare_is_absolute_dominated() -> None:
    expected = np.array([1e-9, 1.0, -2.0])
    ok = compare("o", expected + 5e-7, expected, ("n",), atol=1e-5, rtol=1e-5)
    assert ok.ok and ok.max_rel > 100  # huge relative error near zero is fine
    bad = compare("o", expected + np.array([0, 0, 1e-3]), expected, ("n",), atol=1e-5, rtol=1e-5)
    assert not bad.ok and bad.worst_index == (2,) and bad.n_bad == 1 and bad.n_total == 3
    assert bad.worst_expected == -2.0 and abs(bad.max_abs - 1e-3) < 1e-12
    assert "max |Δ| = 0.001 at (2) [expected -2, got -1.999], tolerance there 3e-05" in (
        bad.summary()
    )


def test_a_pass_says_how_much_of_its_tolerance_it_used() -> None:
    """|Δ| above atol passes on a large expected value; the line says the share of each
    element's whole tolerance (atol + rtol * |expected|) used, never that |Δ| <= atol."""
    within_atol = compare("y", np.array([1.0 + 5e-7]), np.array([1.0]), ("n",), 1e-6, 1e-5)
    assert within_atol.ok and within_atol.summary() == (
        "y: max |Δ| = 5e-07, within tolerance (5% of it used)"
    )
    relative = compare("y", np.array([100.0 + 5e-4]), np.array([100.0]), ("n",), 1e-6, 1e-5)
    assert relative.ok and relative.max_abs > relative.atol
    assert relative.summary() == "y: max |Δ| = 0.0005, within tolerance (50% of it used)"


def test_compare_nonfinite_and_shapes() -> None:
    expected = np.ones((2, 3))
    nan = compare("o", np.full((2, 3), np.nan), expected, ("b", "n"), 1e-5, 1e-5)
    assert not nan.ok and nan.nonfinite == 6
    inf = compare("o", np.full((2, 3), np.inf), expected, ("b", "n"), 1e-5, 1e-5)
    assert not inf.ok
    shape = compare("o", np.ones((3, 2)), expected, ("b", "n"), 1e-5, 1e-5)
    assert shape.problem == "shape mismatch: expected (b, n) = (2, 3), got (3, 2) — read as (n, b)"
    rank = compare("o", np.ones((2, 3, 1)), expected, ("b", "n"), 1e-5, 1e-5)
    assert rank.problem == "shape mismatch: expected (b, n) = (2, 3), got (2, 3, 1)"


INF, NAN = np.inf, np.nan


@pytest.mark.parametrize(
    ("actual", "expected", "problem"),
    [
        (
            [1.0, INF, NAN, -INF, 0.5],
            [INF, INF, 1.0, NAN, 0.5],
            "3 NaN/Inf values in the result; 3 in the oracle's expected values",
        ),
        ([1.0, 2.0, 3.0], [INF, NAN, 3.0], "2 NaN/Inf values in the oracle's expected values"),
        ([INF, -INF, 3.0], [1e308, -1e308, 3.0], "2 NaN/Inf values in the result"),
        (
            [INF, INF, 0.5],
            [INF, INF, 0.5],
            "2 NaN/Inf values in the result; 2 in the oracle's expected values",
        ),
    ],
)
def test_nonfinite_values_are_a_mismatch_that_says_so_quietly(
    actual: list[float], expected: list[float], problem: str
) -> None:
    """No NumPy RuntimeWarning (the suite turns warnings into errors): the verdict says it."""
    verdict = compare("o", np.array(actual), np.array(expected), ("n",), 1e-5, 1e-5)
    assert not verdict.ok and verdict.problem == problem
    assert verdict.summary() == f"o: {problem}"
    assert verdict.n_bad >= 2 and verdict.max_abs == INF
    assert verdict.nonfinite == int(np.count_nonzero(~np.isfinite(actual)))
    delta = delta_array(np.array(actual), np.array(expected))
    assert delta is not None and delta[-1] == 0.0  # the finite element agrees


def test_huge_finite_values_compare_without_overflow_warnings() -> None:
    verdict = compare("o", np.array([1e308, -1e308]), np.array([-1e308, 1e308]), ("n",), 0, 1e-5)
    assert not verdict.ok and verdict.max_abs == INF and verdict.problem == ""
    assert verdict.summary().startswith("o: max |Δ| = inf at (0) [expected -1e+308, got 1e+308]")


def test_compare_per_position_tolerance() -> None:
    expected = np.zeros((3, 2))
    atol = np.array([[1e-5], [1e-3], [1e-1]])
    actual = np.array([[0, 0], [5e-4, 0], [5e-2, 0]])
    assert compare("pe", actual, expected, ("n", "d"), atol, 0.0).ok
    actual[0, 0] = 5e-4
    verdict = compare("pe", actual, expected, ("n", "d"), atol, 0.0)
    assert not verdict.ok and verdict.worst_index == (0, 0)


def test_squeeze_leading_only_drops_size_one() -> None:
    assert squeeze_leading(np.ones((1, 5, 4)), 2).shape == (5, 4)
    assert squeeze_leading(np.ones((2, 5, 4)), 2).shape == (2, 5, 4)


def test_masks() -> None:
    rng = np.random.default_rng(0)
    causal = keep_mask("causal", 2, 4, 4, rng)
    assert np.array_equal(causal[0], np.tril(np.ones((4, 4), dtype=bool)))
    padding = keep_mask("padding", 3, 4, 6, rng)
    assert padding.any(axis=-1).all() and not padding.all()
    both = keep_mask("both", 2, 5, 7, rng)
    assert both.any(axis=-1).all()
    axes = ("b", "n", "m")
    additive = snippet_mask(causal, "additive", ("b", "1", "n", "m"), axes)
    assert additive.shape == (2, 1, 4, 4) and additive.dtype == np.float32
    assert np.array_equal(additive[:, 0] == 1.0, ~causal)
    assert snippet_mask(causal, "keep", axes, axes).dtype == bool
    assert snippet_mask(causal, "keep-float", axes, axes).dtype == np.float32
    with pytest.raises(SpecError, match="leaves out the query axis"):
        snippet_mask(causal, "keep", ("b", "m"), axes)


def _blind_spots(oracle: str, dims: str, **fields: Any) -> list[str]:
    from formula_check.checking.result_notes import blind_spots
    from formula_check.model import CheckSpec, Location, frozen_map
    from formula_check.planning.plan import plan_check
    from formula_check.snippets import inline_snippet

    where = Location("docs/page.md", 3)
    sizes = frozen_map({name: int(size) for name, size in (p.split("=") for p in dims.split())})
    spec = CheckSpec(
        "b", where, oracle, inline_snippet("def f(): pass\n", where), dims=sizes, **fields
    )
    return blind_spots(plan_check(spec, "."))


def test_sizes_and_masks_that_cannot_reveal_a_drift_are_said() -> None:
    assert _blind_spots("attention", "b=2 n=5 m=7 d_k=6 d_v=4") == []
    assert _blind_spots("attention", "b=2 n=6 m=6 d_k=8 d_v=8") == [
        "n = m = 6: code that mixes up n and m cannot be told apart at these sizes; "
        "give them different sizes",
        "d_k = d_v = 8: code that mixes up d_k and d_v cannot be told apart at these sizes; "
        "give them different sizes",
    ]
    assert _blind_spots("attention", "b=2 n=6 m=6 d_k=8 d_v=4", mask="causal") == [], (
        "a causal mask makes the queries the keys"
    )
    assert _blind_spots("attention", "b=2 n=5 m=1 d_k=8 d_v=4", mask="padding") == [
        "m = 1: a size of 1 hides code that works along the wrong axis there (a softmax, a "
        "mask, a transpose); give it a size above 1",
        "the padding mask hides nothing at these sizes, so code that ignores it cannot be "
        "told apart",
    ]


def test_a_self_attention_mask_named_once_is_its_key_axis_and_lengths_its_queries() -> None:
    """Self-attention's mask axes are (b, n, n): a padding mask written ``b 1 1 n`` (the
    tutorial's) or ``b n`` (Keras' padding mask) runs along the keys; valid lengths ``b n``,
    which count keys, have one per query."""
    rng = np.random.default_rng(1)
    axes = ("b", "n", "n")
    padding = keep_mask("padding", 2, 5, 5, rng)
    tutorial = snippet_mask(padding, "additive", ("b", "1", "1", "n"), axes)
    assert np.array_equal(tutorial[:, 0, 0] == 0.0, padding[:, 0])
    assert np.array_equal(snippet_mask(padding, "keep", ("b", "n"), axes), padding[:, 0])
    causal = keep_mask("causal", 2, 5, 5, rng)
    lengths = snippet_mask(causal, "lengths", ("b", "n"), axes)
    assert lengths.dtype == np.int32 and lengths.tolist() == [[1, 2, 3, 4, 5]] * 2
    with pytest.raises(SpecError, match="leaves out the query axis"):
        snippet_mask(causal, "keep", ("b", "1", "n"), axes)
