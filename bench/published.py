"""How far the checker gets with code written the way three public sources write it.

``fixtures/published/`` holds one small MkDocs project per style: a textbook's TensorFlow tab
(``d2l-style``), the TensorFlow Transformer tutorial, 2022 and current editions
(``tutorial-style``), and Keras' code examples (``keras-example-style``). Their blocks are our
own code in each source's shape, with formula fences written as each source prints its
formulas; blocks the header cannot say yet are skipped with the missing feature as reason.
Each project's ``expected.yml`` records today's outcome per block, and
``tests/test_published.py`` holds the fixtures to it.

This script runs ``formula-check check --json`` on a private copy of each project (no cache)
and prints, per style: blocks verified in full, verified only in part, flagged (with the
reason), cannot be expressed (with the missing feature), errors; and the formulas as
published: how many compiled, how many are outside the executable subset or could not be
read, and how many were never tried because their block is skipped. ``--check`` also compares
every block with ``expected.yml`` and exits 1 on a difference.

    python bench/published.py [--check] [--style d2l-style]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
PUBLISHED = ROOT / "fixtures" / "published"
STYLES = ("d2l-style", "tutorial-style", "keras-example-style")
KINDS = ("verify", "partial", "flag", "cannot-express", "error")
_FENCE = re.compile(r"^```formula (?P<header>.*)\n(?P<latex>(?:(?!```).*\n)*?)```", re.MULTILINE)
_ID = re.compile(r"""\bid=["'](?P<id>[^"']+)["']""")
_FORMULA_OFF = re.compile(r"""\bformula=["']?off\b""")


@dataclass(frozen=True)
class Outcome:
    """One block as the report has it, sorted into the manifest's kinds."""

    block_id: str
    kind: str
    status: str
    formula_state: str | None
    published_formula: str | None
    detail: str


def published_formulas(project: Path) -> dict[str, str | None]:
    """Block id -> its LaTeX when the block checks a formula its source prints, else None
    (the block says ``formula="off"``: the source prints no formula for that code)."""
    formulas: dict[str, str | None] = {}
    for page in sorted((project / "docs").rglob("*.md")):
        for fence in _FENCE.finditer(page.read_text(encoding="utf-8")):
            header = fence["header"]
            found = _ID.search(header)
            if found is None:
                raise SystemExit(f"{page}: a formula block without id=")
            latex = " ".join(fence["latex"].split())
            formulas[found["id"]] = None if _FORMULA_OFF.search(header) else latex
    return formulas


def kind_of(block: dict[str, object]) -> str:
    """The manifest kind a report block comes to."""
    status = block["status"]
    formula = block["formula"]
    state = formula.get("state") if isinstance(formula, dict) else None
    if status == "verified":
        return "verify" if state in (None, "agrees") else "partial"
    if status == "mismatch":
        return "flag"
    if status == "skipped" or (status == "error" and "SpecError" in str(block["detail"])):
        return "cannot-express"
    return "error"


def run_style(style: str, where: Path) -> list[Outcome]:
    """Check a private copy of one style's project; one outcome per block, in page order."""
    project = where / style
    shutil.copytree(PUBLISHED / style, project, ignore=shutil.ignore_patterns(".cache", "site"))
    report = where / f"{style}.json"
    command = [sys.executable, "-m", "formula_check.faces.cli", "check", "--no-cache"]
    command += ["--json", str(report), str(project / "mkdocs.yml")]
    done = subprocess.run(command, cwd=project, capture_output=True, text=True, check=False)
    if done.returncode not in (0, 1) or not report.exists():
        raise RuntimeError(f"{style}: formula-check exited {done.returncode}\n{done.stderr}")
    formulas = published_formulas(project)
    outcomes = []
    for block in json.loads(report.read_text(encoding="utf-8"))["blocks"]:
        formula = block["formula"]
        outcomes.append(
            Outcome(
                block_id=block["id"],
                kind=kind_of(block),
                status=block["status"],
                formula_state=formula["state"] if formula else None,
                published_formula=formulas.get(block["id"]),
                detail=block["detail"],
            )
        )
    return outcomes


