"""Every writer survives any string: a lone surrogate, a control character, a terminal escape,
a workflow command. What a sink cannot hold is shown by a stand-in (:mod:`formula_check.sinks`).
"""

from __future__ import annotations

import json
import logging
import re
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from fakes import FakeMaker, build_with_fake_engine
from formula_check.model import CheckSpec, Location, Status, strip_ansi
from formula_check.project import ci_formats
from formula_check.project.merging import RunFacts, shard_report
from formula_check.project.progress import summary
from formula_check.project.sharding import Shard
from formula_check.render import labels_for, render_card, report_body, report_json
from formula_check.results import CheckResult, FormulaVerdict, SnippetFailure, Verdict
from formula_check.sinks import REPLACEMENT, SafeLines, Sink, for_sink
from support import run

# Every code point, lone surrogates included (Hypothesis leaves them out unless told).
ANY_TEXT = st.text(st.characters(exclude_categories=()), max_size=40)
HOSTILE = "\ud800 ##[add-mask]x\n::error::forged\r\x1bc\x1b]0;t\x07\x00\x01\x0b\x7f\x9b\ufffe"
# What a GitHub runner would take for a workflow command: ``::`` opening a line, ``##[``.
_COMMAND = re.compile(r"^\s*::|##\[", re.MULTILINE)
# What a terminal or a log line must not hold: control characters but tab and newline.
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def _result(text: str, status: Status = Status.ERROR) -> CheckResult:
    """A result whose every open-ended text (its page too) is ``text``."""
    verdict = Verdict(
        text or "output",
        status is not Status.MISMATCH,
        ("n",),
        (4,),
        (4,),
        max_abs=0.5,
        n_bad=1,
        n_total=4,
        problem=text,
        regime=text,
    )
    return CheckResult(
        "block",
        Location(f"docs/{text}.md", 3),
        "softmax",
        status,
        verdicts=(verdict,) if status is Status.MISMATCH else (),
        failure=SnippetFailure("ValueError", text, Location(f"docs/{text}.md", 9), text),
        message=text,
        notes=(text,),
        stdout=text,
        formula=FormulaVerdict("not_executable", compiled=text, message=text),
    )


def _is_line(text: str) -> bool:
    text.encode("utf-8")
    return not _CONTROL.search(text) and not _COMMAND.search(text)


@settings(max_examples=150, deadline=None)
@given(ANY_TEXT)
@example(HOSTILE)
def test_each_sink_holds_any_string(text: str) -> None:
    well_formed = for_sink(text, Sink.UTF8)
    well_formed.encode("utf-8")
    if not re.search("[\ud800-\udfff]", text):
        assert well_formed == text
    markup = for_sink(text, Sink.MARKUP)
    ET.fromstring(f'<a b="{_xml(markup)}">{_xml(markup)}</a>'.encode())
    assert _is_line(for_sink(text, Sink.LINE))


