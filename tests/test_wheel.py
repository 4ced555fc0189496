"""The package as a user installs it: the wheel built from this tree, installed (not editable)
into a fresh virtual environment, builds the README's example site with its formula verified,
and the site carries its own MathJax and stylesheet, so it renders offline.

The fresh environment gets the wheel alone; its dependencies (TensorFlow, MkDocs, the MathJax
package...) come from the test environment, through a path file that puts that environment's
packages *after* its own, so the ``formula_check`` that imports is the wheel's copy, and that is
asserted. A path file only adds a folder: the test environment's editable install (another path
file, inside that folder) is not read."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text(encoding="utf-8")

pytestmark = [pytest.mark.tf, pytest.mark.site, pytest.mark.package]


def _run(argv: list[str], cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=300, check=False
    )


def _readme(language: str) -> str:
    fence = "````" if language == "markdown" else "```"
    (found,) = [
        text
        for text in re.findall(rf"^{fence}{language}\n(.*?)^{fence}$", README, re.M | re.S)
        if language != "yaml" or "formula-check" in text
    ]
    return found


def _install(where: Path) -> tuple[Path, dict[str, str]]:
    """A fresh virtual environment holding the wheel (its python, and the environment to run
    it in: no PYTHONPATH, so nothing but the wheel can give ``formula_check``)."""
    where.mkdir()
    env = {key: value for key, value in os.environ.items() if key != "PYTHONPATH"}
    built = _run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q",
         "-w", str(where / "dist"), str(ROOT)],
        where, env,
    )  # fmt: skip
    assert built.returncode == 0, built.stderr
    (wheel,) = (where / "dist").glob("mkdocs_formula_check-*.whl")
    venv = where / "venv"
    made = _run([sys.executable, "-m", "venv", "--without-pip", str(venv)], where, env)
    assert made.returncode == 0, made.stderr
    python = venv / "bin" / "python"
    done = _run(
        [sys.executable, "-m", "pip", "--python", str(python), "install", "-q", "--no-deps",
         "--no-index", str(wheel)],
        where, env,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    ours = _run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                where, env)  # fmt: skip
    # Every package folder this run imports from (a venv's, or the system's under
    # --system-site-packages), never this tree's `plugin` folder, which pytest adds.
    theirs = [path for path in sys.path if Path(path).name in ("site-packages", "dist-packages")]
    Path(ours.stdout.strip(), "zz_dependencies.pth").write_text(
        "".join(f"{path}\n" for path in theirs), encoding="utf-8"
    )
    return python, env


def test_the_readme_site_builds_from_the_installed_wheel_with_its_own_mathjax(
    tmp_path: Path,
) -> None:
    # One test: building and installing the wheel is most of its cost, paid once.
    python, env = _install(tmp_path / "wheel")
    told = _run(
        [str(python), "-c", "import formula_check, importlib.metadata as m; "
         "print(formula_check.__file__); "
         "print(m.distribution('mkdocs-formula-check').locate_file(''))"],
        tmp_path, env,
    )  # fmt: skip
    module, metadata = told.stdout.split()
    venv = python.parent.parent
    assert Path(module).is_relative_to(venv), module
    assert Path(metadata).is_relative_to(venv), metadata

    config = yaml.safe_load(_readme("yaml"))
    # Material as the README's offline note says: no font server.
    config |= {"site_name": "readme", "theme": {"name": "material", "font": False}}
    site = tmp_path / "site_project"
    (site / "docs").mkdir(parents=True)
    (site / "mkdocs.yml").write_text(yaml.safe_dump(config), encoding="utf-8")
    (site / "docs" / "index.md").write_text(_readme("markdown"), encoding="utf-8")
    done = _run([str(python), "-m", "mkdocs", "build", "--strict"], site, env)
    assert done.returncode == 0, done.stdout + done.stderr
    page = (site / "site" / "index.html").read_text(encoding="utf-8")
    assert 'data-fc-status="verified"' in page
    assets = site / "site" / "assets" / "formula-check"
    assert (assets / "mathjax" / "tex-svg.js").stat().st_size > 100_000
    assert (assets / "formula-check.css").is_file()
    assert "assets/formula-check/mathjax/tex-svg.js" in page
    outside = re.findall(r'<(?:script|link)[^>]+(?:src|href)="(https?://[^"]+)"', page)
    assert outside == [], "the page loads nothing from another host"
