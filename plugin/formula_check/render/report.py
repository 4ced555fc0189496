"""Every result of a build -> a JSON report (for CI) and a report page (for readers)."""

from __future__ import annotations

import html
import json
import math
from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any

from ..model import CheckResult, Verdict, format_seconds, strip_ansi
from .card import status_class
from .labels import OUTCOME_KEYS, Labels, outcome_key

REPORT_VERSION = 2
"""Bumped whenever a field of :func:`report_json` changes meaning."""

# The timing a reader cares about first: how fast the code runs as written.
_PREFERRED_TIMINGS = ("eager", "function", "tf.function")


def _ordered(results: Sequence[CheckResult]) -> list[CheckResult]:
    """Page order, so reports diff cleanly between builds whatever order checks finished in."""
    return sorted(results, key=lambda r: (r.location.path, r.location.line, r.block_id))


def _finite(value: float) -> float | None:
    # JSON has no NaN or Infinity; null says "not a number" and ``detail`` says why.
    return value if math.isfinite(value) else None


def _block(result: CheckResult) -> dict[str, Any]:
    return {
        "id": result.block_id,
        "page": result.location.path,
        "line": result.location.line,
        "oracle": result.oracle,
        "status": result.status.value,
        "outcome": outcome_key(result),
        "expect": result.expect,
        "outcome_ok": result.outcome_ok,
        "max_abs_error": _finite(result.max_abs_error()),
        "detail": strip_ansi(result.detail()),
        "timings": {timing.label: _finite(timing.median) for timing in result.timings},
        "cached": result.cached,
        "notes": list(result.notes),
        "formula": None
        if result.formula is None
        else {
            "state": result.formula.state,
            "max_abs": _finite(result.formula.max_abs),
            "compiled": strip_ansi(result.formula.compiled),
            "message": strip_ansi(result.formula.message),
        },
        "regimes": ["standard", *result.regimes()],
        "verdicts": [_verdict(verdict) for verdict in result.verdicts],
    }


def _verdict(verdict: Verdict) -> dict[str, Any]:
    """One compared output on one input regime: where it differed most, and by how much of
    its tolerance."""
    return {
        "name": verdict.name,
        "regime": verdict.regime or "standard",
        "ok": verdict.ok,
        "max_abs": _finite(verdict.max_abs),
        "max_index": list(verdict.max_index),
        "worst_index": list(verdict.worst_index),
        "tolerance_used": _finite(verdict.used),
        "tolerance": verdict.tolerance,
        "out_of_tolerance": verdict.n_bad,
        "elements": verdict.n_total,
        "problem": verdict.problem,
    }


def _counts(results: Sequence[CheckResult]) -> dict[str, int]:
    counts = Counter(outcome_key(result) for result in results)
    return {key: counts[key] for key in OUTCOME_KEYS if counts[key]}


def report_json(results: Sequence[CheckResult]) -> str:
    """A stable JSON document: sorted keys, blocks in page order, one trailing newline."""
    document = {
        "version": REPORT_VERSION,
        "summary": {
            "total": len(results),
            "failed": sum(not result.outcome_ok for result in results),
            "outcomes": _counts(results),
        },
        "blocks": [_block(result) for result in _ordered(results)],
    }
    return (
        json.dumps(document, sort_keys=True, indent=2, ensure_ascii=False, allow_nan=False) + "\n"
    )


def _median_time(result: CheckResult) -> str:
    by_label = {timing.label: timing for timing in result.timings}
    for label in _PREFERRED_TIMINGS:
        if label in by_label:
            return format_seconds(by_label[label].median)
    return format_seconds(result.timings[0].median) if result.timings else "—"


def _error_cell(result: CheckResult) -> str:
    number = f"{result.max_abs_error():.2g}" if result.verdicts else "—"
    cell = f'<span class="fc-num">{html.escape(number)}</span>'
    if not result.outcome_ok or result.status.value != "verified":
        cell += f"<br><small>{html.escape(strip_ansi(result.detail(brief=True)))}</small>"
    return cell


def _row(result: CheckResult, labels: Labels, page_url: Callable[[CheckResult], str]) -> str:
    key = outcome_key(result)
    css = "fc-ok" if result.outcome_ok else "fc-bad"
    href = html.escape(page_url(result), quote=True)
    cells = [
        f'<td class="fc-status-cell fc-status-{status_class(result)}">'
        f"{html.escape(labels.outcome(key))}</td>",
        f'<td><a href="{href}">{html.escape(str(result.location))}</a></td>',
        f"<td><code>{html.escape(result.block_id)}</code></td>",
        f"<td><code>{html.escape(result.oracle)}</code></td>",
        f"<td>{_error_cell(result)}</td>",
        f'<td class="fc-num">{html.escape(_median_time(result))}</td>',
    ]
    # Newlines inside a cell would split the raw HTML block; the detail is one line of text.
    return f'<tr class="{css}">' + "".join(cells).replace("\n", "&#10;") + "</tr>"


def _summary(results: Sequence[CheckResult], labels: Labels) -> str:
    tallies = [
        labels.tally.format(count=count, name=labels.outcome(key))
        for key, count in _counts(results).items()
    ]
    text = labels.summary.format(count=len(results))
    if tallies:
        text += labels.colon + labels.separator.join(tallies)
    return f'<p class="fc-summary">{html.escape(text)}</p>'


def report_markdown(
    results: Sequence[CheckResult],
    labels: Labels,
    page_url: Callable[[CheckResult], str],
) -> str:
    """A report page: its title, then :func:`report_body`."""
    return f"# {labels.report_title}\n\n" + report_body(results, labels, page_url)


def report_body(
    results: Sequence[CheckResult],
    labels: Labels,
    page_url: Callable[[CheckResult], str],
) -> str:
    """The counts, and one table row per block in page order, as HTML.

    ``page_url`` gives the link to a block (e.g. ``attention/#fc-sdpa``). The table is raw
    HTML with every value escaped, so no page path or message can inject Markdown or markup.
    """
    headings = (
        labels.status,
        labels.page,
        labels.block,
        labels.oracle,
        labels.max_abs_column,
        labels.median_time,
    )
    header = "".join(f"<th>{html.escape(text)}</th>" for text in headings)
    rows = [_row(result, labels, page_url) for result in _ordered(results)]
    table = [
        '<div class="fc-report fc-scroll"><table class="fc-report-table">',
        f"<thead><tr>{header}</tr></thead>",
        "<tbody>",
        *rows,
        "</tbody></table></div>",
    ]
    return _summary(results, labels) + "\n\n" + "\n".join(table) + "\n"
