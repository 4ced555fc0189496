"""The package passes its own linters (ruff with a broad rule set, mypy --strict), keeps its
import contracts (import-linter) and its size limits (functions of 60 lines, modules of 500,
complexity of radon's grade C), CI runs what the README says, and the version is written in
one place."""

from __future__ import annotations

import ast
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _tool(name: str) -> list[str]:
    if shutil.which(name) is None:
        pytest.fail(f"{name} is not installed; install the test extra: pip install -e '.[test]'")
    return [name]


def test_ruff_is_clean() -> None:
    result = subprocess.run(
        [*_tool("ruff"), "check", "plugin", "tests", "bench", "docker"],
        check=False,
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_no_function_is_more_complex_than_radon_grade_c() -> None:
    # Grade C ends at a complexity of 20. Radon itself, not ruff's C90: that leaves out
    # `and`/`or`, and scored radon's E31 at 12.
    result = subprocess.run(
        [*_tool("radon"), "cc", "--min", "D", "--show-complexity", "plugin/formula_check"],
        check=False,
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert (result.returncode, result.stdout) == (0, ""), result.stdout + result.stderr


def test_mypy_strict_is_clean() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "mypy"], check=False, cwd=ROOT, capture_output=True, text=True
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_import_contracts_hold() -> None:
    # The layers and the nevers of ARCHITECTURE.md, as contracts in pyproject.toml.
    result = subprocess.run(
        [*_tool("lint-imports"), "--no-cache"],
        check=False,
        cwd=ROOT,
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT / "plugin")},
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_no_import_is_excused_from_the_contracts() -> None:
    # ARCHITECTURE.md: the contracts hold as written; an exception is a layering bug to fix.
    text = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    assert "ignore_imports" not in text


def test_the_package_root_holds_few_modules_and_every_folder_is_a_layer_of_the_contract() -> None:
    # ARCHITECTURE.md "The map": a module belongs to a folder of its layer, not to the root.
    package = ROOT / "plugin" / "formula_check"
    assert len(list(package.glob("*.py"))) <= 15
    layers = (ROOT / "pyproject.toml").read_text(encoding="utf-8").split("layers = [", 1)[1]
    layers = layers.split("]", 1)[0]
    folders = [path.name for path in package.iterdir() if (path / "__init__.py").is_file()]
    assert [name for name in folders if f"formula_check.{name}" not in layers] == []


def test_no_function_runs_over_60_lines_and_no_module_over_500() -> None:
    # STYLE.md "Small": a function fits on a screen, a module does one job (radon holds the
    # branches, above; this the length, def line to last line).
    too_long = []
    for path in sorted((ROOT / "plugin" / "formula_check").rglob("*.py")):
        text = path.read_text(encoding="utf-8")
        name = path.relative_to(ROOT).as_posix()
        if len(text.splitlines()) > 500:
            too_long.append(name)
        too_long += [
            f"{name}:{node.lineno} {node.name}"
            for node in ast.walk(ast.parse(text))
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
            and (node.end_lineno or node.lineno) - node.lineno >= 60
        ]
    assert too_long == []


def test_the_checker_digest_follows_a_change_to_any_module_in_any_folder(tmp_path: Path) -> None:
    # Every cache key holds it: a module it leaves out would let an old verdict be served
    # after the code that reached it changed (it once hashed only its own folder, store/).
    copy = tmp_path / "formula_check"
    shutil.copytree(
        ROOT / "plugin" / "formula_check", copy, ignore=shutil.ignore_patterns("__pycache__")
    )
    code = "from formula_check.store.digest import checker_digest; print(checker_digest())"

    def digest() -> str:
        env = {**os.environ, "PYTHONPATH": str(tmp_path)}
        run = subprocess.run(
            [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
        )
        return run.stdout.strip()

    seen = [digest()]
    for module in ("checking/judge.py", "execution/one_check.py", "model.py"):
        with (copy / module).open("a", encoding="utf-8") as file:
            file.write("# changed\n")
        seen.append(digest())
    assert len(set(seen)) == len(seen), seen


def test_tensorflow_is_imported_only_by_the_runtime_and_execution() -> None:
    offenders = [
        path.relative_to(ROOT).as_posix()
        for path in (ROOT / "plugin" / "formula_check").rglob("*.py")
        if "import tensorflow" in path.read_text(encoding="utf-8")
        and path.parent.name not in {"runtime", "execution"}
    ]
    assert offenders == []


def test_importing_the_package_does_not_import_tensorflow() -> None:
    code = (
        "import sys, formula_check.session.engine, formula_check.oracles, formula_check.store.cache; "
        "formula_check.oracles.all_oracles(); "
        "sys.exit('tensorflow' in sys.modules)"
    )
    assert subprocess.run([sys.executable, "-c", code], cwd=ROOT, check=False).returncode == 0


def _readme_commands() -> list[str]:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    blocks = readme.split("```bash\n")[1:]
    return [block.split("```", 1)[0].strip() for block in blocks]


def test_ci_runs_the_readme_test_command_then_the_strict_docs_build() -> None:
    test_command = next(
        c for c in _readme_commands() if "python -m pytest -n 2" in c and "[cpu,test]" in c
    )
    lines = (ROOT / ".ci" / "run").read_text(encoding="utf-8").splitlines()
    assert test_command in lines
    assert "mkdocs build --strict" in lines[lines.index(test_command) + 1 :]


@pytest.mark.parametrize(("tests", "code"), [("false", 1), ("true", 0)])
def test_ci_stops_when_the_test_command_fails(tmp_path: Path, tests: str, code: int) -> None:
    # A failure inside the README's && chain does not trip set -e: a red suite once reported
    # green, and the docs build ran after it.
    test_command = next(
        c for c in _readme_commands() if "python -m pytest -n 2" in c and "[cpu,test]" in c
    )
    script = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    script = script.replace(test_command, f"{tests} && true").replace(
        "mkdocs build --strict", "echo docs built"
    )
    (tmp_path / ".ci").mkdir()
    (tmp_path / ".ci" / "run").write_text(script, encoding="utf-8")
    stubs = tmp_path / "bin"
    stubs.mkdir()
    (stubs / "chromium").write_text("#!/bin/sh\n", encoding="utf-8")
    (stubs / "chromium").chmod(0o755)
    env = {**os.environ, "PATH": f"{stubs}{os.pathsep}{os.environ['PATH']}"}
    run = subprocess.run(
        ["bash", str(tmp_path / ".ci" / "run")],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert (run.returncode, "docs built" in run.stdout) == (code, code == 0)


def test_the_version_is_written_once() -> None:
    # Read as text: tomllib is not in Python 3.10, which the package still supports.
    lines = (ROOT / "pyproject.toml").read_text(encoding="utf-8").splitlines()
    assert not any(line.startswith("version =") for line in lines)
    assert 'dynamic = ["version"]' in lines
    source = lines[lines.index("[tool.hatch.version]") + 1]
    assert source == 'path = "plugin/formula_check/version.py"'
