"""The README's first steps work as written: its `mkdocs.yml` lines and its first block,
pasted into a fresh site, build under ``--strict``; the drift it describes fails the build
with the line it shows."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from support import mkdocs_build

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text(encoding="utf-8")

pytestmark = [pytest.mark.tf, pytest.mark.site]


def _fenced(language: str) -> list[str]:
    """The README's fences of ``language`` (```` ````markdown ```` holds the page)."""
    fence = "````" if language == "markdown" else "```"
    return re.findall(rf"^{fence}{language}\n(.*?)^{fence}$", README, re.M | re.S)


def _site(tmp_path: Path, page: str) -> Path:
    (config,) = [text for text in _fenced("yaml") if "formula-check" in text]
    (tmp_path / "mkdocs.yml").write_text(f"site_name: readme\n{config}", encoding="utf-8")
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "index.md").write_text(page, encoding="utf-8")
    return tmp_path


def test_the_readme_turns_the_plugin_on_with_its_lines_alone() -> None:
    (config,) = [text for text in _fenced("yaml") if "formula-check" in text]
    assert yaml.safe_load(config) == {"plugins": ["search", "formula-check"]}


def test_the_first_block_builds_strictly_and_verifies(tmp_path: Path) -> None:
    (page,) = _fenced("markdown")
    project = _site(tmp_path, page)
    done = mkdocs_build(project, strict=True)
    assert done.returncode == 0, done.stdout + done.stderr
    html = (project / "site" / "index.html").read_text(encoding="utf-8")
    assert 'data-fc-status="verified"' in html


def test_the_drift_it_describes_fails_with_the_line_it_shows(tmp_path: Path) -> None:
    (page,) = _fenced("markdown")
    drifted = re.sub(r"tf\.sqrt\(tf\.cast\(tf\.shape\(k\)\[-1\], tf\.float32\)\)", "d_k", page)
    drifted = drifted.replace(
        "def attention(q, k, v, mask=None):",
        "def attention(q, k, v, mask=None):\n    d_k = tf.cast(tf.shape(k)[-1], tf.float32)",
    )
    assert drifted != page
    shown = re.search(r"`(docs/index\.md:\d+ \[sdpa\]: mismatch: output: max \|Δ\| = )", README)
    assert shown is not None, "the README shows the failing line"
    done = mkdocs_build(_site(tmp_path, drifted), strict=True)
    assert done.returncode != 0
    assert shown.group(1) in done.stderr, done.stderr
