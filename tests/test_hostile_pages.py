"""Nothing a page contains stops the build: each hostile input becomes its own block's error.

Pure tests first (no TensorFlow, no MkDocs), then one real site holding every kind of hostile
page at once, built by ``mkdocs build --strict`` and checked by ``formula-check check``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from formula_check.errors import FormulaCheckError, SnippetError, SpecError
from formula_check.latex import (
    NotExecutable,
    check_against_oracle,
    compile_formula,
    default_symbols,
)
from formula_check.latex.limits import MAX_CHARACTERS, MAX_DEPTH, MAX_NESTING
from formula_check.model import Location
from formula_check.pages.blocks import Settings, decode_page, source_blocks
from formula_check.pages.fence_scan import find_formulas
from formula_check.pages.fences import parse_options
from formula_check.session.engine import error_result
from formula_check.snippets import file_digest, resolve_code
from support import mkdocs_build, spec_for

DEEP_FRAC = "\\frac{" * 141 + "x" + "}{2}" * 141
DEEP_BRACES = "{" * 141 + "x" + "}" * 141
DEEP_LEFT = "\\left(" * 141 + "x" + "\\right)" * 141
DEEP_MINUS = "-" * 600 + "x"
LONG_SUM = " + ".join(f"x_{{{i}}}" for i in range(496))
HUGE = "\\text{" + "a" * 5_000_000 + "}(x)"

SOFTMAX = default_symbols("softmax", {})
assert SOFTMAX is not None


# -- the LaTeX pipeline: limits, and a RecursionError never escapes ---------------------------


@pytest.mark.parametrize(
    ("latex", "message"),
    [
        (DEEP_FRAC, f"too deep: the formula is nested deeper than {MAX_NESTING} levels"),
        (DEEP_BRACES, f"too deep: the formula is nested deeper than {MAX_NESTING} levels"),
        (DEEP_LEFT, f"too deep: the formula is nested deeper than {MAX_NESTING} levels"),
        (DEEP_MINUS, f"too deep: the formula is nested deeper than {MAX_NESTING} levels"),
        (LONG_SUM, f"too long: more than {MAX_DEPTH} operations"),
        (HUGE, f"too long: the formula is longer than {MAX_CHARACTERS:,} characters"),
    ],
    ids=["frac", "braces", "left", "minus", "sum-of-496", "5-MB"],
)
def test_a_formula_too_deep_or_long_is_not_checked_rather_than_wrong(
    latex: str, message: str
) -> None:
    """Past a limit the formula is beyond the checker, not wrong: not checked, never a
    mismatch, and the reason stays short whatever the formula's size."""
    with pytest.raises(NotExecutable) as caught:
        compile_formula(latex, SOFTMAX)
    assert caught.value.reason.startswith(message)
    assert len(caught.value.reason) < 200


def test_the_oracle_comparison_turns_a_too_deep_formula_into_not_checked() -> None:
    with pytest.raises(NotExecutable, match="nested deeper than"):
        check_against_oracle(DEEP_FRAC, "softmax", {}, {})


def test_a_formula_at_the_limits_still_compiles() -> None:
    nested = "\\frac{" * (MAX_NESTING - 2) + "x" + "}{2}" * (MAX_NESTING - 2)
    assert compile_formula(nested, SOFTMAX).outputs
    assert compile_formula(" + ".join(["x"] * (MAX_DEPTH - 1)), SOFTMAX).outputs


# -- messages the checker writes are capped, once -----------------------------------------------


def test_every_checker_message_is_capped_with_a_visible_mark() -> None:
    error = SpecError("option x=" + "a" * 5_000_000, Location("docs/p.md", 3))
    assert len(error.message) < 2_100
    assert error.message.startswith("option x=aaa")
    assert "…" in error.message and "characters" in error.message
    assert len(str(error)) < 2_200


def test_a_short_message_is_left_whole() -> None:
    assert FormulaCheckError("plain words").message == "plain words"


