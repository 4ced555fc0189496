"""A formula that cannot be checked, through a real ``mkdocs build --strict``: counted in the
build's summary line and the report, and a failure where the site says ``formula: required``.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from formula_check.model import Location, Status
from formula_check.pages.blocks import Settings, page_blocks
from formula_check.render import labels_for, render_card
from formula_check.results import CheckResult, FormulaVerdict
from support import mkdocs_build

CODE = (
    "```python\nimport tensorflow as tf\n\n\ndef softmax(x):\n"
    "    return tf.nn.softmax(x, axis=-1)\n```\n"
)
PAGE = (
    "# Softmax\n\n"
    '```formula id="primed" oracle="softmax" timing="off"\n'
    "\\text{softmax}(x')\n```\n\n" + CODE + "\n"
    '```formula id="decorated" oracle="softmax" timing="off"\n'
    "{\\color{teal} \\text{softmax}(x)_i} = \\frac{e^{x_i}}{\\sum_j e^{x_j}} \\quad \\forall i\n"
    "```\n\n" + CODE
)
NOT_CHECKED = "formula not checked (formula: required): primes (x') name no executable operation"


def _site(project: Path, formula: str | None) -> Path:
    (project / "docs").mkdir(parents=True)
    (project / "docs" / "index.md").write_text(PAGE, encoding="utf-8")
    option = f"      formula: {formula}\n" if formula else "      report: true\n"
    (project / "mkdocs.yml").write_text(
        "site_name: t\nplugins:\n  - formula-check:\n" + option + "markdown_extensions:\n"
        "  - pymdownx.superfences\n  - pymdownx.arithmatex:\n      generic: true\n",
        encoding="utf-8",
    )
    return project


@pytest.mark.site
@pytest.mark.tf
def test_a_formula_not_checked_is_counted_and_fails_strict_only_where_required(
    tmp_path: Path,
) -> None:
    plain = mkdocs_build(_site(tmp_path / "plain", None), strict=True)
    assert plain.returncode == 0, plain.stderr
    log = plain.stderr
    assert "docs/index.md:3 [primed]: formula not checked: primes (x') name no" in log
    assert "2 verified; 1 formula not checked" in log, log
    site = tmp_path / "plain" / "site"
    summary = json.loads((site / "formula-check-report.json").read_text("utf-8"))["summary"]
    assert summary["formulas_not_checked"] == 1
    card = (site / "index.html").read_text("utf-8")
    assert 'id="fc-decorated" data-fc-status="verified"' in card
    assert "side condition set aside, not checked: \\forall i" in card

    required = mkdocs_build(_site(tmp_path / "required", "required"), strict=True)
    assert required.returncode == 1
    warnings = [line for line in required.stderr.splitlines() if line.startswith("WARNING")]
    assert warnings == [f"WARNING -  docs/index.md:3 [primed]: mismatch: {NOT_CHECKED}"]
    assert "Aborted with 1 warnings in strict mode!" in required.stdout
    assert "1 verified, 1 failing; 1 formula not checked" in required.stderr


def test_the_card_says_why_a_formula_not_checked_fails_its_block() -> None:
    """Under ``formula: required`` the card's formula line is a failure and says why; without
    it the same line is a note, and a reason is escaped either way."""
    unchecked = FormulaVerdict("not_executable", message="\\int<b> is outside the subset")
    result = CheckResult("sm", Location("docs/p.md", 3), "softmax", Status.VERIFIED)
    for labels, said in (
        (labels_for("en"), "formula: required — a formula that is not"),
        (labels_for("zh"), "formula: required——未检查的公式"),
    ):
        note = render_card(
            dataclasses.replace(result, formula=unchecked), labels=labels, image_url=str
        )
        failing = render_card(
            dataclasses.replace(
                result,
                status=Status.MISMATCH,
                formula=dataclasses.replace(unchecked, required=True),
            ),
            labels=labels,
            image_url=str,
        )
        assert '<div class="fc-formula fc-note">' in note and said not in note
        assert '<div class="fc-formula fc-bad">' in failing and said in failing
        assert "<b>" not in failing and "&lt;b&gt;" in failing


@pytest.mark.parametrize(
    ("site", "page", "required"),
    [
        ("on", {}, [False, False, False]),
        ("required", {}, [True, False, False]),
        ("on", {"formula": "required"}, [True, False, False]),
        ("required", {"formula": False}, [False, False, False]),  # YAML reads off as false
    ],
)
def test_a_blocks_own_formula_wins_over_its_pages_and_the_sites(
    tmp_path: Path, site: str, page: dict[str, object], required: list[bool]
) -> None:
    text = "\n".join(
        f'```formula id="b{n}" oracle="softmax"{header}\nx\n```\n\n{CODE}'
        for n, header in enumerate(("", ' formula="on"', ' formula="off"'))
    )
    blocks = page_blocks(
        text.split("\n"),
        page="docs/p.md",
        meta={"formula_check": page} if page else None,
        settings=Settings(tmp_path, formula=site),
    )
    specs = [block.spec for block in blocks]
    assert all(spec is not None for spec in specs), [block.error for block in blocks]
    assert [spec.formula_required for spec in specs if spec is not None] == required
    checked = [spec.check_formula for spec in specs if spec is not None]
    assert checked == [page.get("formula", site) not in ("off", False), True, False]
