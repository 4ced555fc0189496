"""Graph mode is judged: what code returns as a traced ``tf.function`` graph, on the standard
inputs and on every input regime's, meets the oracle with the same tolerance as its eager
outputs, timing on or off. Code right eagerly and wrong only as a graph (on one regime alone,
too) fails, saying so; its correct twin still verifies."""

from __future__ import annotations

import json
from typing import Any

import pytest

from formula_check.checking.judge import ONLY_GRAPH
from formula_check.model import Status
from formula_check.render.report import report_json
from formula_check.results import GRAPH_MODE, CheckResult
from support import shared_engine, spec_for

pytestmark = pytest.mark.tf

SOFTMAX = """
import tensorflow as tf

def softmax(x):
    e = tf.exp(x - tf.reduce_max(x, axis=-1, keepdims=True))
    if tf.executing_eagerly():  # eagerly, each row's sum is checked on the host first
        total = tf.reduce_sum(e, axis=-1, keepdims=True)
        tf.debugging.assert_positive(total)
        return e / total
    return e / tf.reduce_sum(e, axis={graph_axis}, keepdims=True)
"""
"""A function with a path only a graph takes: wrong where that path sums over the batch."""

LAYER_NORM = """
import tensorflow as tf

class LayerNorm(tf.keras.layers.Layer):
    def build(self, shape):
        self.gamma = self.add_weight(shape=shape[-1:], initializer="ones")
        self.beta = self.add_weight(shape=shape[-1:], initializer="zeros")

    def call(self, x):
        {read_gamma}
        mean, variance = tf.nn.moments(x, axes=[-1], keepdims=True)
        return gamma * (x - mean) / tf.sqrt(variance + 1e-6) + self.beta
"""
"""A layer whose scale is read as a constant when it is traced: right as long as the weights
never move after the trace, as an eager call is."""

FOLDED = """with tf.init_scope():  # folded into the graph as a constant
            gamma = tf.constant(self.gamma.numpy())"""
READ = "gamma = self.gamma"

EAGER_ONLY = """
import numpy as np
import tensorflow as tf

def softmax(x):
    e = np.exp(x.numpy() - x.numpy().max(axis=-1, keepdims=True))
    return tf.constant(e / e.sum(axis=-1, keepdims=True))
"""
"""Code that only runs eagerly (it reads ``.numpy()``): judged eagerly, and said so."""

BY_NAME = """
import tensorflow as tf

def softmax(x):
    e = tf.exp(x - tf.reduce_max(x, axis=-1, keepdims=True))
    total = tf.reduce_sum(e, axis=-1, keepdims=True)
    return {"sums": total, "output": e / total}
"""
"""A dict read by name, its values in no oracle order: the graph's come back in the same
order, and are judged by the same names."""

MORE_AS_A_GRAPH = """
import tensorflow as tf

def softmax(x):
    e = tf.exp(x - tf.reduce_max(x, axis=-1, keepdims=True))
    output = e / tf.reduce_sum(e, axis=-1, keepdims=True)
    if tf.executing_eagerly():
        return output
    return output, e  # the graph hands back its intermediate too
"""

HELD = """
import numpy as np
import tensorflow as tf

class LayerNorm(tf.keras.layers.Layer):
    def __init__(self, d_model):
        super().__init__()
        self.gamma = {gamma}
        self.beta = {beta}

    def call(self, x):
        mean, variance = tf.nn.moments(x, axes=[-1], keepdims=True)
        return self.gamma * (x - mean) / tf.sqrt(variance + 1e-6) + self.beta
"""
"""A right layer whose weights no graph reads when it runs: a graph holds a tensor or an
array as it was traced, so the checker, which puts moved ones in their place, traces after."""

COPIED_BESIDE_AN_ARRAY = """
import numpy as np
import tensorflow as tf

class LayerNorm(tf.keras.layers.Layer):
    def __init__(self, d_model):
        super().__init__()
        self.gamma = tf.Variable(tf.ones((d_model,)))
        self.beta = np.zeros((d_model,), np.float32)
        self.scale = None

    def call(self, x):
        {copy}
        mean, variance = tf.nn.moments(x, axes=[-1], keepdims=True)
        return self.scale * (x - mean) / tf.sqrt(variance + 1e-6) + self.beta
"""
"""A layer that copies its scale variable, beside a bias kept as an array (which a graph
holds as traced): wrong where the copy is made only eagerly, so a graph keeps a stale one."""

COPY_WHEN_EAGER = """if tf.executing_eagerly() or self.scale is None:
            self.scale = tf.identity(self.gamma)"""
COPY_ALWAYS = "self.scale = tf.identity(self.gamma)"