# -- header values validated where they are written --------------------------------------------


def test_seed_beyond_what_tensorflow_accepts_is_the_headers_error() -> None:
    where = Location("docs/p.md", 9)
    assert parse_options({"seed": str(2**32 - 1)}, where)["seed"] == 2**32 - 1
    with pytest.raises(SpecError) as caught:
        parse_options({"seed": str(2**32)}, where)
    assert caught.value.location == where
    assert "from 0 to 4294967295" in caught.value.message


def test_a_planning_error_names_its_line_once() -> None:
    spec = spec_for("softmax", "def softmax(x):\n    return x\n", line=121)
    result = error_result(spec, "SpecError", "call: unknown name 'q'")
    assert (
        result.headline() == "docs/page.md:117 [softmax]: error: SpecError: call: unknown name 'q'"
    )


# -- snippet files: regular files only, named relative to the project --------------------------


def _resolve_in_thread(reference: str, root: Path) -> BaseException | None:
    """``resolve_code`` on a thread that may block: the test fails instead of hanging."""
    outcome: list[BaseException | None] = []

    def attempt() -> None:
        try:
            resolve_code(reference, root, Location("docs/p.md", 4))
        except BaseException as exc:
            outcome.append(exc)
        else:
            outcome.append(None)

    thread = threading.Thread(target=attempt, daemon=True)
    thread.start()
    thread.join(timeout=10)
    assert outcome, f"resolving {reference!r} blocked"
    return outcome[0]


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="named pipes are a POSIX thing")
def test_a_snippet_that_is_a_named_pipe_is_refused_without_blocking(tmp_path: Path) -> None:
    (tmp_path / "snippets").mkdir()
    os.mkfifo(tmp_path / "snippets" / "pipe.py")
    error = _resolve_in_thread("snippets/pipe.py:softmax", tmp_path)
    assert isinstance(error, SnippetError)
    assert error.location == Location("docs/p.md", 4)
    assert "'snippets/pipe.py' is not a regular file (a named pipe)" in error.message
    assert str(tmp_path) not in error.message
    started = time.monotonic()
    assert file_digest(tmp_path / "snippets" / "pipe.py") == "missing"
    assert time.monotonic() - started < 5


@pytest.mark.parametrize("reference", ["snippets/:x", "./snippets/.:x", "snippets/../snippets:x"])
def test_a_snippet_path_naming_a_folder_is_named_relative_to_the_project(
    tmp_path: Path, reference: str
) -> None:
    (tmp_path / "snippets").mkdir()
    error = _resolve_in_thread(reference, tmp_path)
    assert isinstance(error, SnippetError)
    assert "'snippets' is a folder, not a file" in error.message
    assert str(tmp_path) not in error.message


def test_an_unreadable_snippet_does_not_quote_the_machines_path(tmp_path: Path) -> None:
    (tmp_path / "snippets").mkdir()
    (tmp_path / "snippets" / "latin.py").write_bytes(b"# caf\xe9\n")
    error = _resolve_in_thread("snippets/latin.py:f", tmp_path)
    assert isinstance(error, SnippetError)
    assert "'snippets/latin.py' is not UTF-8" in error.message
    assert str(tmp_path) not in error.message


# -- pages that are not UTF-8, and fence lines that are very long ------------------------------


LATIN_PAGE = (
    b'# Caf\xe9\n\nText.\n\n```formula id="sm" oracle="softmax" timing="off"\n'
    b"\\text{softmax}(x)\n```\n\n```python\ndef softmax(x):\n    import tensorflow as tf\n\n"
    b"    return tf.nn.softmax(x, axis=-1)\n```\n"
)