def _xml(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace('"', "&quot;")


def test_stand_ins_are_visible_and_ordinary_text_is_kept() -> None:
    assert for_sink("a\ud800b", Sink.UTF8) == f"a{REPLACEMENT}b"
    assert for_sink("a\x01\tb\n", Sink.MARKUP) == "a\u2401\tb\n"
    assert for_sink("x\x1bc y\x07\r\nz", Sink.LINE) == "x y\u2407\nz"
    text = "docs/注意.md:12 [sdpa]: max |Δ| = 3.1e-2 > atol 1e-5 at (0, 3, 1) — ok:: ##"
    assert all(for_sink(text, sink) == text for sink in Sink)


def test_strip_ansi_strips_every_escape_sequence() -> None:
    # ``ESC c`` resets a terminal (its screen cleared); ``ESC 7``/``ESC 8`` move the cursor
    # back; a DCS string carries a payload; ``ESC ( B`` picks a character set.
    text = "a\x1bcb\x1b7c\x1b8d\x1bPq#0;2\x1b\\e\x1b(Bf\x1b[1mg\x1b[0m\x1b]8;;u\x07h"
    assert strip_ansi(text) == "abcdefgh"


@settings(max_examples=60, deadline=None)
@given(ANY_TEXT, st.sampled_from([Status.ERROR, Status.MISMATCH]))
@example(HOSTILE, Status.ERROR)
@example(HOSTILE, Status.MISMATCH)
def test_every_writer_survives_any_string(text: str, status: Status) -> None:
    result = _result(text, status)
    document = report_json([result])
    json.loads(document.encode("utf-8"))
    ET.fromstring(ci_formats.junit_xml([result], lambda _: True))
    labels = labels_for("en")
    html = report_body([result], labels, lambda _: "page/") + render_card(
        result, labels=labels, image_url=lambda figure: "x.svg", make_figures=lambda *a, **k: []
    )
    html.encode("utf-8")
    assert not re.search("[\x00-\x08\x0b\x0c\x0e-\x1f]", html)
    for line in ci_formats.github_annotations([result], lambda _: True):
        assert line.startswith("::error file=") and "\n" not in line
        assert _is_line(line.split("::", 2)[2])
    for text_out in (
        ci_formats.text_card(result, Path("/nonexistent")),
        ci_formats.failure_report(result, Path("/nonexistent")),
        *ci_formats.formula_notes([result]),
        ci_formats.formula_note(result) or "",
    ):
        assert _is_line(text_out)
    assert _is_line(result.headline())  # as the pytest plugin, the magic and Zensical show it
    facts = RunFacts("s", "p", 1, 1, 0, ("error",), "")
    shard = shard_report(
        document, Shard(1, 2), facts, [(0, result)], seconds=1, startup=0, workers=1
    )
    json.loads(shard.encode("utf-8"))
    told = summary([result], pages=1, seconds=1.0, deselected=0, is_failure=lambda _: True)
    assert _is_line(ci_formats.github_safe(told))


def test_a_logged_line_is_made_safe_where_it_is_logged(caplog) -> None:
    logger = logging.getLogger("formula_check.tests.sinks")
    logger.addFilter(SafeLines())
    with caplog.at_level(logging.WARNING, logger=logger.name):
        logger.warning("%s: %s", "docs/x.md:3 [id]", HOSTILE)
    [record] = caplog.records
    assert _is_line(record.getMessage())
    assert record.getMessage().startswith("docs/x.md:3 [id]: \ufffd #\u200b#[add-mask]x\n")


def test_the_plugin_log_is_safe(caplog) -> None:
    from formula_check.faces.mkdocs_plugin import site

    result = _result(HOSTILE)
    with caplog.at_level(logging.DEBUG, logger=site.log.name):
        site.log_result(result, frozenset({"error"}))
    assert [r.levelname for r in caplog.records] == ["WARNING", "INFO"]
    assert all(_is_line(record.getMessage()) for record in caplog.records)


@pytest.mark.tf
def test_a_snippet_raising_a_lone_surrogate_is_said_with_a_replacement() -> None:
    r"""``raise ValueError("\ud800")`` used to abort every build in the report writer, and its
    cached result to abort the next: the check process says it with U+FFFD, so the result and
    its cache entry hold only text every writer can write."""
    code = 'def softmax(x):\n    raise ValueError("\\ud800 \\x1bc\\x1b[1mbold")\n'
    result = run("softmax", code)
    assert result.failure is not None
    assert result.failure.message == f"{REPLACEMENT} bold"
    assert REPLACEMENT in result.failure.traceback
    assert not re.search("[\ud800-\udfff\x1b]", result.failure.traceback)
    json.loads(report_json([result]).encode("utf-8"))


def _raising(spec: CheckSpec) -> CheckResult:
    failure = SnippetFailure("ValueError", HOSTILE, spec.location, HOSTILE)
    return CheckResult(
        spec.block_id, spec.location, spec.oracle, Status.ERROR, failure=failure, stdout=HOSTILE
    )


def test_a_build_whose_snippet_says_anything_writes_its_site_and_report(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    (tmp_path / "docs").mkdir()
    (tmp_path / "mkdocs.yml").write_text(
        "site_name: s\nplugins:\n  - formula-check\nmarkdown_extensions:\n"
        "  - pymdownx.superfences\n",
        encoding="utf-8",
    )
    (tmp_path / "docs" / "index.md").write_text(
        '# P\n\n```formula id="bad" oracle="softmax"\nx\n```\n\n'
        "```python\ndef softmax(x):\n    return x\n```\n",
        encoding="utf-8",
    )
    with caplog.at_level(logging.INFO):
        build_with_fake_engine(tmp_path, FakeMaker(_raising))
    report = json.loads((tmp_path / "site" / "formula-check-report.json").read_bytes())
    assert report["blocks"][0]["detail"].startswith(f"ValueError: {REPLACEMENT} ##[add-mask]")
    [said] = [r.getMessage() for r in caplog.records if "[bad]" in r.getMessage()]
    assert said.startswith(f"docs/index.md:3 [bad]: error: ValueError: {REPLACEMENT} #\u200b#[")
    assert _is_line(said)
    (tmp_path / "site" / "index.html").read_text(encoding="utf-8")
