"""Shared fixtures: TensorFlow only where a test is marked ``tf``. The warm engine those tests
share is :func:`support.shared_engine`, one per test process (its import costs ~3 s)."""

from __future__ import annotations

import os
from collections.abc import Generator
from pathlib import Path

import pytest

import support

# Material prints a notice about MkDocs 2 on every build; it is noise in asserted logs.
os.environ.setdefault("NO_MKDOCS_2_WARNING", "1")

WITHOUT_TENSORFLOW = Path(__file__).resolve().parent / "without_tf"
"""A folder whose ``tensorflow`` and ``keras`` fail to import, put first on ``PYTHONPATH``."""
NO_TENSORFLOW = ("TensorFlow is not installed", "is blocked here")
"""What the checker says without TensorFlow, and what the stand-ins say."""


@pytest.fixture(autouse=True)
def _tensorflow_only_where_marked(
    request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A test not marked ``tf`` runs as on a machine without TensorFlow, so that
    ``pytest -m "not tf"`` passes there; one that needs TensorFlow unmarked fails in every run.

    Every process the test starts (a build, the CLI, a worker, a check) finds the stand-ins of
    :data:`WITHOUT_TENSORFLOW` first, and the test gets no engine a marked test warmed. What this
    cannot reach: this process itself once a marked test imported TensorFlow in it, and a module
    or session fixture, set up before this one.
    """
    if request.node.get_closest_marker("tf") is not None:
        return
    if "engine" in request.fixturenames:
        pytest.fail("the engine fixture runs TensorFlow: mark the test tf", pytrace=False)
    paths = (str(WITHOUT_TENSORFLOW), os.environ.get("PYTHONPATH"))
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(path for path in paths if path))
    monkeypatch.setattr(support, "_ENGINES", {})


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    """A test not marked ``tf`` that failed for want of TensorFlow says why it had none."""
    report = yield
    said = call.excinfo.exconly() if call.excinfo is not None else ""
    missing = any(words in said for words in NO_TENSORFLOW)
    if report.failed and missing and item.get_closest_marker("tf") is None:
        why = "this test is not marked tf: it ran as without TensorFlow (tests/conftest.py)"
        report.sections.append(("TensorFlow", why))
    return report