def test_a_page_that_is_not_utf8_is_its_own_error_at_the_first_bad_byte(tmp_path: Path) -> None:
    page = decode_page(LATIN_PAGE, "docs/latin.md")
    assert page.text.startswith("# Caf\N{REPLACEMENT CHARACTER}\n")
    assert page.problem is not None
    assert page.problem.location == Location("docs/latin.md", 1)
    assert "not UTF-8: byte 0xE9 at line 1, column 6" in page.problem.message
    blocks = source_blocks(page, page="docs/latin.md", settings=Settings(tmp_path))
    assert [block.block_id for block in blocks] == ["encoding", "sm"]
    headline = blocks[0].error_result().headline()
    assert headline.startswith(
        "docs/latin.md:1 [encoding]: error: PageError: the page is not UTF-8"
    )
    assert blocks[1].spec is not None, "the page's blocks are still checked"


def test_a_utf8_page_with_a_byte_order_mark_decodes_as_mkdocs_reads_it() -> None:
    page = decode_page("\ufeff# Ünïcode\n".encode(), "docs/u.md")
    assert page.problem is None
    assert page.text == "# Ünïcode\n"


def test_a_very_long_fence_line_is_scanned_in_linear_time() -> None:
    lines = ["```formula" + " " * 200_000 + "x", "y", "```"]
    started = time.monotonic()
    found = find_formulas(lines)
    assert time.monotonic() - started < 1
    assert [formula.header.strip() for formula in found] == ["x"]


# -- one real site holding every hostile page: built, and checked from the command line --------


SOFTMAX_CODE = "```python\ndef softmax(x):\n    import tensorflow as tf\n\n    return tf.nn.softmax(x, axis=-1)\n```\n"
PAGES = {
    "index.md": '# Fine\n\n```formula id="fine" oracle="softmax" timing="off"\n'
    "\\text{softmax}(x)\n```\n\n" + SOFTMAX_CODE,
    "deep.md": '# Deep\n\n```formula id="deep" oracle="softmax" timing="off" formula="required"\n'
    f"{DEEP_FRAC}\n```\n\n" + SOFTMAX_CODE,
    "fifo.md": '# Pipe\n\nA named pipe is no snippet.\n\n```formula id="pipe" oracle="softmax" '
    'code="snippets/pipe.py:softmax" timing="off"\n\\text{softmax}(x)\n```\n',
}
"""Each page and its text; ``latin.md`` (:data:`LATIN_PAGE`) is written as bytes."""


def _hostile_site(project: Path, *, enabled: bool = True) -> Path:
    (project / "docs").mkdir(parents=True)
    (project / "snippets").mkdir()
    os.mkfifo(project / "snippets" / "pipe.py")
    plugin = "  - formula-check\n" if enabled else "  - formula-check:\n      enabled: false\n"
    (project / "mkdocs.yml").write_text(
        "site_name: hostile pages\nplugins:\n" + plugin + "markdown_extensions:\n"
        "  - pymdownx.superfences\n  - pymdownx.arithmatex:\n      generic: true\n",
        encoding="utf-8",
    )
    for name, text in PAGES.items():
        (project / "docs" / name).write_text(text, encoding="utf-8")
    (project / "docs" / "latin.md").write_bytes(LATIN_PAGE)
    return project


def _build(project: Path) -> subprocess.CompletedProcess[str]:
    return mkdocs_build(project, strict=True)


PAGE_ERRORS = (
    "WARNING -  docs/latin.md:1 [encoding]: error: PageError: the page is not UTF-8: byte 0xE9 "
    "at line 1, column 6 (in bytes) cannot be read;",
    "WARNING -  docs/fifo.md:5 [pipe]: error: SnippetError: snippet file 'snippets/pipe.py' is "
    "not a regular file (a named pipe)",
)
DEEP_ERROR = (
    "WARNING -  docs/deep.md:3 [deep]: mismatch: formula not checked (formula: required): too "
    f"deep: the formula is nested deeper than {MAX_NESTING} levels"
)
"""The formula too deep to check is not wrong, only not checked; its block requires it."""


