"""Shared fixtures: one warm Engine for every test that runs TensorFlow (its import costs ~3 s)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from formula_check.engine import Engine

# Material prints a notice about MkDocs 2 on every build; it is noise in asserted logs.
os.environ.setdefault("NO_MKDOCS_2_WARNING", "1")


@pytest.fixture(scope="session")
def project_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An empty project folder: snippets and the result cache of the shared engine live here."""
    return tmp_path_factory.mktemp("project")


@pytest.fixture(scope="session")
def engine(project_root: Path) -> Iterator[Engine]:
    """One Engine (one worker) for the whole test session."""
    shared = Engine(project_root, workers=1, cache_dir=project_root / ".cache")
    yield shared
    shared.close()
