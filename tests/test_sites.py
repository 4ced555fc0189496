"""Real ``mkdocs build --strict`` runs of the fixture sites, asserting the exact log lines.

The four builds start together (each in its own process, as a user runs them) and each test
waits for its own, so the TensorFlow imports overlap instead of adding up.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from support import start_process, without_tensorflow

pytestmark = [pytest.mark.site, pytest.mark.tf]

FIXTURE_SITES = Path(__file__).resolve().parent.parent / "fixtures" / "sites"
SITES = ("good", "drift", "bad-input", "zh")


@dataclass
class Build:
    """One finished build: exit code, log lines, and the project folder it ran in."""

    returncode: int
    log: list[str]
    project: Path

    @property
    def warnings(self) -> list[str]:
        return [line for line in self.log if line.startswith("WARNING -  ")]

    def html(self, page: str) -> str:
        return (self.project / "site" / page).read_text(encoding="utf-8")


def start_build(project: Path) -> subprocess.Popen[str]:
    return start_process([sys.executable, "-m", "mkdocs", "build", "--strict"], project)


def finish(process: subprocess.Popen[str], project: Path) -> Build:
    output, _ = process.communicate(timeout=300)
    return Build(process.returncode, output.splitlines(), project)


@pytest.fixture(scope="module")
def builds(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Build]]:
    """Copy every fixture site into tmp and build them all at once."""
    started = {}
    for name in SITES:
        project = tmp_path_factory.mktemp("sites") / name
        shutil.copytree(
            FIXTURE_SITES / name, project, ignore=shutil.ignore_patterns("site", ".cache")
        )
        started[name] = (start_build(project), project)
    yield {name: finish(process, project) for name, (process, project) in started.items()}


def test_good_site_builds_strict_and_green(builds: dict[str, Build]) -> None:
    build = builds["good"]
    assert build.returncode == 0, "\n".join(build.log)
    assert build.warnings == []
    assert any(
        line.startswith(
            "INFO    -  docs/index.md:44 [softmax-wrong-axis]: expected failure (mismatch): output:"
        )
        for line in build.log
    )


def test_good_site_has_cards_for_every_builtin_oracle(builds: dict[str, Build]) -> None:
    report = json.loads((builds["good"].project / "site" / "formula-check-report.json").read_text())
    oracles = {block["oracle"] for block in report["blocks"]}
    assert oracles == {
        "attention", "multihead", "self_attention", "positional_encoding", "ffn",
        "softmax", "layer_norm", "linear", "sublayer",
    }  # fmt: skip
    assert report["summary"]["failed"] == 0
    assert [(b["page"], b["line"], b["id"]) for b in report["blocks"][:2]] == [
        ("docs/index.md", 5, "sdpa"),
        ("docs/index.md", 24, "sdpa-file"),
    ]
    layers = {b["id"]: b["line"] for b in report["blocks"] if b["page"] == "docs/layers.md"}
    assert layers["ffn"] == 12  # front matter counted


def test_good_site_pages_carry_math_cards_and_images(builds: dict[str, Build]) -> None:
    build = builds["good"]
    page = build.html("multihead/index.html")
    assert page.count('<div class="arithmatex">') == 3
    assert page.count('data-fc-status="verified"') == 3
    images = _image_sources(page)
    assert images
    assert all(src.startswith("../assets/formula-check/") for src in images)
    for src in images:
        assert (build.project / "site" / "multihead" / src).resolve().is_file()
    assets = build.project / "site" / "assets" / "formula-check"
    assert (assets / "mathjax" / "tex-svg.js").is_file()
    assert (assets / "formula-check.css").is_file()
    index = build.html("index.html")
    assert '<script src="assets/formula-check/mathjax-config.js">' in index
    assert 'href="assets/formula-check/formula-check.css"' in index
    assert "fc-status-xfail" in index


def test_good_site_report_page_links_to_cards(builds: dict[str, Build]) -> None:
    report = builds["good"].html("formula-check-report/index.html")
    assert '<a href="../multihead/#fc-mha">docs/multihead.md:6</a>' in report


def test_good_site_rebuild_is_served_from_the_cache(builds: dict[str, Build]) -> None:
    project = builds["good"].project
    again = finish(start_build(project), project)
    assert again.returncode == 0, "\n".join(again.log)
    report = json.loads((project / "site" / "formula-check-report.json").read_text())
    assert all(block["cached"] for block in report["blocks"])


DRIFT = [
    "docs/index.md:13 [scale-by-dk]: mismatch: output: max |Δ|",
    "docs/index.md:29 [softmax-axis]: mismatch: output: max |Δ|",
    "docs/index.md:45 [mask-sign]: mismatch: output: max |Δ|",
    "docs/index.md:63 [split-heads]: mismatch: output: max |Δ|",
    "docs/index.md:98 [sin-cos-swapped]: mismatch: output: max |Δ|",
    "docs/index.md:115 [exponent]: mismatch: output: max |Δ|",
    "docs/index.md:133 [gelu]: mismatch: output: max |Δ|",
    "docs/index.md:148 [missing-bias]: mismatch: output: max |Δ|",
    "docs/index.md:163 [halves]: mismatch: output: max |Δ|",
]


def test_drift_site_fails_strict_listing_every_drift(builds: dict[str, Build]) -> None:
    build = builds["drift"]
    assert build.returncode == 1
    assert len(build.warnings) == len(DRIFT)
    for line, prefix in zip(build.warnings, DRIFT, strict=True):
        assert line.startswith("WARNING -  " + prefix), line
    assert "Aborted with 9 warnings in strict mode!" in build.log


BAD_INPUT = [
    "docs/index.md:10 [broken]: error: SpecError: malformed formula header near 'oracle=\"attention'",
    "docs/index.md:21 [typo-oracle]: error: SpecError: option oracle='atention': unknown oracle "
    "'atention'; did you mean 'attention'?",
    "docs/index.md:32 [typo-option]: error: SpecError: unknown option 'dimz'; did you mean 'dims'?",
    "docs/index.md:43 [no-snippet]: error: SpecError: no ```python fence follows this formula block",
    "docs/index.md:49 [escape]: error: SnippetError: snippet path '../outside.py' is outside the project",
    "docs/index.md:55 [hangs]: timeout: ",
    "docs/index.md:67 [crashes]: error: crashed: ",
    "docs/index.md:81 [html-error]: error: ValueError (line 87): <script>alert(1)</script>",
]


def test_bad_input_site_reports_each_block_and_builds_the_rest(builds: dict[str, Build]) -> None:
    build = builds["bad-input"]
    assert build.returncode == 1
    assert len(build.warnings) == len(BAD_INPUT), "\n".join(build.warnings)
    for line, prefix in zip(build.warnings, BAD_INPUT, strict=True):
        assert line.startswith("WARNING -  " + prefix), line
    assert 'data-fc-status="verified"' in build.html("fine/index.html")


def test_bad_input_site_escapes_what_users_and_snippets_wrote(builds: dict[str, Build]) -> None:
    page = builds["bad-input"].html("index.html")
    assert "<script>alert(1)</script>" not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "\\text{softmax}(x) &lt; 1 &amp; x &gt; 0" in page
    assert page.count('data-fc-status="error"') == 7
    assert page.count('data-fc-status="timeout"') == 1


def test_chinese_site_has_chinese_cards(builds: dict[str, Build]) -> None:
    build = builds["zh"]
    assert build.returncode == 0, "\n".join(build.log)
    page = build.html("index.html")
    assert '<span class="fc-badge">已验证</span>' in page
    assert '<span class="fc-badge">预期失败</span>' in page
    assert 'id="fc-注意力"' in page


@pytest.mark.parametrize("name", SITES)
def test_every_card_placeholder_is_filled(builds: dict[str, Build], name: str) -> None:
    """Pages render while their blocks are checked; no page may keep a placeholder."""
    site = builds[name].project / "site"
    report = json.loads((site / "formula-check-report.json").read_text())
    pages = {path: path.read_text(encoding="utf-8") for path in site.rglob("*.html")}
    assert len(pages) > 2
    assert not [path for path, html in pages.items() if "fc-pending" in html]
    for block in report["blocks"]:  # each block's own card, with its own outcome, on its page
        name_ = block["page"].removeprefix("docs/").removesuffix(".md")
        html = pages[site / ("index.html" if name_ == "index" else f"{name_}/index.html")]
        card = f'id="fc-{block["id"]}" data-fc-status="{block["outcome"]}"'
        assert html.count(card) == 1, (block["page"], block["id"], block["outcome"])
    table = builds[name].html("formula-check-report/index.html")
    rows = table.count('<tr class="fc-ok">') + table.count('<tr class="fc-bad">')
    assert rows == len(report["blocks"])


def test_a_build_without_tensorflow_stops_with_one_clear_error(tmp_path: Path) -> None:
    project = tmp_path / "good"
    shutil.copytree(
        FIXTURE_SITES / "good", project, ignore=shutil.ignore_patterns("site", ".cache")
    )
    argv = [sys.executable, "-m", "mkdocs", "build", "--strict"]
    env = dict(os.environ, PYTHONPATH=str(without_tensorflow(tmp_path / "no-tf")))
    done = subprocess.run(
        argv, cwd=project, env=env, capture_output=True, text=True, timeout=300, check=False
    )
    assert done.returncode == 1
    assert "ERROR   -  formula-check: TensorFlow is not installed for" in done.stderr
    assert "Traceback" not in done.stderr


def _build_with_checks_off(
    fixture: str, tmp_path: Path
) -> tuple[Path, subprocess.CompletedProcess[str]]:
    """``mkdocs build --strict`` of a copy of a fixture site with ``enabled: false``, and
    TensorFlow hidden from the build."""
    project = tmp_path / fixture
    shutil.copytree(
        FIXTURE_SITES / fixture, project, ignore=shutil.ignore_patterns("site", ".cache")
    )
    config = project / "mkdocs.yml"
    text = config.read_text(encoding="utf-8")
    assert "  - formula-check\n" in text
    config.write_text(
        text.replace("  - formula-check\n", "  - formula-check:\n      enabled: false\n"),
        encoding="utf-8",
    )
    argv = [sys.executable, "-m", "mkdocs", "build", "--strict"]
    env = dict(os.environ, PYTHONPATH=str(without_tensorflow(tmp_path / "no-tf")))
    done = subprocess.run(
        argv, cwd=project, env=env, capture_output=True, text=True, timeout=300, check=False
    )
    return project, done


def test_a_site_with_checks_turned_off_still_shows_its_math_and_code(tmp_path: Path) -> None:
    """``enabled: false``: no TensorFlow needed, nothing checked, the same formulas and code.
    Validation stays: a link to a card's anchor still lands on its formula."""
    project, done = _build_with_checks_off("good", tmp_path)
    assert done.returncode == 0, done.stderr
    assert "formula-check" not in done.stderr.replace("formula-check-report", "")
    site = project / "site"
    for page in ("index", "layers", "multihead"):
        source = (project / "docs" / f"{page}.md").read_text(encoding="utf-8")
        html = (site / ("" if page == "index" else page) / "index.html").read_text("utf-8")
        formulas = source.count("```formula")
        assert formulas > 0
        anchored = re.findall(r'<div class="arithmatex fc-unchecked" id="fc-([^"]+)">\\\[', html)
        assert len(anchored) == formulas and len(set(anchored)) == formulas
        assert "fc-card" not in html and "```formula" not in html
        assert 'class="highlight"' in html
    index = (site / "index.html").read_text(encoding="utf-8")
    assert '<span class="n">tf</span>' in index, "the snippets are highlighted as code"
    assert '<div class="arithmatex fc-unchecked" id="fc-sdpa">' in index
    layers = (site / "layers" / "index.html").read_text(encoding="utf-8")
    assert 'id="fc-ffn-layer"' in layers, "what index.md links to"
    report = (site / "formula-check-report" / "index.html").read_text(encoding="utf-8")
    assert "Formula checks were turned off for this build" in report
    assert not (site / "formula-check-report.json").exists(), "no report of checks not made"
    assert (site / "assets" / "formula-check" / "mathjax-config.js").is_file()


