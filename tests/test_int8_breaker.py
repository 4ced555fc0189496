"""An adversarial review of the int8 weights' bound (Hoeffding's, 4 root-sum-squares of
``d output / d w * step``, capped by the worst case, times 1.25), at d_model 32.

Wrong models that must be mismatches: the logits scaled by 1/sqrt(d_model) for 1/sqrt(d_k),
the FFN's second bias dropped, every kernel 3 % larger (the smallest coherent drift caught
here), GELU for ReLU in a model whose weights are quantized per tensor (larger steps, a
larger bound). Correct models that must be verified: the block, and one whose weights all
sit at 0.45 of a step from
the int8 grid, the sign alternating by output channel (so that LayerNorm's mean does not take
the shift away): every rounding of the FFN's second kernel then pushes its channel one way,
against the bound's premise of independent centred roundings. At d_ff 64 and at d_ff 1024
(the widest FFN whose Jacobian the walk computes at d_model 32 is some 2,300) the coherent
shift stays under the bound. Real exports (one subprocess per module fixture, one test per
fixture so that two workers never export the same models), real interpreters, no mocks; the
block and helpers are those of test_artifact_drifts."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

import test_artifact_drifts as drifts
from formula_check.model import CheckResult, Status
from test_int8_sizes import said

pytestmark = pytest.mark.tf

EXPORT_BREAKER = """
def blk(d, h, ff, tuned=0.0, edit=None, **options):
    keras.utils.set_random_seed(7)
    b = TransformerBlock(d, h, ff, **options)
    b(np.zeros((1, N, d), np.float32), np.zeros((1, 1, N, N), np.float32))
    rng = np.random.default_rng(107)
    for v in b.weights:  # "trained": biases and gains away from 0 and 1
        if "bias" in v.path or "beta" in v.path:
            v.assign(rng.standard_normal(v.shape).astype(np.float32) * 0.3)
        if "gamma" in v.path:
            v.assign((1 + 0.3 * rng.standard_normal(v.shape)).astype(np.float32))
    if tuned:
        moved = np.random.default_rng(1)
        for v in b.weights:
            v.assign((v.numpy() * (1 + tuned * moved.standard_normal(v.shape))).astype(np.float32))
    if edit:
        edit(b)
    return b


class Serve(tf.Module):
    def __init__(self, b, d):
        super().__init__()
        self.block = b
        self.serve = tf.function(
            lambda x, mask: {"output": self.block(x, mask)},
            input_signature=[tf.TensorSpec([None, N, d], tf.float32, name="x"),
                             tf.TensorSpec([None, 1, N, N], tf.float32, name="mask")])


def saved(b, folder, d):
    m = Serve(b, d)
    tf.saved_model.save(m, str(folder), signatures={"serving_default": m.serve})


def i8(b, path, d, per_tensor=False):
    ex.D_MODEL = d
    converter = ex._converter(b, masked=False)
    converter.optimizations = [tf.lite.Optimize.DEFAULT]
    rng = np.random.default_rng(0)
    converter.representative_dataset = lambda: (
        [rng.standard_normal((1, N, d)).astype(np.float32)] for _ in range(64))
    converter.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS_INT8]
    if per_tensor:
        converter._experimental_disable_per_channel = True
    path.write_bytes(converter.convert())
    ex.D_MODEL = 8


def kernels(b):
    return [layer.kernel for layer in (b.wq, b.wk, b.wv, b.wo, b.ff1, b.ff2)]


def no_bias(layer):
    def edit(b):
        v = getattr(b, layer).bias
        v.assign(np.zeros(v.shape, np.float32))
    return edit


def scaled(k):
    def edit(b):
        for v in kernels(b):
            v.assign(v.numpy() * k)
    return edit


def coherent(b, f=0.45):
    # the FFN's second kernel: each weight at q + f steps of its output channel (TFLite's
    # per-channel step, its largest weight / 127; that weight is kept, so the step is too),
    # f's sign alternating by channel; the converter rounds each back by f the same way
    v = b.ff2.kernel
    w = v.numpy().astype(np.float64)
    top = np.abs(w).max(axis=0, keepdims=True)
    s = top / 127
    q = np.clip(np.round(w / s), -126, 126)
    sign = np.where(np.arange(w.shape[1]) % 2 == 0, 1.0, -1.0)[None, :]
    v.assign(np.where(np.abs(w) == top, w, (q + f * sign) * s).astype(np.float32))


