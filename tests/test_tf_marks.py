"""Every test that needs TensorFlow is marked ``tf``: a test without the mark runs as on a
machine without TensorFlow (the guard in ``tests/conftest.py``), so one that needs it fails.

Why a guard on every test rather than a check of its own: what needs TensorFlow is mostly in
another process (a ``mkdocs build``, the CLI, a worker, a zygote started with ``python -c``),
where neither a look at a test's source nor a collection-only run can see it; and running the
``not tf`` tests without TensorFlow from inside the suite would run them twice. The guard costs
one environment variable per test, and these tests check that it is in place, and that a marked
test keeps the real TensorFlow.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

import support

WITHOUT_TENSORFLOW = Path(__file__).resolve().parent / "without_tf"

FIND = "import importlib.util as u; print(u.find_spec('tensorflow').origin)"


def _python(code: str) -> subprocess.CompletedProcess[str]:
    """``code`` run in a fresh interpreter with this test's environment, as a build runs."""
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False
    )


@pytest.mark.parametrize("package", ["tensorflow", "keras"])
def test_a_test_not_marked_tf_starts_processes_that_cannot_import_tensorflow(package: str) -> None:
    done = _python(f"import {package}")
    assert done.returncode != 0
    assert f"{package} is blocked here" in done.stderr


def test_a_test_not_marked_tf_gets_no_engine_a_marked_test_warmed() -> None:
    assert support._ENGINES == {}


@pytest.mark.tf
def test_a_test_marked_tf_starts_processes_that_find_the_real_tensorflow() -> None:
    done = _python(FIND)  # finds the package without importing it: no seconds of start-up
    assert done.returncode == 0, done.stderr
    assert str(WITHOUT_TENSORFLOW) not in done.stdout
    assert "tensorflow" in done.stdout
