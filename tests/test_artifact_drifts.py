"""Exported artifacts with drifts only their precision could hide, and with trained weights
(biases and gains off 0 and 1): a float16-weight TFLite is judged on its rounded weights and
catches what float32 catches; an int8 model is judged with what its quantization explains
(formula drifts, weights 5 % off and an op without a definition are caught or refused);
a float32 one with float16 outputs is judged with their rounding added; a signature's
outputs are compared by name beside extra ones. Exported at test time, in a subprocess."""

from __future__ import annotations

import os
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

EXPORT = """
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


class Half(tf.Module):
    def __init__(self, b):
        super().__init__()
        self.block = b

    @tf.function(input_signature=[tf.TensorSpec([None, N, D], tf.float32, name="x"),
                                  tf.TensorSpec([None, 1, N, N], tf.float32, name="mask")])
    def serve(self, x, mask):
        return {"output": tf.cast(self.block(x, mask), tf.float16)}


out.mkdir(parents=True, exist_ok=True)
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
half = Half(block(epsilon=1e-2))
tf.saved_model.save(half, str(out / "half_eps2"), signatures={"serving_default": half.serve})
"""


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("review20")
    (root / "review20_block.py").write_text(textwrap.dedent(BLOCK))
    script = root / "export_review20.py"
    script.write_text(textwrap.dedent(EXPORT))
    subprocess.run(
        [sys.executable, str(script), str(root / "a"), str(FIXTURES)],
        check=True,
        capture_output=True,
        timeout=300,
    )
    return root


def exported(root: Path, more: str, *runs: str, timeout: int = 300) -> Path:
    """``root`` with the block's module and ``more`` exported into ``root / "a"`` by the
    export script's set-up (once per word of ``runs``, given as its last argument)."""
    (root / "review20_block.py").write_text(textwrap.dedent(BLOCK))
    script = root / "export_more.py"
    script.write_text(textwrap.dedent(EXPORT).split("out.mkdir")[0] + more)
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


def block_checker(
    root: Path, *, mask: str = "padding", dims: str = DIMS
) -> Iterator[Callable[..., CheckResult]]:
    """Checks one encoder block on ``root`` by its ``code=`` (``mask``, ``dims`` and header
    words as given), with one uncached engine, closed after."""
    engine = Engine(root, use_cache=False)

    def one(code: str, mask: str = mask, extra: str = "", dims: str = dims) -> CheckResult:
        text = (
            f'```formula id="b" oracle="encoder_layer" code="{code}" mask="{mask}" {dims} '
            f'weights="{WEIGHTS}" {extra}\nx\n```\n'
        )
        (block,) = page_blocks(text.split("\n"), page="docs/p.md", settings=Settings(root))
        assert block.spec is not None, block.error
        return engine.check(block.spec)

    try:
        yield one
    finally:
        engine.close()


@pytest.fixture(scope="module")
def check(project: Path) -> Iterator[Callable[..., CheckResult]]:
    yield from block_checker(project)


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


@pytest.mark.tf
def test_a_saved_model_with_float16_outputs_and_a_drift_is_a_mismatch(check) -> None:
    """A SavedModel computing in float32 with its output cast to float16: scaling every
    rounding by eps16/eps32 let its epsilon-1e-2 drift (caught in float32) pass, and it was
    refused; now one float16 rounding per element is added to float32's tolerance, and the
    drift is a mismatch."""
    result = check("saved_model:a/half_eps2")
    assert result.status is Status.MISMATCH, result.headline()
    assert "float16 outputs: one float16 rounding added" in result.verdicts[0].tolerance


# false alarms ---------------------------------------------------------------------------------


CHECK_ONE = """
import sys
from pathlib import Path
from formula_check.session.engine import Engine
from formula_check.pages.blocks import Settings, page_blocks
root, text = Path(sys.argv[1]), sys.argv[2]
(block,) = page_blocks(text.split("\\n"), page="docs/p.md", settings=Settings(root))
engine = Engine(root, use_cache=False)
try:
    print("STATUS", engine.check(block.spec).status.value)
finally:
    engine.close()
"""


@pytest.mark.tf
def test_a_signature_output_named_output_is_compared_by_name_beside_extra_outputs(
    project: Path,
) -> None:
    """production.md: 'Outputs are picked by name: a signature returning {"output": ...} is
    compared as the oracle's output.' A correct signature returning {"output": y,
    "aux_logits": ones} must be verified in every run. Today the extra key makes the check
    fall back to position, and the order of a restored signature's output dict follows the
    process's string hashing: in some runs aux_logits is compared as output (a mismatch,
    'got 1'), in others it is verified."""
    text = (
        f'```formula id="b" oracle="encoder_layer" code="saved_model:a/two" mask="padding" '
        f'{DIMS} weights="{WEIGHTS}"\nx\n```\n'
    )
    statuses = set()
    for seed in ("0", "2", "3", "5"):
        done = subprocess.run(
            [sys.executable, "-c", CHECK_ONE, str(project), text],
            capture_output=True,
            text=True,
            timeout=300,
            env={**os.environ, "PYTHONHASHSEED": seed},
            check=True,
        )
        statuses |= {
            line.split()[1] for line in done.stdout.splitlines() if line.startswith("STATUS")
        }
    assert statuses == {"verified"}


# cache staleness and path escapes (pure, no TensorFlow) --------------------------------------
