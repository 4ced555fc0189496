"""The 20 blocks the engine benchmarks check: the test suite's correct implementations."""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "plugin"), str(ROOT / "tests")]

from formula_check.model import CheckSpec  # noqa: E402
from implementations import CORRECT  # noqa: E402
from support import spec_for  # noqa: E402


def blocks(count: int = 20) -> list[CheckSpec]:
    """``count`` specs cycling through every correct implementation (timing off: checking only)."""
    cases = sorted(CORRECT)
    specs = []
    for index in range(count):
        oracle, source, options = CORRECT[cases[index % len(cases)]]
        specs.append(spec_for(oracle, source, block_id=f"block-{index}", **options))
    return specs
