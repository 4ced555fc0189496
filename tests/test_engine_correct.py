"""Correct implementations, written the ways users write them, are verified."""

from __future__ import annotations

import pytest

from formula_check.model import Status
from implementations import CORRECT
from support import run

pytestmark = pytest.mark.tf


@pytest.mark.parametrize("case", sorted(CORRECT))
def test_correct_code_is_verified(case: str) -> None:
    oracle, source, options = CORRECT[case]
    result = run(oracle, source, **options)
    assert result.status is Status.VERIFIED, result.headline()
    assert result.verdicts, "something must have been compared"
    assert all(v.max_abs <= v.atol for v in result.verdicts)
