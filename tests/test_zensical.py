"""Real ``zensical build`` runs: the Markdown extension alone, with no MkDocs plugin.

Zensical reads ``mkdocs.yml`` but ignores third-party plugins, so the fixture site lists only
``markdown_extensions`` and the asset paths. The assets are written into the copied site the
way a Zensical user would (``formula_check.project.assets.write_assets``), never committed. A failing
check must fail the build: Zensical lets only ``SuperFencesException`` out of a fence.

Both builds start together (each in its own process) so their TensorFlow imports overlap,
once for the whole run, whichever xdist workers its tests land on.
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import markdown
import pytest
import yaml

from formula_check.project import assets
from formula_check.session.engine import Engine
from formula_check.session.engines import open_engine
from formula_check.session.options import DEFAULTS
from sites import built_once
from support import start_process

if importlib.util.find_spec("zensical") is None:
    pytest.skip(
        "zensical is not installed: pip install -e '.[test]' (it pins zensical)",
        allow_module_level=True,
    )

pytestmark = [pytest.mark.site, pytest.mark.tf]

FIXTURE = Path(__file__).resolve().parent.parent / "fixtures" / "sites" / "zensical"
PAGE = "docs/index.md"
BLOCKS = ("sdpa", "softmax")


@dataclass
class Build:
    """One finished build: exit code, everything it printed, and the project it ran in."""

    returncode: int
    output: str
    project: Path

    def html(self, page: str = "index.html") -> str:
        return (self.project / "site" / page).read_text(encoding="utf-8")


def copy_site(destination: Path) -> Path:
    """The fixture in ``destination``, with the card stylesheet and MathJax written into docs/
    by the documented command (``formula-check assets``, run in the project)."""
    shutil.copytree(FIXTURE, destination, ignore=shutil.ignore_patterns("site", ".cache"))
    done = subprocess.run(
        [sys.executable, "-m", "formula_check.faces.cli", "assets"],
        cwd=destination,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    config = yaml.safe_load((destination / "mkdocs.yml").read_text(encoding="utf-8"))
    printed = yaml.safe_load(done.stdout.split("\n", 2)[2])
    assert printed == {k: config[k] for k in ("extra_css", "extra_javascript")}
    return destination


def start_build(project: Path) -> subprocess.Popen[str]:
    return start_process([sys.executable, "-m", "zensical", "build", "--clean"], project)


def build_both(folder: Path) -> None:
    """The fixture as committed ("good"), and with one snippet drifted from its formula, each
    built by Zensical; each build's exit code and output kept beside its project."""
    good = copy_site(folder / "good")
    drift = copy_site(folder / "drift")
    page = drift / PAGE
    text = page.read_text(encoding="utf-8")
    assert "/ tf.math.sqrt(dk)" in text
    page.write_text(text.replace("/ tf.math.sqrt(dk)", "/ dk"), encoding="utf-8")
    started = [(start_build(project), project) for project in (good, drift)]
    for process, project in started:
        output, _ = process.communicate(timeout=300)
        said = {"returncode": process.returncode, "output": output}
        project.with_suffix(".json").write_text(json.dumps(said), encoding="utf-8")


@pytest.fixture(scope="module")
def builds(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Build]:
    """Both builds, made once for the whole run (:func:`sites.built_once`)."""
    folder = built_once(tmp_path_factory, "zensical", build_both)
    return {
        name: Build(
            **json.loads((folder / f"{name}.json").read_text("utf-8")), project=folder / name
        )
        for name in ("good", "drift")
    }


def card_of(html: str, block: str) -> str:
    match = re.search(
        rf'<div class="admonition [^"]*" id="fc-{re.escape(block)}".*?\n</div>', html, re.S
    )
    assert match is not None, html
    return match.group(0)