def expected(style: str) -> dict[str, str]:
    """The style's manifest: block id -> ``verify``, ``partial: …``, ``flag: …``, …"""
    with (PUBLISHED / style / "expected.yml").open(encoding="utf-8") as manifest:
        return {str(key): str(value) for key, value in yaml.safe_load(manifest).items()}


def differences(outcomes: list[Outcome], manifest: dict[str, str]) -> list[str]:
    """Every way the outcomes and the manifest disagree, one line each."""
    problems = []
    seen = {outcome.block_id for outcome in outcomes}
    problems += [f"{name}: in expected.yml, not in the pages" for name in manifest.keys() - seen]
    for outcome in outcomes:
        entry = manifest.get(outcome.block_id)
        if entry is None:
            problems.append(f"{outcome.block_id}: {outcome.kind}, but not in expected.yml")
            continue
        kind, _, reason = (part.strip() for part in entry.partition(":"))
        if kind not in KINDS:
            problems.append(f"{outcome.block_id}: unknown kind {kind!r} in expected.yml")
        elif kind != outcome.kind:
            problems.append(
                f"{outcome.block_id}: expected {entry!r}, now {outcome.kind} "
                f"({outcome.status}: {outcome.detail[:200]})"
            )
        elif kind == "flag" and reason.lower() not in outcome.detail.lower():
            problems.append(
                f"{outcome.block_id}: flagged, but its message does not say {reason!r}: "
                f"{outcome.detail[:200]}"
            )
    return problems


def summary(style: str, outcomes: list[Outcome]) -> list[str]:
    """The figures for one style, as printed lines."""
    kinds = Counter(outcome.kind for outcome in outcomes)
    lines = [f"{style}: {len(outcomes)} blocks"]
    lines.append("  " + ", ".join(f"{kinds[kind]} {label}" for kind, label in _LABELS.items()))
    for outcome in outcomes:
        if outcome.kind in ("flag", "cannot-express", "error"):
            lines.append(f"    {outcome.kind:15} {outcome.block_id}: {outcome.detail[:140]}")
    printed = [outcome for outcome in outcomes if outcome.published_formula is not None]
    states = Counter(outcome.formula_state or "not tried" for outcome in printed)
    compiled = states["agrees"] + states["differs"]
    distinct = {outcome.published_formula for outcome in printed}
    lines.append(
        f"  formulas as published: {len(printed)} blocks ({len(distinct)} distinct formulas); "
        f"compiled {compiled} (agrees {states['agrees']}, differs {states['differs']}), "
        f"not executable {states['not_executable']}, unreadable {states['invalid']}, "
        f"not tried (block skipped or failed first) {states['not tried']}"
    )
    return lines


_LABELS = {
    "verify": "verified in full",
    "partial": "verified in part",
    "flag": "flagged",
    "cannot-express": "cannot be expressed",
    "error": "errors",
}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--style", choices=STYLES, action="append", help="default: all three")
    parser.add_argument("--check", action="store_true", help="compare with expected.yml")
    args = parser.parse_args()
    os.environ.setdefault("NO_MKDOCS_2_WARNING", "1")
    failed = False
    totals: Counter[str] = Counter()
    with tempfile.TemporaryDirectory(prefix="published-") as where:
        for style in args.style or STYLES:
            outcomes = run_style(style, Path(where))
            totals.update(outcome.kind for outcome in outcomes)
            print("\n".join(summary(style, outcomes)))
            if args.check:
                problems = differences(outcomes, expected(style))
                failed |= bool(problems)
                print("\n".join(f"  DIFFERS {problem}" for problem in problems))
    print("all: " + ", ".join(f"{totals[kind]} {label}" for kind, label in _LABELS.items()))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
