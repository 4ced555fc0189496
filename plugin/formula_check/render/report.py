"""Every result of a build -> a JSON report (for CI) and a report page (for readers)."""

from __future__ import annotations

import html
import json
import math
import re
from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any

from formula_check.model import strip_ansi
from formula_check.render.card import status_class
from formula_check.render.labels import OUTCOME_KEYS, Labels, outcome_key
from formula_check.results import CheckResult, Verdict, format_seconds
from formula_check.sinks import Sink, for_sink

REPORT_VERSION = 2
"""Bumped whenever a field of :func:`report_json` changes meaning."""

# The timing a reader cares about first: how fast the code runs as written.
_PREFERRED_TIMINGS = ("eager", "function", "tf.function")


def _ordered(results: Sequence[CheckResult]) -> list[CheckResult]:
    """Page order, so reports diff cleanly between builds whatever order checks finished in;
    a notebook's cells by number (cell 2 before cell 10)."""
    return sorted(
        results,
        key=lambda r: (r.location.file, r.location.cell or 0, r.location.line, r.block_id),
    )


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
        "seconds": round(result.elapsed, 4),  # the check's own time (a cached one's, when made)
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
    """A stable JSON document: sorted keys, blocks in page order, one trailing newline; any
    text the results hold can be written as UTF-8 (a lone surrogate shows as U+FFFD)."""
    document = {
        "version": REPORT_VERSION,
        "summary": {
            "total": len(results),
            "failed": sum(not result.outcome_ok for result in results),
            "outcomes": _counts(results),
            "formulas_not_checked": sum(result.formula_unchecked for result in results),
        },
        "blocks": [_block(result) for result in _ordered(results)],
    }
    text = json.dumps(document, sort_keys=True, indent=2, ensure_ascii=False, allow_nan=False)
    return for_sink(text + "\n", Sink.UTF8)


# The report lists what needs a reader first: failures, then the other outcomes that are not
# clean (skipped, expected failures), then the verified blocks; page order within each.
_NOT_CLEAN = ("mismatch", "error", "timeout", "unexpected_pass", "skipped", "expected_failure")
_RANK = {key: rank for rank, key in enumerate((*_NOT_CLEAN, "verified"))}
# A message longer than this is cut (at a space) in the table; the whole of it is one click away.
_SHORT_MESSAGE = 160


def _rank(result: CheckResult) -> tuple[bool, int]:
    return result.outcome_ok, _RANK.get(outcome_key(result), len(_RANK))


def _failures_first(results: Sequence[CheckResult]) -> list[CheckResult]:
    """Blocks that came out other than their author said first, then page order."""
    return sorted(_ordered(results), key=_rank)


def _median_seconds(result: CheckResult) -> float | None:
    by_label = {timing.label: timing for timing in result.timings}
    for label in _PREFERRED_TIMINGS:
        if label in by_label:
            return by_label[label].median
    return result.timings[0].median if result.timings else None


def _median_time(result: CheckResult) -> str:
    seconds = _median_seconds(result)
    return "—" if seconds is None else format_seconds(seconds)


