"""A returned dict, read by name: an output the dict lacks fails by its name, a misspelt
main output is never left out unchecked; an artifact timed without stated repeats is timed
as code is; a TFLite file that rounds activations to float16 inside is refused, not judged
as float16 weights. Each once let wrong code pass or right code fail."""

from __future__ import annotations

import pytest

import test_artifact_drifts as drifts
from formula_check.model import Status
from implementations import CORRECT
from support import run

pytestmark = pytest.mark.tf

ORACLE, SDPA, OPTIONS = CORRECT["attention"]


def _returning(text: str) -> str:
    return SDPA.replace("return output, attention_weights", text)


# false passes ---------------------------------------------------------------------------------


def test_an_output_returns_names_but_the_dict_lacks_is_never_verified() -> None:
    """returns="output weights" and a dict without an "output" key: the output is never
    compared, yet the check is verified (a returned tuple of one value fails on the missing
    output). Here the wrong output sits under another key."""
    code = _returning('return {"weights": attention_weights, "junk": output * 7}')
    result = run(ORACLE, code, returns=("output", "weights"), **OPTIONS)
    assert result.status is not Status.VERIFIED, result.headline()


def test_a_wrong_output_under_a_misspelt_key_is_not_verified() -> None:
    """{"Output": wrong, "weights": right}: before by-name matching the dict fell back to
    position and the wrong output was caught; now "Output" is left out and only weights is
    compared, so a wrong output is verified with no word that the output went unchecked."""
    code = _returning('return {"Output": output * 7, "weights": attention_weights}')
    result = run(ORACLE, code, **OPTIONS)
    assert result.status is not Status.VERIFIED, result.headline()


# misleading verdicts --------------------------------------------------------------------------


def test_the_missing_output_is_the_one_said_missing() -> None:
    """returns="output weights", dict {"weights": w}: the mismatch is a verdict on "weights"
    ('returns= names it as value 2, but the code returned only 1'), which was returned and
    is right; "output", the one missing, is never named."""
    code = _returning('return {"weights": attention_weights}')
    result = run(ORACLE, code, returns=("output", "weights"), **OPTIONS)
    failed = [v.name for v in result.verdicts if not v.ok]
    assert failed == ["output"], [(v.name, v.ok, v.problem) for v in result.verdicts]


# artifacts ------------------------------------------------------------------------------------

EXPORT_MIXED = """
class Mid(tf.Module):
    def __init__(self, b):
        super().__init__()
        self.block = b

    @tf.function(input_signature=[tf.TensorSpec([None, N, D], tf.float32, name="x"),
                                  tf.TensorSpec([None, 1, N, N], tf.float32, name="mask")])
    def serve(self, x, mask):
        y = tf.cast(self.block(x, mask), tf.float16) * tf.constant(1.0, tf.float16)
        return {"output": tf.cast(y, tf.float32)}


mid = Mid(block())
converter = tf.lite.TFLiteConverter.from_concrete_functions(
    [mid.serve.get_concrete_function()], mid
)
(out / "mid16.tflite").write_bytes(converter.convert())
"""


check = drifts.check  # the drift fixture's exports and engine


def test_an_artifact_timed_without_stated_repeats_is_timed_three_to_five_times(check) -> None:
    """Timing on, no repeats= (the default): artifacts._timed runs range(timing.repeats),
    i.e. range(0), ignoring AUTO_REPEATS, and timing_stats raises IndexError on the empty
    samples: the whole check crashes."""
    result = check("saved_model:a/good", dims=drifts.DIMS.replace('timing="off"', ""))
    code_runs = [t for t in result.timings if not t.label.startswith("oracle")]
    assert code_runs and all(3 <= t.repeats <= 5 for t in code_runs)


def test_a_tflite_rounding_its_activations_to_float16_is_refused(check) -> None:
    """A TFLite with float32 inputs, outputs and weights that casts an activation to float16
    inside: any float16 tensor with float32 ends is taken for 'weights in float16', so it is
    judged (its weights, float32, rounded to float16 in the oracle) instead of refused as
    computing in float16."""
    result = check("a/mid16.tflite::a/good")
    assert result.status is Status.ERROR, result.headline()
    assert "computing in float16" in result.headline()