CACHED = """
import tensorflow as tf

_transposed = {{}}

def ffn(x, w1, b1, w2, b2):
    key = tuple(w1.shape)
    {refresh}_transposed[key] = tf.transpose(w1)
    hidden = tf.nn.relu(tf.matmul(x, _transposed[key], transpose_b=True) + b1)
    return tf.matmul(hidden, w2) + b2
"""
"""A function that caches its kernel transposed: wrong where the cache is refreshed only
eagerly, so a graph keeps the kernel of the call before its trace, whatever it is given."""

REFRESH_WHEN_EAGER = "if tf.executing_eagerly() or key not in _transposed:\n        "

SHIFT_WHEN_READABLE = """
import numpy as np
import tensorflow as tf

def softmax(x):
    if {shift}:
        x = x - tf.reduce_max(x, axis=-1, keepdims=True)  # before exp overflows
    e = tf.exp(x)
    return e / tf.reduce_sum(e, axis=-1, keepdims=True)
"""
"""A softmax that subtracts the row maximum only where it can read the logits eagerly and
finds them large: as a graph it never does, and exp overflows on large values alone."""

READABLE_AND_LARGE = 'hasattr(x, "numpy") and np.max(np.abs(x.numpy())) > 50.0'
NOT_READABLE_OR_LARGE = 'not hasattr(x, "numpy") or np.max(np.abs(x.numpy())) > 50.0'

CHECKED_AS_A_GRAPH = """
import tensorflow as tf

def softmax(x):
    if not tf.executing_eagerly():  # the graph checks its logits are in range
        tf.debugging.assert_less(tf.reduce_max(tf.abs(x)), 100.0)
    e = tf.exp(x - tf.reduce_max(x, axis=-1, keepdims=True))
    return e / tf.reduce_sum(e, axis=-1, keepdims=True)
"""
"""Code whose graph raises on large values only: right eagerly and on the standard inputs."""

POSITIONS = """
import tensorflow as tf

def positional_encoding(length, depth):
    positions = tf.range(length, dtype=tf.float32)[:, tf.newaxis]
    pair = tf.range(depth // 2, dtype=tf.float32)[tf.newaxis, :]
    angles = positions / tf.pow(10000.0, 2.0 * pair / float(depth))
    interleaved = tf.stack([tf.sin(angles), tf.cos(angles)], axis=-1)
    return tf.reshape(interleaved, (length, depth))[tf.newaxis]
"""
"""A correct encoding of constants alone: Grappler would fold it, and at the far positions its
folding rounds an angle one float32 step off the kernels' (position 2130). The graph judged
is not folded, or right code fails there."""

PRE_NORM_FFN = """
import numpy as np
import tensorflow as tf


class PreNormFeedForward(tf.keras.layers.Layer):
    def __init__(self, d_model, d_ff):
        super().__init__()
        rng = np.random.default_rng(13)
        self.w1 = tf.Variable(rng.standard_normal((d_model, d_ff)).astype(np.float32) / 4)
        self.b1 = tf.Variable(np.zeros((d_ff,), np.float32))
        self.w2 = tf.Variable(rng.standard_normal((d_ff, d_model)).astype(np.float32) / 4)
        self.b2 = tf.Variable(np.zeros((d_model,), np.float32))
        self.gamma = np.ones((d_model,), np.float32)
        self.beta = tf.Variable(np.zeros((d_model,), np.float32))

    def call(self, x):
        mean, variance = tf.nn.moments(x, axes=[-1], keepdims=True)
        normed = self.gamma * (x - mean) * tf.math.rsqrt(variance + 1e-6) + self.beta
        hidden = tf.nn.relu(tf.matmul(normed, self.w1) + self.b1)
        if not tf.executing_eagerly():
            hidden = {graph_hidden}
        return x + tf.matmul(hidden, self.w2) + self.b2
"""
"""A pre-norm sublayer whose gain is a NumPy array, which a graph keeps as traced: a graph
that clips the hidden layer at 6 differs only where the wide-weights regime scales gamma."""

PRE_NORM = {
    "kind": "layer",
    "params": {"norm": "pre"},
    "dims": {"b": 2, "n": 3, "d_model": 6, "d_ff": 8},
    "init": {"d_model": "d_model", "d_ff": "d_ff"},
    "weights": {
        "W_1": "w1",
        "b_1": "b1",
        "W_2": "w2",
        "b_2": "b2",
        "gamma": "gamma",
        "beta": "beta",
    },
}

LAYER = {"weights": {"gamma": "gamma", "beta": "beta"}}
HELD_LAYER = {**LAYER, "init": {"d_model": "d_model"}}


