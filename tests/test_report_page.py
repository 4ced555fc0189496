"""The report page's HTML: failures first, counts and a filter on top, every value escaped.

Pure: results are made by hand, the HTML is read with the standard library's parser. The
page's behaviour in a browser (filter, search, sort, widths, palettes) is
``test_browser_sites.py``'s job.
"""

from __future__ import annotations

import dataclasses
import json
from html.parser import HTMLParser
from pathlib import Path

import pytest

from formula_check.model import Location, Status
from formula_check.project import assets
from formula_check.render import labels_for, report_body, report_json
from formula_check.render.report import report_markdown
from formula_check.results import CheckResult, FormulaVerdict, SnippetFailure, TimingStats, Verdict

EN = labels_for("en")
ZH = labels_for("zh")
HOSTILE = '<script>alert("x")</script>'


def _verdict(max_abs: float, *, ok: bool) -> Verdict:
    return Verdict(
        "output", ok, ("n",), (4,), (4,), n_total=4, n_bad=0 if ok else 4, atol=1e-5,
        max_abs=max_abs,
    )  # fmt: skip


def _result(
    block_id: str, path: str, line: int, status: Status, oracle: str = "softmax", **kwargs: object
) -> CheckResult:
    verdicts = (
        (_verdict(1e-7, ok=True),) if status is Status.VERIFIED else (_verdict(0.5, ok=False),)
    )
    fields: dict[str, object] = {"verdicts": verdicts if status is not Status.ERROR else ()}
    fields.update(kwargs)
    return CheckResult(block_id, Location(path, line), oracle, status, **fields)  # type: ignore[arg-type]


def _results() -> list[CheckResult]:
    long_message = "ValueError: " + " ".join(f"word{n}" for n in range(80)) + "\nsecond line"
    return [
        _result("a-first", "docs/a.md", 3, Status.VERIFIED),
        _result("z-drift", "docs/z.md", 9, Status.MISMATCH),
        _result("b-later", "docs/a.md", 30, Status.VERIFIED),
        _result(
            "boom",
            "docs/m.md",
            5,
            Status.ERROR,
            failure=SnippetFailure("ValueError", long_message),
            timings=(TimingStats("eager", 9.1e-4, 1e-5, 5),),
        ),
        _result("xf", "docs/b.md", 2, Status.MISMATCH, expect="fail"),
        _result("skip", "docs/c.md", 7, Status.SKIPPED, message="no GPU"),
    ]


class _Table(HTMLParser):
    """The body rows of the report table: each row's cells as (attributes, text)."""

    def __init__(self) -> None:
        super().__init__()
        self.rows: list[list[tuple[dict[str, str | None], str]]] = []
        self.options: list[tuple[str, str]] = []
        self._cell: tuple[dict[str, str | None], list[str]] | None = None
        self._option: str | None = None
        self._in_body = False
        self._in_pre = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "tbody":
            self._in_body = True
        elif tag == "tr" and self._in_body:
            self.rows.append([])
        elif tag == "td" and self._in_body:
            self._cell = (dict(attrs), [])
        elif tag == "pre":
            self._in_pre = True
        elif tag == "option":
            self._option = dict(attrs).get("value") or ""

    def handle_endtag(self, tag: str) -> None:
        if tag == "td" and self._cell is not None:
            self.rows[-1].append((self._cell[0], "".join(self._cell[1]).strip()))
            self._cell = None
        elif tag == "tbody":
            self._in_body = False
        elif tag == "pre":
            self._in_pre = False

    def handle_data(self, data: str) -> None:
        if self._cell is not None and not self._in_pre:
            self._cell[1].append(data)
        if self._option is not None:
            self.options.append((self._option, data))
            self._option = None


def _table(html: str) -> _Table:
    parser = _Table()
    parser.feed(html)
    return parser


def test_failures_come_first_then_other_outcomes_then_verified_in_page_order() -> None:
    rows = _table(report_body(_results(), EN, lambda r: "#")).rows
    ids = [cells[1][1] for cells in rows]
    assert ids == ["z-drift", "boom", "skip", "xf", "a-first", "b-later"]
    failing = [cells[0][0]["data-fc-failing"] for cells in rows]
    assert failing == ["1", "1", "1", "0", "0", "0"]


