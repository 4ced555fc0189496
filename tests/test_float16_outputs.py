"""Artifacts computing in float32 whose outputs are cast to float16 at the end are judged,
with one float16 rounding per element added to float32's tolerance; artifacts that work in
float16 anywhere else are refused, naming the op. Exported for real at test time (a
subprocess), correct and drifted; the tolerance formula and the graph rules also alone."""

from __future__ import annotations

import numpy as np
import pytest

import test_artifact_drifts as drifts
from formula_check.model import Status

pytestmark = pytest.mark.tf

EXPORT_HALF = """
class Arithmetic(tf.Module):
    '''Casts to float16, then multiplies and adds in float16: arithmetic in half precision.'''

    def __init__(self, b):
        super().__init__()
        self.block = b

    @tf.function(input_signature=[tf.TensorSpec([None, N, D], tf.float32, name="x"),
                                  tf.TensorSpec([None, 1, N, N], tf.float32, name="mask")])
    def serve(self, x, mask):
        y = tf.cast(self.block(x, mask), tf.float16)
        return {"output": y * tf.constant(1.0, tf.float16) + tf.constant(0.0, tf.float16)}


ex.save_model(block(), out / "half_good", half_outputs=True)
ex.tflite(block(), out / "half_good.tflite", half_outputs=True)
ex.tflite(block(), out / "half_f16w.tflite", float16=True, half_outputs=True)
ex.save_model(block(epsilon=1e-2), out / "half_eps2", half_outputs=True)
ex.tflite(block(scale_dim=1), out / "half_noscale.tflite", half_outputs=True)
arithmetic = Arithmetic(block())
tf.saved_model.save(arithmetic, str(out / "half_arith"),
                    signatures={"serving_default": arithmetic.serve})
"""


check = drifts.check  # the drift fixture's exports and engine


# false alarms ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "code",
    [
        "saved_model:a/half_good",
        "a/half_good.tflite::a/good",
        "a/half_f16w.tflite::a/good",  # float16 weights and float16 outputs together
    ],
)
def test_a_correct_export_with_float16_outputs_is_verified(check, code: str) -> None:
    """Computed in float32, rounded once to float16 at the end: within float32's tolerance
    plus one float16 rounding per element, said on the card; its regimes are skipped, with
    why (the rounding is added on the check's own inputs only)."""
    result = check(code)
    assert result.status is Status.VERIFIED, result.headline()
    verdict = result.verdicts[0]
    assert "float16 outputs: one float16 rounding added" in verdict.tolerance
    assert verdict.used > 0.05  # the rounding shows: the outputs are not float32's
    assert "computing in float" in " ".join(result.notes)
    assert any("came back as float16" in note for note in result.notes)


# false passes ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "code",
    [
        "saved_model:a/half_eps2",  # LayerNorm epsilon 1e-2 where the formula has 1e-6
        "a/half_noscale.tflite::a/good",  # logits never divided by sqrt(d_k)
    ],
)
def test_a_drift_with_float16_outputs_is_a_mismatch(check, code: str) -> None:
    """A formula drift does not hide in one float16 rounding of the outputs (scaling every
    rounding by eps16/eps32 instead let the epsilon drift, caught in float32, pass)."""
    result = check(code)
    assert result.status is Status.MISMATCH, result.headline()
    verdict = result.verdicts[0]
    assert "float16 outputs: one float16 rounding added" in verdict.tolerance
    assert not verdict.ok and verdict.used > 1.5


def test_an_export_doing_arithmetic_in_float16_is_refused_naming_the_op(check) -> None:
    """Its outputs are float16 too, but a Mul and an AddV2 run in float16 after the cast:
    float16 arithmetic, whose tolerance is not derived, is refused, never judged."""
    result = check("saved_model:a/half_arith")
    assert result.status is Status.ERROR, result.headline()
    assert result.failure is not None and result.failure.type == "ArtifactError"
    assert "computing in float16" in result.failure.message
    assert "works in float16" in result.failure.message


# the rules alone ------------------------------------------------------------------------------


def test_the_tolerance_bounds_one_float16_rounding_and_is_tight() -> None:
    from formula_check.execution.float16_outputs import tolerance

    rng = np.random.default_rng(3)
    exact = np.concatenate(
        [
            rng.standard_normal(20_000) * 10.0 ** rng.integers(-9, 4, 20_000),
            np.float32([2.0**-24, 2.0**-25, 3 * 2.0**-26, 2.0**-14, 1.0, 65504.0, 0.0]),
        ]
    ).astype(np.float32)
    rounded = exact.astype(np.float16)
    moved = np.abs(rounded.astype(np.float64) - exact.astype(np.float64))
    allowed = tolerance(rounded)
    assert np.all(moved <= allowed)
    assert np.max(moved / allowed) > 0.95  # no slack: a rounding reaches the bound
    normal = np.abs(rounded) >= 2.0**-14
    assert np.max(moved[normal] / np.abs(rounded[normal])) > 0.9 * 2.0**-11
    assert np.all(tolerance(np.float16([np.inf, -np.inf, np.nan])) == 0)  # overflow: no pass


def test_the_tflite_rule_tells_final_casts_and_stored_weights_from_arithmetic() -> None:
    from formula_check.execution.float16_outputs import tflite_use

    dtypes = {0: np.float32, 1: np.float16, 2: np.float32, 3: np.float16, 4: np.float32}
    dequantize = {"index": 0, "op_name": "DEQUANTIZE", "inputs": [1], "outputs": [2]}
    matmul = {"index": 1, "op_name": "FULLY_CONNECTED", "inputs": [0, 2], "outputs": [4]}
    cast = {"index": 2, "op_name": "CAST", "inputs": [4], "outputs": [3]}
    assert tflite_use([dequantize, matmul, cast], dtypes, [3]) == (True, "")
    assert tflite_use([matmul, cast], dtypes, [3]) == (False, "")
    # the cast's output read again, or not an output: arithmetic in float16
    back = {"index": 3, "op_name": "CAST", "inputs": [3], "outputs": [0]}
    assert "CAST (op 3) works in float16" in tflite_use([matmul, cast, back], dtypes, [3, 0])[1]
    assert "CAST (op 2)" in tflite_use([matmul, cast], dtypes, [4])[1]
    half_add = {"index": 4, "op_name": "ADD", "inputs": [1, 3], "outputs": [3]}
    assert "ADD (op 4) works in float16" in tflite_use([half_add], dtypes, [3])[1]
