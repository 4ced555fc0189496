"""The published-style fixtures come out as their ``expected.yml`` says.

``fixtures/published/<style>/`` holds blocks in the shape of three public sources (a
textbook's TensorFlow tab, the TensorFlow Transformer tutorial, Keras' code examples), and its
``expected.yml`` records what each block comes to today: verified in full, in part, flagged
with a reason, or not yet expressible. A block that stops verifying fails here; so does one
that starts to, until its entry is updated, which is how progress on them shows.
``bench/published.py`` prints the same outcomes as figures.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

pytestmark = pytest.mark.tf

BENCH = Path(__file__).resolve().parent.parent / "bench" / "published.py"


def _bench() -> ModuleType:
    spec = importlib.util.spec_from_file_location("published_bench", BENCH)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up by name
    spec.loader.exec_module(module)
    return module


published = _bench()


@pytest.mark.parametrize("style", published.STYLES)
def test_outcomes_match_the_manifest(style: str, tmp_path: Path) -> None:
    outcomes = published.run_style(style, tmp_path)
    problems = published.differences(outcomes, published.expected(style))
    assert not problems, f"{style}: update expected.yml if this is progress\n" + "\n".join(problems)


@pytest.mark.parametrize("style", published.STYLES)
def test_every_block_names_its_outcome_kind(style: str) -> None:
    for block_id, entry in published.expected(style).items():
        kind = entry.partition(":")[0].strip()
        assert kind in published.KINDS, f"{style} {block_id}: {entry!r}"
        if kind != "verify":
            assert entry.partition(":")[2].strip(), f"{style} {block_id}: say why"


def test_kinds_follow_the_report() -> None:
    def block(status: str, state: str | None = None, detail: str = "") -> dict[str, object]:
        return {"status": status, "formula": state and {"state": state}, "detail": detail}

    assert published.kind_of(block("verified")) == "verify"
    assert published.kind_of(block("verified", "agrees")) == "verify"
    assert published.kind_of(block("verified", "not_executable")) == "partial"
    assert published.kind_of(block("mismatch", "agrees")) == "flag"
    assert published.kind_of(block("skipped")) == "cannot-express"
    assert published.kind_of(block("error", detail="SpecError: weights")) == "cannot-express"
    assert published.kind_of(block("error", detail="ValueError: shapes")) == "error"
