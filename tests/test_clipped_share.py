"""The share of an int8 tensor's values clipped, as the card words it: a tensor that clipped
a few values of many is never said to have clipped 0 %, nor one that missed a few 100 %."""

from __future__ import annotations

import pytest

from formula_check.execution.artifact_calls import clipped_share


@pytest.mark.parametrize(
    ("share", "said"),
    [
        (1.0, "100%"),
        (0.999, "99%"),
        (0.5, "50%"),
        (0.01, "1%"),
        (0.0037, "0.37%"),
        (0.0001, "0.01%"),
        (3 / 100_000, "under 0.01%"),
        (1e-9, "under 0.01%"),
    ],
)
def test_a_share_is_said_without_rounding_to_none_or_all(share: float, said: str) -> None:
    assert clipped_share(share) == said