def test_checks_off_still_report_the_blocks_that_could_never_be_checked(tmp_path: Path) -> None:
    """A malformed header, an unknown oracle or option, a missing snippet or one outside the
    project is the page's fault, known without running anything: ``--strict`` fails on it
    with the checks off too. What only running tells (a hang, a crash, an error raised by the
    snippet) is not reported: nothing ran."""
    _, done = _build_with_checks_off("bad-input", tmp_path)
    assert done.returncode == 1, done.stderr
    warnings = [line for line in done.stderr.splitlines() if line.startswith("WARNING")]
    authoring = [line for line in BAD_INPUT if ": error: S" in line]
    assert len(authoring) == 5
    assert len(warnings) == len(authoring), "\n".join(warnings)
    for line, prefix in zip(warnings, authoring, strict=True):
        assert line.startswith("WARNING -  " + prefix), line
    assert "Traceback" not in done.stderr


def test_checks_off_still_know_the_projects_own_oracles(tmp_path: Path) -> None:
    """A block naming an oracle of the project's own is well formed with the checks off too
    (loading it needs NumPy, not TensorFlow)."""
    project = tmp_path / "own"
    (project / "docs").mkdir(parents=True)
    shutil.copy(
        FIXTURE_SITES.parents[1] / "docs" / "snippets" / "rms_norm_oracle.py",
        project / "my_oracles.py",
    )
    (project / "mkdocs.yml").write_text(
        "site_name: own oracles\nplugins:\n  - formula-check:\n      enabled: false\n"
        '      oracles: ["my_oracles:rms_norm"]\n',
        encoding="utf-8",
    )
    (project / "docs" / "index.md").write_text(
        '# RMS\n\n```formula id="rms" oracle="rms_norm"\nx\n```\n\n'
        "```python\ndef rms_norm(x, gain):\n    return x\n```\n",
        encoding="utf-8",
    )
    argv = [sys.executable, "-m", "mkdocs", "build", "--strict"]
    env = dict(os.environ, PYTHONPATH=str(without_tensorflow(tmp_path / "no-tf")))
    done = subprocess.run(
        argv, cwd=project, env=env, capture_output=True, text=True, timeout=300, check=False
    )
    assert done.returncode == 0, done.stderr
    assert 'id="fc-rms"' in (project / "site" / "index.html").read_text(encoding="utf-8")


def _image_sources(page: str) -> list[str]:
    marker = '<img src="'
    return [chunk.split('"', 1)[0] for chunk in page.split(marker)[1:]]
