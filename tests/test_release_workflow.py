"""The release workflow does what CONTRIBUTING.md says: a version tag builds the sdist and the
wheel, checks them with twine, and publishes them through PyPI's trusted publishing, with the
only write permission in the job that publishes and no stored token."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parent.parent
WORKFLOW = ROOT / ".github" / "workflows" / "release.yml"


def _workflow() -> dict[Any, Any]:
    loaded = yaml.safe_load(WORKFLOW.read_text(encoding="utf-8"))
    assert isinstance(loaded, dict)
    return loaded


def _runs(job: dict[str, Any]) -> str:
    return "\n".join(step.get("run", "") for step in job["steps"])


def test_a_version_tag_starts_it() -> None:
    workflow = _workflow()
    trigger = workflow.get("on", workflow.get(True))  # YAML 1.1 reads a bare `on` as true
    assert trigger == {"push": {"tags": ["v*"]}}


def test_it_builds_and_checks_both_distributions_against_the_packages_version() -> None:
    build = _workflow()["jobs"]["build"]
    runs = _runs(build)
    assert "python -m build" in runs and "twine check --strict dist/*" in runs
    assert "plugin/formula_check/version.py" in runs and '"v$version"' in runs
    assert (ROOT / "plugin" / "formula_check" / "version.py").is_file()
    assert "formula-check --version" in runs
    assert "permissions" not in build, "the build job keeps the workflow's read-only token"


def test_it_publishes_with_trusted_publishing_and_no_stored_token() -> None:
    workflow = _workflow()
    assert workflow["permissions"] == {"contents": "read"}
    publish = workflow["jobs"]["publish"]
    assert publish["needs"] == "build"
    assert publish["permissions"] == {"id-token": "write"}
    assert publish["environment"]["name"] == "pypi"
    (step,) = [s for s in publish["steps"] if "pypi-publish" in s.get("uses", "")]
    assert step["uses"].startswith("pypa/gh-action-pypi-publish@")
    assert "with" not in step or not {"password", "user"} & set(step["with"])
    assert "secrets." not in WORKFLOW.read_text(encoding="utf-8")


def test_contributing_says_how_to_release_and_set_up_the_publisher() -> None:
    text = (ROOT / "CONTRIBUTING.md").read_text(encoding="utf-8")
    assert "## Releases" in text
    for said in ("git tag v", "trusted publisher", "`release.yml`", "`pypi`", "twine check"):
        assert said in text, said
