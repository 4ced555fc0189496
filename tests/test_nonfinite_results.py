"""A snippet whose result holds Inf or NaN: a mismatch that says so, and not one NumPy warning
in the log (warnings are errors in this suite, in the judging threads too)."""

from __future__ import annotations

import re

import pytest

from formula_check.model import Status
from formula_check.pages.blocks import Settings, page_blocks
from support import PROJECT, shared_engine, spec_for


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


NAIVE = "e = tf.exp(x)\n    return e / tf.reduce_sum(e, axis=-1, keepdims=True)"
STABLE = (
    "e = tf.exp(x - tf.reduce_max(x, axis=-1, keepdims=True))\n"
    "    return e / tf.reduce_sum(e, axis=-1, keepdims=True)"
)
OVERFLOW = re.compile(
    r"\d+ NaN/Inf values in the result: overflows float32 on inputs of about ±(\d+) "
    r"\(exp is infinite past 88\.7\); subtract the row maximum before exp"
)


@pytest.mark.tf
def test_an_overflow_on_large_inputs_is_said_with_its_cure() -> None:
    """exp(x) / Σ exp(x) keeps failing on the large values (logits past 88.7 overflow float32),
    and says why; the same softmax less its row maximum verifies; NaN everywhere is no
    overflow (it is NaN on the standard inputs too), and says nothing more."""
    bodies = {
        "naive": NAIVE,
        "stable": STABLE,
        "nan": "return tf.nn.softmax(x) * float('nan')",
    }
    specs = [
        spec_for(
            "softmax", f"import tensorflow as tf\n\ndef softmax(x):\n    {body}\n", block_id=name
        )
        for name, body in bodies.items()
    ]
    naive, stable, nan = shared_engine().check_many(specs)
    assert stable.status is Status.VERIFIED, stable.message
    assert naive.status is Status.MISMATCH and nan.status is Status.MISMATCH
    [large] = [v for v in naive.verdicts if v.regime == "large values"]
    said = OVERFLOW.fullmatch(large.problem)
    assert said is not None, large.problem
    assert 88.7 < float(said[1]) < 1000  # the inputs × 64 of the regime, past exp's limit
    assert said[0] in naive.headline()
    assert not any("overflows" in v.problem for v in nan.verdicts)


def _page(*blocks: tuple[str, str]) -> str:
    return "\n".join(
        f'```formula id="{name}" oracle="softmax" timing="off" {header}\n'
        "\\mathrm{softmax}(x)_i = \\frac{e^{x_i}}{\\sum_j e^{x_j}}\n```\n\n"
        f"```python\nimport tensorflow as tf\n\ndef softmax(x):\n    {body}\n```\n"
        for name, (header, body) in zip(["none", "large", "stable"], blocks, strict=True)
    )


@pytest.mark.tf
def test_a_block_chooses_its_regimes_and_the_card_says_so() -> None:
    """``regimes="none"`` checks the naive softmax on its standard inputs only, deliberately
    (it verifies, and the card says what was left out); naming the large values keeps them,
    where it fails as without the option, and a stable softmax passes them."""
    text = _page(
        ('regimes="none"', NAIVE),
        ('regimes="large values"', NAIVE),
        ('regimes="large values"', STABLE),
    )
    blocks = page_blocks(text.split("\n"), page="docs/page.md", settings=Settings(PROJECT))
    assert all(block.spec is not None for block in blocks), [b.error for b in blocks]
    chosen, large, stable = shared_engine().check_many([b.spec for b in blocks if b.spec])
    assert chosen.status is Status.VERIFIED, chosen.message
    assert "large values" not in chosen.regimes()
    assert "input regimes chosen by the block (regimes=none): not checked on large values" in (
        chosen.notes
    )
    assert large.status is Status.MISMATCH and OVERFLOW.search(large.headline())
    assert "input regimes chosen by the block (regimes=large values)" in large.notes
    assert stable.status is Status.VERIFIED and "large values" in stable.regimes()