def _shortened(text: str) -> str:
    """``text`` on one line, cut at a space after at most :data:`_SHORT_MESSAGE` characters."""
    line = " ".join(text.split())
    if len(line) <= _SHORT_MESSAGE:
        return line
    cut = line.rfind(" ", 0, _SHORT_MESSAGE)
    return line[: cut if cut > _SHORT_MESSAGE // 2 else _SHORT_MESSAGE].rstrip() + " …"


def _sort_key(value: float | None) -> str:
    # Sorting puts a block with no number below every number; NaN and Inf sort as the largest.
    if value is None:
        return "-1"
    return repr(value) if math.isfinite(value) else "1e308"


def _error_cell(result: CheckResult, labels: Labels) -> str:
    number = f"{result.max_abs_error():.2g}" if result.verdicts else "—"
    key = _sort_key(result.max_abs_error() if result.verdicts else None)
    cell = f'<td data-label="{_attr(labels.report_detail)}" data-fc-key="{key}">'
    cell += f'<span class="fc-num">{html.escape(number)}</span>'
    quiet = result.outcome_ok and result.status.value == "verified"
    # verified on its code alone: the row says the formula was not checked, and why
    formula = result.formula
    said = formula.summary() if quiet and formula is not None and formula.unchecked else ""
    if quiet and not said:
        return cell + "</td>"
    full = strip_ansi("; ".join(filter(None, (said, result.detail()))))
    short = _shortened(strip_ansi(said or result.detail(brief=True)))
    cell += f'<p class="fc-report-message">{_unbroken(short)}</p>'
    if " ".join(full.split()) != short:
        cell += (
            f'<details class="fc-report-more"><summary>{html.escape(labels.full_message)}'
            f"</summary><pre>{html.escape(full)}</pre></details>"
        )
    return cell + "</td>"


def _unbroken(text: str) -> str:
    """``text`` escaped, each word with a hyphen kept on one line: browsers break after a
    hyphen, which cuts ``6.1e-07`` or ``size-incompatible`` in two on a narrow screen."""
    return "".join(
        f'<span class="fc-nobr">{html.escape(word)}</span>' if "-" in word else html.escape(word)
        for word in re.split(r"(\s+)", text)
    )


def _attr(value: str) -> str:
    return html.escape(value, quote=True)


def _cached(result: CheckResult, labels: Labels) -> str:
    """The report says which results came from the cache (the time is the stored run's); the
    published cards do not."""
    if not result.cached:
        return ""
    return f'<br><small class="fc-cached">{html.escape(labels.cached)}</small>'


def _row(result: CheckResult, labels: Labels, page_url: Callable[[CheckResult], str]) -> str:
    key = outcome_key(result)
    css = "fc-ok" if result.outcome_ok else "fc-bad"
    href = _attr(page_url(result))
    rank = _RANK.get(key, len(_RANK)) + (0 if not result.outcome_ok else len(_RANK) + 1)
    where = f"{result.location.path} {result.location.line:09d}"
    cells = [
        f'<td class="fc-status-cell fc-status-{status_class(result)}" '
        f'data-label="{_attr(labels.status)}" data-fc-outcome="{key}" '
        f'data-fc-failing="{int(not result.outcome_ok)}" data-fc-key="{rank:02d}">'
        f"{html.escape(labels.outcome(key))}</td>",
        f'<td data-label="{_attr(labels.block)}" data-fc-key="{_attr(result.block_id)}">'
        f'<a href="{href}"><code>{html.escape(result.block_id)}</code></a></td>',
        f'<td class="fc-report-where" data-label="{_attr(labels.page)}" '
        f'data-fc-key="{_attr(where)}">'
        f'<a href="{href}">{html.escape(str(result.location))}</a></td>',
        f'<td data-label="{_attr(labels.oracle)}" data-fc-key="{_attr(result.oracle)}">'
        f"<code>{html.escape(result.oracle)}</code></td>",
        _error_cell(result, labels),
        f'<td class="fc-num" data-label="{_attr(labels.median_time)}" '
        f'data-fc-key="{_sort_key(_median_seconds(result))}">'
        f"{html.escape(_median_time(result))}{_cached(result, labels)}</td>",
    ]
    # Newlines inside a cell would split the raw HTML block; inside <pre> the entity still
    # starts a new line.
    return f'<tr class="{css}">' + "".join(cells).replace("\n", "&#10;") + "</tr>"


def _summary(results: Sequence[CheckResult], labels: Labels) -> str:
    tallies = [
        labels.tally.format(count=count, name=labels.outcome(key))
        for key, count in _counts(results).items()
    ]
    text = labels.summary.format(count=len(results))
    if tallies:
        text += labels.colon + labels.separator.join(tallies)
    unchecked = sum(result.formula_unchecked for result in results)
    if unchecked:  # verified on their code alone, or failed for it: never silently green
        said = labels.report_unchecked_one if unchecked == 1 else labels.report_unchecked
        text += "; " + said.format(count=unchecked)
    return f'<p class="fc-summary">{html.escape(text)}</p>'


def _controls(results: Sequence[CheckResult], labels: Labels) -> str:
    """The status filter (each choice with its count) and the search box. Hidden until the
    report's script shows them: without it they would do nothing."""
    failing = sum(not result.outcome_ok for result in results)
    choices = [("", labels.report_all.format(count=len(results)))]
    if failing:
        choices.append(("failing", labels.report_failing.format(count=failing)))
    choices += [
        (key, labels.report_option.format(name=labels.outcome(key), count=count))
        for key, count in sorted(_counts(results).items(), key=lambda item: _RANK[item[0]])
    ]
    options = "".join(
        f'<option value="{value}">{html.escape(text)}</option>' for value, text in choices
    )
    return (
        '<div class="fc-report-controls" hidden>'
        f'<label class="fc-report-filter"><span>{html.escape(labels.report_show)}</span> '
        f"<select data-fc-filter>{options}</select></label>"
        f'<label class="fc-report-search"><span>{html.escape(labels.report_search)}</span> '
        f'<input type="search" data-fc-search autocomplete="off" '
        f'placeholder="{_attr(labels.report_search_hint)}"></label>'
        '<span class="fc-report-shown" data-fc-count aria-live="polite"></span>'
        "</div>"
    )


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
    """The counts, a filter and a search box, and one table row per block, failures first,
    as HTML (``formula-check-report.js`` makes the filter, the search and the column
    headers work; without it the table reads as it is).

    ``page_url`` gives the link to a block (e.g. ``attention/#fc-sdpa``). The table is raw
    HTML with every value escaped, so no page path or message can inject Markdown or markup.
    """
    headings = (
        ("status", labels.status),
        ("block", labels.block),
        ("page", labels.page),
        ("oracle", labels.oracle),
        ("detail", labels.report_detail),
        ("time", labels.median_time),
    )
    header = "".join(
        f'<th data-fc-column="{name}">{html.escape(text)}</th>' for name, text in headings
    )
    rows = [_row(result, labels, page_url) for result in _failures_first(results)]
    page = [
        f'<div class="fc-report fc-report-page" data-fc-report '
        f'data-fc-shown="{_attr(labels.report_shown)}">',
        _controls(results, labels),
        '<div class="fc-scroll"><table class="fc-report-table">',
        f"<thead><tr>{header}</tr></thead>",
        "<tbody>",
        *rows,
        "</tbody></table></div>",
        f'<p class="fc-report-empty" data-fc-empty hidden>{html.escape(labels.report_no_match)}'
        "</p>",
        "</div>",
    ]
    return for_sink(_summary(results, labels) + "\n\n" + "\n".join(page) + "\n", Sink.MARKUP)
