"""A snippet whose result holds Inf or NaN: a mismatch that says so, and not one NumPy warning
in the log (warnings are errors in this suite, in the judging threads too)."""

from __future__ import annotations

import pytest

from formula_check.model import Status
from support import shared_engine, spec_for


@pytest.mark.tf
@pytest.mark.parametrize(
    ("returned", "problem"),
    [
        ("x / 0.0", "NaN/Inf values in the result"),
        ("tf.math.log(x - x)", "NaN/Inf values in the result"),
    ],
)
def test_an_infinite_result_is_a_quiet_mismatch(returned: str, problem: str) -> None:
    code = f"import tensorflow as tf\n\ndef softmax(x):\n    return {returned}\n"
    result = shared_engine().check(spec_for("softmax", code))
    assert result.status is Status.MISMATCH, result.message
    verdict = next(v for v in result.verdicts if not v.regime)
    assert problem in verdict.problem and verdict.nonfinite == verdict.n_total
    assert result.arrays["delta"].dtype.name == "float32"