which = sys.argv[3]
out.mkdir(parents=True, exist_ok=True)
if which == "d32":
    d, h, ff = 32, 4, 64
    saved(blk(d, h, ff), out / "good", d)
    i8(blk(d, h, ff), out / "i8_good.tflite", d)
    saved(blk(d, h, ff, edit=coherent), out / "coherent", d)
    i8(blk(d, h, ff, edit=coherent), out / "i8_coherent.tflite", d)
    i8(blk(d, h, ff, scale_dim=d), out / "i8_scale_d_model.tflite", d)
    i8(blk(d, h, ff, edit=no_bias("ff2")), out / "i8_no_ff2_bias.tflite", d)
    i8(blk(d, h, ff, edit=scaled(1.03)), out / "i8_kernels_x1.03.tflite", d)
    i8(blk(d, h, ff, activation="gelu"), out / "i8_per_tensor_gelu.tflite", d, per_tensor=True)
if which == "wide":
    d, h, ff = 32, 4, 1024
    saved(blk(d, h, ff), out / "good", d)
    i8(blk(d, h, ff), out / "i8_good.tflite", d)
    saved(blk(d, h, ff, edit=coherent), out / "coherent", d)
    i8(blk(d, h, ff, edit=coherent), out / "i8_coherent.tflite", d)
    i8(blk(d, h, ff, activation="gelu"), out / "i8_gelu.tflite", d)
"""

D32 = 'dims="b=2 n=5 d_model=32 h=4 depth=8 d_ff=64" formula="off" timing="off"'
WIDE = 'dims="b=2 n=5 d_model=32 h=4 depth=8 d_ff=1024" formula="off" timing="off"'


def _checker(
    factory: pytest.TempPathFactory, which: str, dims: str
) -> Iterator[Callable[..., CheckResult]]:
    root = factory.mktemp(f"int8_breaker_{which}")
    drifts.exported(root, EXPORT_BREAKER, which, timeout=900)
    yield from drifts.block_checker(root, mask="none", dims=dims)


@pytest.fixture(scope="module")
def d32(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Callable[..., CheckResult]]:
    yield from _checker(tmp_path_factory, "d32", D32)


@pytest.fixture(scope="module")
def wide(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Callable[..., CheckResult]]:
    yield from _checker(tmp_path_factory, "wide", WIDE)


def _verdicts(check: Callable[..., CheckResult], cases: dict[str, str]) -> dict[str, CheckResult]:
    return {name: check(code) for name, code in cases.items()}


def _wrong(results: dict[str, CheckResult], expected: dict[str, Status]) -> list[str]:
    """Each case whose status is not the expected one, with its numbers."""
    return [
        f"{name}: {said(result)}"
        for name, result in results.items()
        if result.status is not expected[name]
    ]


def test_d_model_32_drifts_fail_and_correct_models_pass(d32) -> None:
    """Measured when written (share of the tolerance used at the worst element): correct
    0.56, coherent rounding 0.57; the logits' scale 4.4, no FFN bias 6.8, kernels 3 % larger
    1.2, GELU per tensor 2.5."""
    correct = {
        "correct": "a/i8_good.tflite::a/good",
        "coherent rounding": "a/i8_coherent.tflite::a/coherent",
    }
    wrong = {
        "logits by sqrt(d_model)": "a/i8_scale_d_model.tflite::a/good",
        "FFN's second bias dropped": "a/i8_no_ff2_bias.tflite::a/good",
        "kernels 3 % larger": "a/i8_kernels_x1.03.tflite::a/good",
        "GELU for ReLU, per tensor": "a/i8_per_tensor_gelu.tflite::a/good",
    }
    results = _verdicts(d32, {**correct, **wrong})
    expected = {name: Status.VERIFIED for name in correct}
    expected.update({name: Status.MISMATCH for name in wrong})
    off = _wrong(results, expected)
    assert not off, "\n\n".join(off)
    for name in correct:  # judged as int8, the weights' bound in its tolerance
        assert "its weights' rounding bounded" in results[name].verdicts[0].tolerance


def test_d_ff_1024_coherent_rounding_passes_and_gelu_fails(wide) -> None:
    """The FFN four times wider than any other here, where a coherent rounding of its second
    kernel adds up over 1024 weights per output: measured when written, the correct model
    0.52 of its tolerance, the coherent one 0.53 (its shift, 0.077 at most, against a weights'
    bound of 0.17), GELU for ReLU 4.1."""
    results = _verdicts(
        wide,
        {
            "correct": "a/i8_good.tflite::a/good",
            "coherent rounding": "a/i8_coherent.tflite::a/coherent",
            "GELU for ReLU": "a/i8_gelu.tflite::a/good",
        },
    )
    off = _wrong(
        results,
        {
            "correct": Status.VERIFIED,
            "coherent rounding": Status.VERIFIED,
            "GELU for ReLU": Status.MISMATCH,
        },
    )
    assert not off, "\n\n".join(off)