def _blocks() -> dict[str, tuple[str, str, dict[str, Any]]]:
    return {
        "softmax-graph-path-wrong": ("softmax", SOFTMAX.format(graph_axis=0), {}),
        "softmax-graph-path-right": ("softmax", SOFTMAX.format(graph_axis=-1), {}),
        "layer-norm-folded": ("layer_norm", LAYER_NORM.format(read_gamma=FOLDED), LAYER),
        "layer-norm-read": ("layer_norm", LAYER_NORM.format(read_gamma=READ), LAYER),
        "layer-norm-folded-timed": (
            "layer_norm",
            LAYER_NORM.format(read_gamma=FOLDED),
            {**LAYER, "timing": True},
        ),
        "layer-norm-read-timed": (
            "layer_norm",
            LAYER_NORM.format(read_gamma=READ),
            {**LAYER, "timing": True},
        ),
        "eager-only": ("softmax", EAGER_ONLY, {}),
        "by-name": ("softmax", BY_NAME, {}),
        "held-in-arrays": (
            "layer_norm",
            HELD.format(
                gamma="np.ones((d_model,), np.float32)", beta="np.zeros((d_model,), np.float32)"
            ),
            HELD_LAYER,
        ),
        "held-in-a-constant-and-a-variable": (
            "layer_norm",
            HELD.format(
                gamma="tf.constant(np.ones((d_model,), np.float32))",
                beta="tf.Variable(tf.zeros((d_model,)))",
            ),
            HELD_LAYER,
        ),
        "more-as-a-graph": ("softmax", MORE_AS_A_GRAPH, {}),
        "copy-beside-an-array-stale": (
            "layer_norm",
            COPIED_BESIDE_AN_ARRAY.format(copy=COPY_WHEN_EAGER),
            HELD_LAYER,
        ),
        "copy-beside-an-array-fresh": (
            "layer_norm",
            COPIED_BESIDE_AN_ARRAY.format(copy=COPY_ALWAYS),
            HELD_LAYER,
        ),
        "cached-transpose-stale": ("ffn", CACHED.format(refresh=REFRESH_WHEN_EAGER), {}),
        "cached-transpose-fresh": ("ffn", CACHED.format(refresh=""), {}),
        "eager-only-timed": ("softmax", EAGER_ONLY, {"timing": True}),
        "shift-when-readable": (
            "softmax",
            SHIFT_WHEN_READABLE.format(shift=READABLE_AND_LARGE),
            {},
        ),
        "shift-unless-readable-and-small": (
            "softmax",
            SHIFT_WHEN_READABLE.format(shift=NOT_READABLE_OR_LARGE),
            {},
        ),
        "checked-as-a-graph": ("softmax", CHECKED_AS_A_GRAPH, {}),
        "positions-of-constants": ("positional_encoding", POSITIONS, {}),
        "gain-held-clipped-as-a-graph": (
            "sublayer",
            PRE_NORM_FFN.format(graph_hidden="tf.minimum(hidden, 6.0)"),
            PRE_NORM,
        ),
        "gain-held-as-a-graph": ("sublayer", PRE_NORM_FFN.format(graph_hidden="hidden"), PRE_NORM),
    }


@pytest.fixture(scope="module")
def results() -> dict[str, CheckResult]:
    """Every block of this file, checked at once on the shared engine."""
    blocks = _blocks()
    specs = [
        spec_for(oracle, source, block_id=name, **options)
        for name, (oracle, source, options) in blocks.items()
    ]
    return dict(zip(blocks, shared_engine().check_many(specs), strict=True))


@pytest.mark.parametrize(
    "name",
    [
        "softmax-graph-path-wrong",
        "layer-norm-folded",
        "layer-norm-folded-timed",
        "copy-beside-an-array-stale",
        "cached-transpose-stale",
    ],
)
def test_a_difference_only_under_tf_function_is_a_mismatch(
    results: dict[str, CheckResult], name: str
) -> None:
    result = results[name]
    assert result.status is Status.MISMATCH, result.headline()
    eager = [v for v in result.verdicts if not v.regime]
    graph = [v for v in result.verdicts if v.regime == GRAPH_MODE]
    assert eager and all(v.ok for v in eager), result.headline()
    assert graph and not all(v.ok for v in graph)
    headline = result.headline()
    assert headline.startswith(
        f"docs/page.md:6 [{result.block_id}]: mismatch: output (tf.function)"
    )
    assert "only under tf.function: eagerly the code agrees with the oracle" in headline
    assert result.arrays["delta"].size  # the heatmaps show the graph's difference