def test_site_builds_with_verified_cards_math_and_assets(builds: dict[str, Build]) -> None:
    build = builds["good"]
    assert build.returncode == 0, build.output
    html = build.html()
    for block in BLOCKS:
        card = card_of(html, block)
        assert 'class="admonition success fc-card fc-status-verified"' in card
        assert 'data-fc-status="verified"' in card
    assert '<span class="fc-where">docs/index.md:5</span>' in card_of(html, "sdpa")
    assert '<div class="arithmatex">\\[\n\\text{Attention}(Q, K, V) =' in html
    for stylesheet in assets.stylesheets():
        assert f'<link rel="stylesheet" href="./{stylesheet}">' in html
        assert (build.project / "site" / stylesheet).is_file()
    for script in assets.scripts():
        assert f'<script src="./{script}"></script>' in html
        assert (build.project / "site" / script).is_file()


def test_drifted_snippet_fails_the_build_naming_page_and_line(builds: dict[str, Build]) -> None:
    build = builds["drift"]
    assert build.returncode == 1, build.output
    assert "SuperFencesException: docs/index.md:5 [sdpa]: mismatch: output: max |Δ| = " in (
        build.output
    ), "the failure's own line comes first"
    assert "[softmax]" not in build.output  # only the drifted block is named


def render_with_markdown(project: Path, engine: Engine) -> str:
    """The fixture page through plain ``markdown.Markdown``, configured from its mkdocs.yml."""
    config = yaml.safe_load((project / "mkdocs.yml").read_text(encoding="utf-8"))
    extensions: list[str] = []
    configs: dict[str, dict[str, Any]] = {}
    for entry in config["markdown_extensions"]:
        name, options = next(iter(entry.items())) if isinstance(entry, dict) else (entry, {})
        extensions.append(name)
        configs[name] = dict(options or {})
    configs["formula_check"].update(engine=engine, root=str(project), page=PAGE)
    text = (project / PAGE).read_text(encoding="utf-8")
    return markdown.Markdown(extensions=extensions, extension_configs=configs).convert(text)


def test_cards_match_plain_markdown(builds: dict[str, Build]) -> None:
    build = builds["good"]
    assert build.returncode == 0, build.output
    zensical_html = build.html()
    # The results the build stored, read from its cache: two ways of rendering are compared,
    # not two runs of the checks (and no worker is started for them).
    with contextlib.closing(open_engine(DEFAULTS.engine(build.project))) as engine:
        plain_html = render_with_markdown(build.project, engine)
        assert engine.executed == 0, "the build's results were not read from its cache"
    for block in BLOCKS:
        # Zensical's search honours data-search-exclude and drops the attribute from the page.
        plain = card_of(plain_html, block).replace(" data-search-exclude>", ">", 1)
        assert plain == card_of(zensical_html, block)
    math = re.findall(r'<div class="arithmatex">.*?</div>', plain_html, re.S)
    assert len(math) == len(BLOCKS)
    assert math == re.findall(r'<div class="arithmatex">.*?</div>', zensical_html, re.S)


def test_the_zensical_site_reads_well_in_a_browser_with_the_system_dark(
    builds: dict[str, Build],
) -> None:
    """Math drawn at a phone's width, and every code chip of a card readable, whether the
    system is light or dark (a Zensical site without a palette)."""
    pytest.importorskip("playwright.sync_api")
    from browser_support import (
        CHROMIUM,
        CODE_CONTRAST,
        MATH_WIDTHS,
        chromium,
        open_page,
        serve,
    )

    if CHROMIUM is None:
        pytest.skip("no chromium on PATH")

    build = builds["good"]
    assert build.returncode == 0, build.output
    with serve(build.project / "site") as url, chromium() as browser:
        for system in ("light", "dark"):
            context = browser.new_context(
                viewport={"width": 390, "height": 800}, color_scheme=system
            )
            page, log = open_page(context, url)
            widths = page.evaluate(MATH_WIDTHS)
            assert widths and all(w["drawn"] >= w["natural"] - 1 for w in widths), widths
            assert page.evaluate(CODE_CONTRAST) >= 4.5, system
            assert log.external == [] and log.errors == [], (log.external, log.errors)
            context.close()
