"""The sharded GitHub Actions example: valid YAML, shown whole in both CI pages, and every
``formula-check`` command in it one the command line takes."""

from __future__ import annotations

import re
import shlex
from pathlib import Path
from typing import Any

import pytest
import yaml

from formula_check.faces import cli

ROOT = Path(__file__).resolve().parent.parent
WORKFLOW = ROOT / "docs" / "examples" / "github-workflow-sharded.yml"
_EXPRESSION = re.compile(r"\$\{\{\s*([^}]*?)\s*\}\}")


def workflow() -> Any:
    return yaml.safe_load(WORKFLOW.read_text(encoding="utf-8"))


def commands() -> list[str]:
    """Each ``formula-check`` command the steps run (one in ``$(...)`` too), with
    ``${{ matrix.shard }}`` as 1 and any other expression as a word."""
    found = set()
    for job in workflow()["jobs"].values():
        for step in job["steps"]:
            run = _EXPRESSION.sub(
                lambda m: "1" if m[1] == "matrix.shard" else "x", step.get("run", "")
            )
            for part in " ".join(run.split()).split("$("):
                command = part.split("|", maxsplit=1)[0].split(")", maxsplit=1)[0].strip()
                if command.startswith("formula-check "):
                    found.add(command)
    return sorted(found)


def test_the_workflow_is_valid_yaml_with_a_shard_matrix_and_a_merge() -> None:
    jobs = workflow()["jobs"]
    shards = jobs["shard"]["strategy"]["matrix"]["shard"]
    assert shards == list(range(1, len(shards) + 1))
    assert jobs["merge"]["needs"] == "shard" and jobs["merge"]["if"] == "always()"
    run = " ".join(step.get("run", "") for step in jobs["shard"]["steps"])
    assert f"--shard ${{{{ matrix.shard }}}}/{len(shards)}" in run


@pytest.mark.parametrize("command", commands())
def test_each_command_is_one_the_cli_takes(
    command: str, capsys: pytest.CaptureFixture[str]
) -> None:
    words = shlex.split(command)[1:]
    if words == ["--version"]:
        with pytest.raises(SystemExit) as done:
            cli.build_parser().parse_args(words)
        assert done.value.code == 0 and capsys.readouterr().out.startswith("formula-check ")
        return
    parsed = cli.build_parser().parse_args(words)
    assert parsed.command in {"check", "merge"}
    if parsed.command == "merge":
        assert parsed.json is not None, "merge --json OUT, not the deprecated output-first form"


def test_the_workflow_checks_shards_and_merges_them() -> None:
    found = commands()
    assert any(c.startswith("formula-check check --shard 1/") for c in found)
    assert any(c.startswith("formula-check merge ") and "--github" in c for c in found)


def test_the_caches_key_names_the_lock_file_and_the_checker() -> None:
    for job in workflow()["jobs"].values():
        for step in job["steps"]:
            if str(step.get("uses", "")).startswith("actions/cache"):
                key = step["with"]["key"]
                assert "hashFiles('requirements.lock')" in key
                assert "steps.checker.outputs.version" in key


@pytest.mark.parametrize("page", ["docs/ci.md", "docs/zh/ci.md"])
def test_both_ci_pages_show_the_workflow_whole(page: str) -> None:
    text = (ROOT / page).read_text(encoding="utf-8")
    assert f"```yaml\n{WORKFLOW.read_text(encoding='utf-8')}```" in text


def test_every_shard_balances_by_the_one_report_the_plan_hands_out() -> None:
    """The shards' own cache restores may bring different reports (a run saved between
    them); each shard drops what its restore brought and takes the plan's copy."""
    jobs = workflow()["jobs"]
    assert jobs["shard"]["needs"] == "plan"
    uploads = [s for s in jobs["plan"]["steps"] if "upload-artifact" in str(s.get("uses", ""))]
    assert [step["with"]["path"] for step in uploads] == ["formula-check-timings.json"]
    handed = uploads[0]["with"]["name"]
    steps = jobs["shard"]["steps"]
    restore = next(i for i, s in enumerate(steps) if "cache/restore" in str(s.get("uses", "")))
    forget = next(
        i
        for i, s in enumerate(steps)
        if "rm -f formula-check-timings.json" in str(s.get("run", ""))
    )
    take = next(
        i
        for i, s in enumerate(steps)
        if "download-artifact" in str(s.get("uses", "")) and s["with"].get("name") == handed
    )
    check = next(
        i
        for i, s in enumerate(steps)
        if "--timings formula-check-timings.json" in str(s.get("run", ""))
    )
    assert restore < forget < take < check