@pytest.mark.parametrize(
    "name",
    [
        "softmax-graph-path-right",
        "layer-norm-read",
        "layer-norm-read-timed",
        "held-in-arrays",
        "held-in-a-constant-and-a-variable",
        "copy-beside-an-array-fresh",
        "cached-transpose-fresh",
        "positions-of-constants",
    ],
)
def test_the_correct_twin_verifies_judged_under_tf_function(
    results: dict[str, CheckResult], name: str
) -> None:
    result = results[name]
    assert result.status is Status.VERIFIED, result.headline()
    graph = [v for v in result.verdicts if v.regime == GRAPH_MODE]
    assert graph and all(v.ok for v in graph)
    assert "also within tolerance" in result.detail() and "under tf.function" in result.detail()
    block = json.loads(report_json([result]))["blocks"][0]
    assert GRAPH_MODE in block["regimes"]
    assert any(v["regime"] == GRAPH_MODE and v["ok"] for v in block["verdicts"])
    if name.endswith("-timed"):  # the timing reused the check's trace: a first call, runs
        labels = [t.label for t in result.timings]
        assert "tf.function" in labels, labels
        graph_timing = result.timings[labels.index("tf.function")]
        assert graph_timing.first > 0 and graph_timing.repeats > 0


@pytest.mark.parametrize("name", ["eager-only", "eager-only-timed"])
def test_code_that_does_not_trace_is_judged_eagerly_and_says_so_once(
    results: dict[str, CheckResult], name: str
) -> None:
    result = results[name]
    assert result.status is Status.VERIFIED, result.headline()
    assert not [v for v in result.verdicts if v.regime == GRAPH_MODE]
    said = [note for note in result.notes if "tf.function" in note]
    assert said == [
        "not judged under tf.function, nor timed so: the code does not run as a graph "
        "(AttributeError: 'SymbolicTensor' object has no attribute 'numpy')"
    ]


def test_a_returned_dict_is_judged_by_name_under_tf_function(
    results: dict[str, CheckResult],
) -> None:
    result = results["by-name"]
    assert result.status is Status.VERIFIED, result.headline()
    graph = [(v.name, v.ok) for v in result.verdicts if v.regime == GRAPH_MODE]
    assert graph == [("output", True)]


def test_a_graph_returning_other_values_than_eager_code_is_a_mismatch(
    results: dict[str, CheckResult],
) -> None:
    result = results["more-as-a-graph"]
    assert result.status is Status.MISMATCH, result.headline()
    headline = result.headline()
    assert (  # and so on each regime, named
        "mismatch: outputs (tf.function): the code returned 2 values under tf.function, 1 "
        "eagerly; outputs (tf.function, large values): the code returned 2 values under "
        "tf.function on the large values inputs, 1 eagerly"
    ) in headline, headline


def test_a_graph_wrong_on_one_regime_alone_is_a_mismatch_naming_it(
    results: dict[str, CheckResult],
) -> None:
    result = results["shift-when-readable"]
    assert result.status is Status.MISMATCH, result.headline()
    failed = {v.regime for v in result.verdicts if not v.ok}
    assert failed == {"tf.function, large values"}, result.headline()
    headline = result.headline()
    assert headline.startswith(
        "docs/page.md:6 [shift-when-readable]: mismatch: output (tf.function, large values): "
    ), headline
    assert "overflows float32" in headline and ONLY_GRAPH in headline
    assert result.arrays["delta"].size  # the heatmaps show the graph on large values
    twin = results["shift-unless-readable-and-small"]
    assert twin.status is Status.VERIFIED, twin.headline()
    assert "tf.function, large values" in twin.regimes()
    assert "under tf.function on the standard, large values inputs" in twin.detail()


def test_a_graph_raising_on_one_regime_alone_is_a_mismatch_naming_it(
    results: dict[str, CheckResult],
) -> None:
    result = results["checked-as-a-graph"]
    assert result.status is Status.MISMATCH, result.headline()
    [failed] = [v for v in result.verdicts if not v.ok]
    assert failed.label() == "outputs (tf.function, large values)"
    assert failed.problem.startswith(
        "the code raised under tf.function on the large values inputs: InvalidArgumentError"
    ), failed.problem


def test_a_graph_wrong_only_where_a_weight_held_as_a_value_is_scaled_is_caught(
    results: dict[str, CheckResult],
) -> None:
    """A weight-scaling regime scales a gain held as a NumPy array, which a graph keeps as
    traced: the graph is traced again on the scaled values, so one that clips only there is
    a mismatch, and its twin still verifies on that regime."""
    result = results["gain-held-clipped-as-a-graph"]
    assert result.status is Status.MISMATCH, result.headline()
    failed = {v.regime for v in result.verdicts if not v.ok}
    assert failed == {"tf.function, wide weights"}, result.headline()
    twin = results["gain-held-as-a-graph"]
    assert twin.status is Status.VERIFIED, twin.headline()
    assert "tf.function, wide weights" in twin.regimes()