def _warnings(log: str) -> list[str]:
    return sorted(line for line in log.splitlines() if line.startswith("WARNING"))


@pytest.mark.site
@pytest.mark.tf
@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="named pipes are a POSIX thing")
def test_hostile_pages_are_their_own_errors_and_the_rest_is_built(tmp_path: Path) -> None:
    project = _hostile_site(tmp_path / "site")
    done = _build(project)
    assert done.returncode == 1, done.stderr
    assert "Traceback" not in done.stderr
    warnings = _warnings(done.stderr)
    assert len(warnings) == 3, "\n".join(warnings)
    expected = sorted((*PAGE_ERRORS, DEEP_ERROR))
    for line, prefix in zip(warnings, expected, strict=True):
        assert line.startswith(prefix), line
    site = project / "site"
    index = (site / "index.html").read_text(encoding="utf-8")
    assert 'data-fc-status="verified"' in index
    latin = (site / "latin" / "index.html").read_text(encoding="utf-8")
    assert "Caf\N{REPLACEMENT CHARACTER}" in latin
    assert 'id="fc-sm" data-fc-status="verified"' in latin, "its blocks are checked all the same"
    assert 'data-fc-status="mismatch"' in (site / "deep" / "index.html").read_text("utf-8")
    assert 'data-fc-status="error"' in (site / "fifo" / "index.html").read_text("utf-8")
    report = json.loads((site / "formula-check-report.json").read_text(encoding="utf-8"))
    outcomes = {(block["page"], block["id"]): block["outcome"] for block in report["blocks"]}
    assert outcomes[("docs/latin.md", "encoding")] == "error"
    assert str(tmp_path) not in json.dumps(report)


@pytest.mark.site
@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="named pipes are a POSIX thing")
def test_hostile_pages_with_checks_off_are_reported_and_the_rest_is_built(tmp_path: Path) -> None:
    """With the checks off, what is known without running anything is still the page's error;
    the formula too deep to compile is not (no formula is compiled)."""
    project = _hostile_site(tmp_path / "site", enabled=False)
    done = _build(project)
    assert done.returncode == 1, done.stderr
    assert "Traceback" not in done.stderr
    warnings = _warnings(done.stderr)
    assert len(warnings) == 2, "\n".join(warnings)
    for line, prefix in zip(warnings, sorted(PAGE_ERRORS), strict=True):
        assert line.startswith(prefix), line
    for page in ("index.html", "deep/index.html", "fifo/index.html", "latin/index.html"):
        assert (project / "site" / page).is_file(), page


@pytest.mark.tf
@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="named pipes are a POSIX thing")
def test_the_command_line_reports_hostile_blocks_and_still_sums_up(tmp_path: Path) -> None:
    """``formula-check check`` on the site: each hostile block is an error of its own, the
    summary and the JSON report still come, and the exit code says something failed; the
    page that is not UTF-8 is its own error, and its blocks are checked all the same."""
    project = _hostile_site(tmp_path / "site")
    report = tmp_path / "report.json"
    done = subprocess.run(
        [sys.executable, "-m", "formula_check.faces.cli", "check", "--json", str(report)],
        cwd=project,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 1, done.stderr
    assert "Traceback" not in done.stderr
    assert "formula-check: 5 blocks on 4 pages" in done.stdout
    assert "2 verified, 1 mismatch, 2 error" in done.stdout
    assert f"  {DEEP_ERROR.removeprefix('WARNING -  ')}" in done.stdout
    assert f"  {PAGE_ERRORS[1].removeprefix('WARNING -  ')}" in done.stdout
    outcomes = {block["id"]: block["outcome"] for block in json.loads(report.read_text())["blocks"]}
    assert outcomes == {
        "fine": "verified",
        "deep": "mismatch",
        "pipe": "error",
        "encoding": "error",
        "sm": "verified",
    }
    assert f"  {PAGE_ERRORS[0].removeprefix('WARNING -  ')}" in done.stdout
