"""Exported artifacts with drifts only their precision could hide, and with trained weights
(biases and gains off 0 and 1): a float16-weight TFLite is judged on its rounded weights and
catches what float32 catches; an int8 model is judged with what its quantization explains
(formula drifts, weights 5 % off and an op without a definition are caught or refused);
a signature's outputs are compared by name beside extra ones. Exported at test time, in a
subprocess (float16 outputs: test_float16_outputs, on the same exports)."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from formula_check.model import Status
from formula_check.pages.blocks import Settings, page_blocks
from formula_check.results import CheckResult
from formula_check.session.engine import Engine
from sites import built_once
from support import shared_engine
from test_artifacts import DIMS, FIXTURES, PATHS  # one weight map for both files

WEIGHTS = " ".join(f"{name}=block.{path}" for name, path in PATHS.items())

BLOCK = """
import keras
import tensorflow as tf


@keras.saving.register_keras_serializable(package="review20")
class TransformerBlock(keras.layers.Layer):
    def __init__(self, d_model=8, num_heads=2, d_ff=16, activation="relu", epsilon=1e-6,
                 scale_dim=None, **kw):
        super().__init__(**kw)
        self.d_model, self.num_heads, self.d_ff = d_model, num_heads, d_ff
        self.activation, self.epsilon, self.scale_dim = activation, epsilon, scale_dim
        self.wq = keras.layers.Dense(d_model)
        self.wk = keras.layers.Dense(d_model)
        self.wv = keras.layers.Dense(d_model)
        self.wo = keras.layers.Dense(d_model)
        self.norm1 = keras.layers.LayerNormalization(epsilon=epsilon)
        self.ff1 = keras.layers.Dense(d_ff, activation=activation)
        self.ff2 = keras.layers.Dense(d_model)
        self.norm2 = keras.layers.LayerNormalization(epsilon=epsilon)

    def _heads(self, t):
        shape = tf.shape(t)
        depth = self.d_model // self.num_heads
        return tf.transpose(tf.reshape(t, [shape[0], shape[1], self.num_heads, depth]),
                            [0, 2, 1, 3])

    def call(self, x, mask=None):
        q, k, v = self._heads(self.wq(x)), self._heads(self.wk(x)), self._heads(self.wv(x))
        depth = float(self.scale_dim or (self.d_model // self.num_heads))
        scores = tf.matmul(q, k, transpose_b=True) / tf.sqrt(depth)
        if mask is not None:
            scores = scores + mask * -1e9
        heads = tf.matmul(tf.nn.softmax(scores, axis=-1), v)
        shape = tf.shape(x)
        joined = tf.reshape(tf.transpose(heads, [0, 2, 1, 3]),
                            [shape[0], shape[1], self.d_model])
        y = self.norm1(x + self.wo(joined))
        return self.norm2(y + self.ff2(self.ff1(y)))
"""

EXPORT_SETUP = """
import sys, warnings
from pathlib import Path
warnings.simplefilter("ignore")
out, fixtures = Path(sys.argv[1]), sys.argv[2]
sys.path[:0] = [str(out.parent), fixtures]
import keras, numpy as np, tensorflow as tf
import export as ex
from review20_block import TransformerBlock

N, D = 5, 8


def block(d=D, h=2, ff=16, tuned=0.0, edit=None, **options):
    keras.utils.set_random_seed(7)
    b = TransformerBlock(d, h, ff, **options)
    b(np.zeros((1, N, d), np.float32), np.zeros((1, 1, N, N), np.float32))
    rng = np.random.default_rng(107)
    for v in b.weights:  # "trained": biases and gains away from 0 and 1
        if "bias" in v.path or "beta" in v.path:
            v.assign(rng.standard_normal(v.shape).astype(np.float32) * 0.3)
        if "gamma" in v.path:
            v.assign((1 + 0.3 * rng.standard_normal(v.shape)).astype(np.float32))
    if tuned:  # fine-tuned a little after the SavedModel was exported
        moved = np.random.default_rng(1)
        for v in b.weights:
            v.assign((v.numpy() * (1 + tuned * moved.standard_normal(v.shape))).astype(np.float32))
    if edit:  # a drift made by hand on the built block
        edit(b)
    return b


class Two(tf.Module):
    def __init__(self, b):
        super().__init__()
        self.block = b

    @tf.function(input_signature=[tf.TensorSpec([None, N, D], tf.float32, name="x"),
                                  tf.TensorSpec([None, 1, N, N], tf.float32, name="mask")])
    def serve(self, x, mask):
        y = self.block(x, mask)
        return {"output": y, "aux_logits": tf.ones_like(y)}


out.mkdir(parents=True, exist_ok=True)
"""
"""The export script's set-up: the block, trained, and a module returning an extra output."""

EXPORT = """
ex.save_model(block(), out / "good")
ex.save_model(block(epsilon=1e-2), out / "eps2")
ex.tflite(block(epsilon=1e-2), out / "f16_eps2.tflite", float16=True)
ex.int8(block(), out / "i8_good.tflite", 1.0)
ex.int8(block(activation="gelu"), out / "i8_gelu.tflite", 1.0)
ex.int8(block(scale_dim=1), out / "i8_noscale.tflite", 1.0)
ex.int8(block(tuned=0.05), out / "i8_tuned.tflite", 1.0)
ex.int8(block(activation="leaky_relu"), out / "i8_leaky.tflite", 1.0)
two = Two(block())
tf.saved_model.save(two, str(out / "two"), signatures={"serving_default": two.serve})
"""


def shared_exports(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The block's exports that this module, test_float16_outputs and test_returned_dicts
    read, made by one export script once for the whole run (:func:`sites.built_once`)."""
    from test_float16_outputs import EXPORT_HALF
    from test_returned_dicts import EXPORT_MIXED

    def export(root: Path) -> None:
        exported(root, EXPORT + EXPORT_HALF + EXPORT_MIXED)

    return built_once(tmp_path_factory, "drift-exports", export)


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return shared_exports(tmp_path_factory)


def exported(root: Path, more: str, *runs: str, timeout: int = 300) -> Path:
    """``root`` with the block's module and ``more`` exported into ``root / "a"`` by the
    export script's set-up (once per word of ``runs``, given as its last argument)."""
    (root / "review20_block.py").write_text(textwrap.dedent(BLOCK))
    script = root / "export_more.py"
    script.write_text(textwrap.dedent(EXPORT_SETUP) + more)
    for which in runs or ("",):
        subprocess.run(
            [
                sys.executable,
                str(script),
                str(root / "a"),
                str(FIXTURES),
                *([which] if which else []),
            ],
            check=True,
            capture_output=True,
            timeout=timeout,
        )
    return root


def checker(
    engine: Engine, *, mask: str = "padding", dims: str = DIMS
) -> Callable[..., CheckResult]:
    """Checks one encoder block on the engine's project by its ``code=`` (``mask``, ``dims``
    and header words as given)."""

    def one(code: str, mask: str = mask, extra: str = "", dims: str = dims) -> CheckResult:
        text = (
            f'```formula id="b" oracle="encoder_layer" code="{code}" mask="{mask}" {dims} '
            f'weights="{WEIGHTS}" {extra}\nx\n```\n'
        )
        settings = Settings(engine.root)
        (block,) = page_blocks(text.split("\n"), page="docs/p.md", settings=settings)
        assert block.spec is not None, block.error
        return engine.check(block.spec)

    return one


def block_checker(
    root: Path, *, mask: str = "padding", dims: str = DIMS
) -> Iterator[Callable[..., CheckResult]]:
    """A :func:`checker` on ``root`` with one uncached engine, closed after."""
    with Engine(root, use_cache=False) as engine:
        yield checker(engine, mask=mask, dims=dims)


@pytest.fixture(scope="module")
def check(tmp_path_factory: pytest.TempPathFactory) -> Callable[..., CheckResult]:
    """A :func:`checker` on :func:`shared_exports`, on the uncached engine this test process
    keeps for them (:func:`support.shared_engine`): one for the three modules reading them."""
    return checker(shared_engine(shared_exports(tmp_path_factory)))


# false passes ---------------------------------------------------------------------------------


@pytest.mark.tf
def test_the_good_exports_pass_int8_included(check) -> None:
    """The correct SavedModel is verified, and so is its int8 conversion, within what its
    quantization explains (its tolerance says how it came about)."""
    assert check("saved_model:a/good").status is Status.VERIFIED
    int8 = check("a/i8_good.tflite::a/good", mask="none")
    assert int8.status is Status.VERIFIED, int8.headline()
    assert "+ int8 quantization" in int8.verdicts[0].tolerance


@pytest.mark.tf
@pytest.mark.parametrize(
    "drift",
    [
        "i8_gelu",  # GELU where the formula has ReLU (the fixture's drift_op, in int8)
        "i8_noscale",  # logits never divided by sqrt(d_k)
        "i8_tuned",  # the .tflite converted from weights 5% off those the map reads
    ],
)
def test_int8_drifts_are_mismatches(check, drift: str) -> None:
    """An int8 model whose formula drifted (another activation, no 1/sqrt(d_k)) or whose
    weights are not the SavedModel's it names is a mismatch, at the block's line and naming
    the artifact. The former int8 tolerance, 'tensors x output step' (59 x 0.023 = 1.4 on
    outputs of unit scale), let each of these pass; what quantization explains of these
    outputs is 0.1 to 0.4, and each drift moves them beyond it."""
    result = check(f"a/{drift}.tflite::a/good", mask="none")
    assert result.status is Status.MISMATCH, result.headline()
    assert result.headline().startswith("docs/p.md:1 [b]: mismatch")
    assert any(f"a/{drift}.tflite" in note for note in result.notes)


@pytest.mark.tf
def test_an_int8_op_without_a_float_definition_is_refused_by_name(check) -> None:
    """LEAKY_RELU has no float definition in the walk: what quantization explains of the
    model cannot be derived, so it is refused (never judged with a guess), naming the op."""
    result = check("a/i8_leaky.tflite::a/good", mask="none")
    assert result.status is Status.ERROR, result.headline()
    assert result.failure is not None and result.failure.type == "ArtifactError"
    assert "LEAKY_RELU, has no float definition" in result.failure.message


@pytest.mark.tf
def test_float16_tflite_with_layernorm_epsilon_1e_2_is_a_mismatch(check) -> None:
    """A float16 TFLite (float16 weights; its interpreter computes in float32) of a block
    whose LayerNorm epsilon is 1e-2 instead of the formula's 1e-6 must be a mismatch, as the
    same drift in float32 is (used 377x its tolerance). The float16 tolerance scales every
    rounding by 8192, and the drift passes using 44% of it."""
    assert check("saved_model:a/eps2").status is Status.MISMATCH  # float32: caught
    result = check("a/f16_eps2.tflite::a/good")
    assert result.status is Status.MISMATCH, result.headline()


# false alarms ---------------------------------------------------------------------------------


@pytest.mark.tf
def test_a_signature_output_named_output_is_compared_by_name_beside_extra_outputs(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """production.md: 'Outputs are picked by name: a signature returning {"output": ...} is
    compared as the oracle's output.' A correct signature returning {"output": y,
    "aux_logits": ones} must be verified in every run. Today the extra key makes the check
    fall back to position, and the order of a restored signature's output dict follows the
    process's string hashing: in some runs aux_logits is compared as output (a mismatch,
    'got 1'), in others it is verified. Each seed gets a worker of its own, which reads it."""
    text = (
        f'```formula id="b" oracle="encoder_layer" code="saved_model:a/two" mask="padding" '
        f'{DIMS} weights="{WEIGHTS}"\nx\n```\n'
    )
    (block,) = page_blocks(text.split("\n"), page="docs/p.md", settings=Settings(project))
    assert block.spec is not None, block.error
    statuses = set()
    for seed in ("0", "2", "3", "5"):
        monkeypatch.setenv("PYTHONHASHSEED", seed)
        with Engine(project, use_cache=False) as engine:
            statuses.add(engine.check(block.spec).status.value)
    assert statuses == {"verified"}


# cache staleness and path escapes (pure, no TensorFlow) --------------------------------------
