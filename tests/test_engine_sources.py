"""Snippets from files and from the team's own modules; timings, shapes and environment."""

from __future__ import annotations

import dataclasses

import pytest

from formula_check.model import CheckSpec, Location, Status, TimingSpec
from formula_check.snippets import resolve_code
from support import PROJECT, run, shared_engine, spec_for

pytestmark = pytest.mark.tf
HERE = Location("docs/page.md", 12)


def code_spec(reference: str, oracle: str, **fields: object) -> CheckSpec:
    return CheckSpec("blk", HERE, oracle, resolve_code(reference, PROJECT, HERE), **fields)  # type: ignore[arg-type]


def test_module_snippet_is_verified_and_reports_its_files() -> None:
    result = shared_engine().check(
        code_spec("team_model.layers:attention", "attention", mask="padding")
    )
    assert result.status is Status.VERIFIED, result.headline()


def test_module_snippet_error_points_into_the_module_file() -> None:
    result = shared_engine().check(code_spec("team_model.layers:broken", "attention"))
    assert result.status is Status.ERROR
    assert result.failure is not None
    assert result.failure.location == Location("team_model/layers.py", 17)


def test_file_snippet_right_and_wrong() -> None:
    engine = shared_engine()
    assert engine.check(code_spec("code/ffn.py:feed_forward", "ffn")).status is Status.VERIFIED
    wrong = engine.check(code_spec("code/ffn.py:wrong_feed_forward", "ffn"))
    assert wrong.status is Status.MISMATCH
    failing = engine.check(code_spec("code/ffn.py:failing", "ffn"))
    assert failing.failure is not None and failing.failure.location == Location("code/ffn.py", 13)


def test_missing_file_is_a_clear_error() -> None:
    from formula_check.errors import SnippetError

    with pytest.raises(SnippetError, match=r"snippet file 'code/nope\.py' does not exist"):
        resolve_code("code/nope.py:f", PROJECT, HERE)


def test_timings_shapes_and_environment() -> None:
    from implementations import SDPA

    spec = spec_for("attention", SDPA, timing=True, mask="causal")
    spec = dataclasses.replace(
        spec, timing=TimingSpec(repeats=5, dims={"n": 64, "m": 64, "d_k": 32, "d_v": 32})
    )
    result = shared_engine().check(spec)
    assert result.status is Status.VERIFIED
    labels = [t.label for t in result.timings]
    assert labels == ["eager (timing)", "tf.function (timing)", "oracle (NumPy float64)"]
    graph = result.timings[1]
    assert graph.first > 0 and graph.repeats == 5 and graph.median > 0
    assert all(t.spread >= 0 for t in result.timings)
    shapes = {s.name: s.describe() for s in result.shapes}
    assert shapes["q"] == "q (b, n, d_k) = (2, 5, 6)"
    assert shapes["weights"] == "weights (b, n, m) = (2, 5, 7)"
    assert result.environment.tf_version.startswith("2.")
    assert result.environment.device.startswith(("CPU", "GPU"))
    assert result.environment.threads >= 1
    assert result.arrays["weights"].shape == (2, 5, 7)


def test_sweep_times_each_size() -> None:
    from implementations import SDPA

    spec = dataclasses.replace(
        spec_for("attention", SDPA, timing=True),
        sweep=(16, 32, 64),
        sweep_dim="n",
        timing=TimingSpec(repeats=3),
    )
    result = shared_engine().check(spec)
    assert [p.size for p in result.sweep] == [16, 32, 64]
    assert all(p.median > 0 for p in result.sweep)


def test_keras_mha_weights_reshaped_per_head() -> None:
    from implementations import KERAS_MHA_FACTORY

    result = shared_engine().check(
        spec_for("multihead", KERAS_MHA_FACTORY, preset="keras-mha", mask="causal")
    )
    assert result.status is Status.VERIFIED, result.headline()
    shapes = {s.name: s.shape for s in result.shapes}
    assert shapes["W_q"] == (12, 12) and shapes["W_o"] == (12, 12)
    assert result.arrays["weights"].shape == (2, 3, 5, 7)


def test_a_callable_the_snippet_only_names_is_checked_through_entry() -> None:
    """``MHA = tf.keras.layers.MultiHeadAttention`` defines nothing: without ``entry`` the
    error says how to name it, and with ``entry="MHA"`` it is checked."""
    alias = "import tensorflow as tf\n\nSM = tf.nn.softmax\n"
    unnamed = run("softmax", alias)
    assert unnamed.status is Status.ERROR and unnamed.failure is not None
    assert 'say entry="MHA"' in unnamed.failure.message
    assert run("softmax", alias, entry="SM").status is Status.VERIFIED