def test_counts_sit_on_top_and_each_filter_choice_has_its_count() -> None:
    html = report_body(_results(), EN, lambda r: "#")
    assert html.startswith(
        '<p class="fc-summary">6 blocks: 2 verified, 1 mismatch, 1 error, 1 skipped, '
        "1 expected failure</p>\n\n"
    )
    options = _table(html).options
    assert options == [
        ("", "all (6)"),
        ("failing", "failing (3)"),
        ("mismatch", "mismatch (1)"),
        ("error", "error (1)"),
        ("skipped", "skipped (1)"),
        ("expected_failure", "expected failure (1)"),
        ("verified", "verified (2)"),
    ]
    assert '<div class="fc-report-controls" hidden>' in html, "no script, no dead controls"


def test_a_report_with_no_failure_offers_no_failing_filter() -> None:
    results = [r for r in _results() if r.outcome_ok]
    values = [value for value, _ in _table(report_body(results, EN, lambda r: "#")).options]
    assert "failing" not in values and values[0] == ""


def test_every_value_is_escaped_and_no_markup_gets_in() -> None:
    hostile = [
        _result(
            HOSTILE,
            f"docs/{HOSTILE}.md",
            4,
            Status.ERROR,
            oracle=HOSTILE,
            failure=SnippetFailure("ValueError", f"bad {HOSTILE}\n\x1b[1mbold\x1b[0m"),
        )
    ]
    html = report_body(hostile, EN, lambda r: f'x.html" onclick="{HOSTILE}#fc-{r.block_id}')
    assert "<script" not in html and "\x1b" not in html
    assert ' onclick="' not in html
    cells = _table(html).rows[0]
    assert cells[1][1] == HOSTILE and cells[3][1] == HOSTILE
    assert cells[2][1] == f"docs/{HOSTILE}.md:4"
    assert cells[1][0]["data-fc-key"] == HOSTILE  # the parser unescapes: the raw had entities
    assert "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;" in html


def test_a_long_message_is_short_in_the_table_and_whole_one_click_away() -> None:
    html = report_body(_results(), EN, lambda r: "#")
    boom = next(cells for cells in _table(html).rows if cells[1][1] == "boom")
    short = boom[4][1]
    assert short.endswith("…Full message"), short  # the summary of the <details>
    assert len(short) < 200
    assert "word79" not in short
    whole = html.split("<pre>", 1)[1].split("</pre>", 1)[0]
    assert "word79" in whole and "&#10;second line" in whole
    verified = next(cells for cells in _table(html).rows if cells[1][1] == "a-first")
    assert verified[4][1] == "1e-07", "a clean block shows its number and no message"


def test_rows_carry_their_sort_keys_and_the_labels_of_the_small_screen_layout() -> None:
    rows = _table(report_body(_results(), EN, lambda r: "#")).rows
    boom = next(cells for cells in rows if cells[1][1] == "boom")
    assert [attrs["data-label"] for attrs, _ in boom] == [
        "Status",
        "Block",
        "Page",
        "Oracle",
        "max |Δ| and message",
        "Median time",
    ]
    assert boom[2][0]["data-fc-key"] == "docs/m.md 000000005"
    assert boom[4][0]["data-fc-key"] == "-1", "an error compared nothing: below every number"
    assert float(boom[5][0]["data-fc-key"] or "") == pytest.approx(9.1e-4)
    assert boom[5][1] == "910 µs"


def test_links_go_to_each_card() -> None:
    html = report_body(_results(), EN, lambda r: f"../{r.location.path}/#fc-{r.block_id}")
    assert '<a href="../docs/z.md/#fc-z-drift"><code>z-drift</code></a>' in html
    assert '<a href="../docs/z.md/#fc-z-drift">docs/z.md:9</a>' in html


def test_the_report_page_reads_in_chinese() -> None:
    text = report_markdown(_results(), ZH, lambda r: "#")
    assert text.startswith("# 公式检查报告\n\n")
    assert "全部（6）" in text and "失败（3）" in text and "不一致（1）" in text
    assert 'placeholder="页面、块或参考实现"' in text
    assert 'data-fc-shown="显示 {shown} / {count} 个公式块"' in text


def test_the_json_report_keeps_page_order_whatever_the_page_shows() -> None:
    blocks = json.loads(report_json(_results()))["blocks"]
    assert [b["id"] for b in blocks] == ["a-first", "b-later", "xf", "skip", "boom", "z-drift"]


def test_the_report_assets_ship_with_the_plugin_and_stay_out_of_a_zensical_site() -> None:
    report_files = {"formula-check-report.css", "formula-check-report.js"}
    assert f"{assets.ASSET_DIR}/formula-check-report.css" in assets.stylesheets(report=True)
    assert assets.scripts(mathjax=True, report=True)[-1].endswith("/formula-check-report.js")
    assert assets.scripts(mathjax=False, report=True) == [
        f"{assets.ASSET_DIR}/formula-check-report.js"
    ]
    with_report = {asset.name for asset in assets.site_assets(mathjax=False, report=True)}
    assert report_files <= with_report
    # `formula-check assets` (Zensical, plain Markdown) makes no report page: nothing for it
    assert not report_files & {asset.name for asset in assets.site_assets(mathjax=False)}
    assert not any("report" in path for path in assets.stylesheets() + assets.scripts())
    assert assets.REPORT_SCRIPT.is_file() and assets.REPORT_STYLESHEET.is_file()


@pytest.mark.parametrize(
    "scripts",
    [
        ["javascripts/mathjax.js", "https://unpkg.com/mathjax@3/es5/tex-mml-chtml.js"],
        ["https://cdn.jsdelivr.net/npm/mathjax@3/es5/tex-mml-chtml.js"],
        ["js/tex-svg-full.js"],
        ["js/tex-chtml.min.js"],
        ["https://cdnjs.cloudflare.com/ajax/libs/mathjax/2.7.7/MathJax.js?config=TeX-AMS_HTML"],
    ],
)
def test_a_site_script_that_loads_or_configures_mathjax_is_found(scripts: list[str]) -> None:
    assert assets.site_mathjax(["js/extra.js", *scripts]) == scripts[0]


@pytest.mark.parametrize(
    "scripts",
    [
        [],
        ["js/extra.js", "js/katex.js", "js/texture.js"],
        assets.scripts(mathjax=True, report=True),  # our own copy is not the site's
    ],
)
def test_a_site_without_its_own_mathjax_has_none(scripts: list[str]) -> None:
    assert assets.site_mathjax(scripts) is None


def test_the_report_script_is_plain_es5_with_no_outside_reference() -> None:
    script = Path(assets.REPORT_SCRIPT).read_text(encoding="utf-8")
    assert "http" not in script and "import " not in script and "=>" not in script


def test_a_word_with_a_hyphen_stays_on_one_line() -> None:
    failure = SnippetFailure("ValueError", "Matrix size-incompatible, off by 6.1e-07 <b>")
    result = _result("boom", "docs/a.md", 3, Status.ERROR, failure=failure)
    html = report_body([result], EN, lambda r: "#")
    message = html.split('<p class="fc-report-message">', 1)[1].split("</p>", 1)[0]
    assert message == (
        'ValueError: Matrix <span class="fc-nobr">size-incompatible,</span> off by '
        '<span class="fc-nobr">6.1e-07</span> &lt;b&gt;'
    )


def test_a_formula_not_checked_is_counted_and_said_in_its_verified_row() -> None:
    """Verified on its code alone is never silently green: the counts say how many formulas
    went unchecked (also one whose block failed for it), the row says why, escaped."""
    unchecked = FormulaVerdict("not_executable", message=f"\\{HOSTILE} is outside the subset")
    results = [
        _result("plain", "docs/a.md", 3, Status.VERIFIED),
        _result("primed", "docs/a.md", 9, Status.VERIFIED, formula=unchecked),
        _result(
            "needed",
            "docs/a.md",
            20,
            Status.MISMATCH,
            verdicts=(_verdict(1e-7, ok=True),),
            formula=dataclasses.replace(unchecked, required=True),
        ),
    ]
    html = report_body(results, EN, lambda r: "#")
    assert html.startswith(
        '<p class="fc-summary">3 blocks: 2 verified, 1 mismatch; 2 formulas not checked</p>'
    )
    assert report_body(results, ZH, lambda r: "#").startswith(
        '<p class="fc-summary">共 3 个公式块：'
    )
    assert "2 个公式未检查</p>" in report_body(results, ZH, lambda r: "#")
    rows = {cells[1][1]: cells for cells in _table(html).rows}
    said = 'formula not checked: \\<script>alert("x")</script> is outside the subset'
    assert said in rows["primed"][4][1]
    assert rows["plain"][4][1] == "1e-07"
    assert "formula not checked (formula: required)" in rows["needed"][4][1]
    assert "<script>" not in html
    summary = json.loads(report_json(results))["summary"]
    assert summary["formulas_not_checked"] == 2
