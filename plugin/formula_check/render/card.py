"""One check result -> the HTML card shown under its formula.

The card is a Material admonition (so it inherits the theme's look) that also carries its own
``fc-*`` classes, styled by ``assets/formula-check.css`` for sites without Material. Every
piece of text that came from a user, a snippet or TensorFlow is escaped here, once.
"""

from __future__ import annotations

import html
import math
from collections.abc import Callable, Collection, Iterable

from formula_check.model import Status, strip_ansi
from formula_check.render.figure import Figure, figures_for
from formula_check.render.labels import OUTCOME_KEYS, Labels, outcome_key
from formula_check.render.picture import SMALLEST_TEXT
from formula_check.results import (
    CheckResult,
    Environment,
    FormulaVerdict,
    ShapeInfo,
    TimingStats,
    Verdict,
    brief_message,
    format_seconds,
)
from formula_check.sinks import Sink, for_sink

ImageUrl = Callable[[Figure], str]
"""Stores a figure somewhere the page can reach and returns its URL (relative to the page)."""


# Material admonition types whose colours match each outcome.
_ADMONITION = {
    "verified": "success",
    "mismatch": "failure",
    "error": "danger",
    "timeout": "warning",
    "skipped": "quote",
    "expected_failure": "quote",
    "unexpected_pass": "failure",
}
_CSS_STATUS = {"expected_failure": "xfail", "unexpected_pass": "xpass"}
_ROLES = ("input", "weight", "output")


READABLE_PX = 10.0
"""The smallest text a figure may be drawn at on a page, in CSS pixels."""

ARTIFACT_ROUNDING = ("+ int8 quantization", "+ float16 outputs")
"""How the worker's account of an artifact's own rounding begins, in a tolerance's text: a
column that said "float32 rounding" alone would hide the larger part of such a tolerance."""


def _esc(text: str) -> str:
    # Newlines become character references: the rendered text (in <pre> too) is unchanged, and
    # the card can never contain a blank line, which would end a raw HTML block in Markdown.
    return html.escape(strip_ansi(text), quote=True).replace("\r\n", "\n").replace("\n", "&#10;")


def status_class(result: CheckResult) -> str:
    """The ``fc-status-*`` suffix of a result: a status, ``xfail`` or ``xpass``."""
    key = outcome_key(result)
    return _CSS_STATUS.get(key, key)


def render_card(
    result: CheckResult,
    *,
    labels: Labels,
    image_url: ImageUrl,
    heatmaps: tuple[str, ...] | None = None,
    sweep_dim: str = "n",
    make_figures: Callable[..., list[Figure]] = figures_for,
    timeout: float | None = None,
    code: str | None = None,
    open_sections: Collection[str] = (),
    served: bool = False,
) -> str:
    """The HTML fragment for one result: badge, errors, figures, shapes, timings, output.

    ``make_figures`` has :func:`figures_for`'s signature; a caller may pass a caching one.
    ``timeout``: the block's, said in the card's language when it ran out. ``code``: which
    code was checked, when it is not the fence under the formula (``pkg.mod:Name``).
    ``open_sections``: of :data:`~formula_check.model.CARD_SECTIONS`, those drawn open.
    ``served``: the card is the author's preview (``mkdocs serve``), where "cached" says the
    check did not run again; a published page's reader cannot act on that, and never sees it.
    """
    figures = make_figures(result, heatmaps, labels, sweep_dim=sweep_dim)
    by_name = {figure.name: figure for figure in figures}
    values = [f for f in figures if f.name not in {"delta", "sweep"}]
    key = outcome_key(result)
    sections = [
        _title(result, key, labels, code, cached=served and result.cached),
        _message(result, labels, timeout),
        _verdicts(result.verdicts, labels),
        _formula(result.formula, labels),
        _failure(result, labels),
        _figure_section(
            "fc-delta", labels.where_they_differ, _only(by_name, "delta"), image_url, is_open=True
        ),
        _notes(result.notes),
        _figure_section(
            "fc-figures", labels.figures, values, image_url, is_open="heatmaps" in open_sections
        ),
        _figure_section(
            "fc-scaling",
            labels.scaling,
            _only(by_name, "sweep"),
            image_url,
            is_open="scaling" in open_sections,
        ),
        _opened(_shapes(result.shapes, labels), "shapes" in open_sections),
        _opened(_timings(result.timings, result.environment, labels), "timings" in open_sections),
        _opened(_stdout(result.stdout, labels), "printed" in open_sections),
    ]
    # data-search-exclude: Material's search skips the card (verdicts and timings are noise
    # there, and a card filled in after the page was indexed must not make builds differ).
    opening = (
        f'<div class="admonition {_ADMONITION[key]} fc-card fc-status-{status_class(result)}" '
        f'id="fc-{_esc(result.block_id)}" data-fc-status="{key}" data-search-exclude>'
    )
    card = "\n".join([opening, *(s for s in sections if s), "</div>"]) + "\n"
    return for_sink(card, Sink.MARKUP)  # a snippet's text may hold what no page can


def _opened(section: str, is_open: bool) -> str:
    """A collapsed ``<details>`` section drawn open instead."""
    if not is_open or not section.startswith("<details "):
        return section
    head, _, rest = section.partition(">")
    return f"{head} open>{rest}"


def _only(by_name: dict[str, Figure], name: str) -> list[Figure]:
    return [by_name[name]] if name in by_name else []


def _expected_text(expect: str, labels: Labels) -> str:
    word = labels.outcome(expect) if expect in OUTCOME_KEYS else labels.any_failure
    return labels.expected_other.format(expect=word)


def _title(
    result: CheckResult, key: str, labels: Labels, code: str | None = None, *, cached: bool = False
) -> str:
    parts = [f'<span class="fc-badge">{_esc(labels.outcome(key))}</span>']
    if key == "expected_failure":
        underlying = labels.outcome(result.status.value)
        parts.append(f'<span class="fc-underlying">({_esc(underlying)})</span>')
    elif result.expected_failure and key != "unexpected_pass":
        parts.append(
            f'<span class="fc-expected">{_esc(_expected_text(result.expect, labels))}</span>'
        )
    parts.append(f'<code class="fc-oracle">{_esc(result.oracle)}</code>')
    parts.append(f'<span class="fc-where">{_esc(str(result.location))}</span>')
    if code:
        parts.append(
            f'<span class="fc-code">{_esc(labels.checked_code)} <code>{_esc(code)}</code></span>'
        )
    if cached:
        parts.append(f'<span class="fc-cached">{_esc(labels.cached)}</span>')
    return f'<p class="admonition-title fc-title">{" ".join(parts)}</p>'


def _message(result: CheckResult, labels: Labels, timeout: float | None) -> str:
    message = result.message
    if result.status is Status.TIMEOUT and timeout is not None:
        message = labels.timed_out.format(seconds=f"{timeout:g}")
    if not message:
        return ""
    return f'<p class="fc-message">{_esc(message)}</p>'


def _formula(formula: FormulaVerdict | None, labels: Labels) -> str:
    """The third side: the LaTeX as written against the oracle."""
    if formula is None:
        return ""
    title = {
        "agrees": labels.formula_agrees,
        "differs": labels.formula_differs,
        "invalid": labels.formula_invalid,
        "not_executable": labels.formula_not_executable,
    }[formula.state]
    css = "fc-bad" if formula.failed else "fc-ok" if formula.state == "agrees" else "fc-note"
    parts = [f"<strong>{_esc(title)}</strong>"]
    if formula.state in {"agrees", "differs"}:
        parts.append(f" max |Δ| = {formula.max_abs:.2g}")
    if formula.compiled:
        parts.append(
            f"<br>{_esc(labels.formula_compiled)}{_esc(labels.colon)}<code>{_esc(formula.compiled)}</code>"
        )
    if formula.unchecked and formula.required:  # why "not checked" fails this block
        parts.append(f"<br>{_esc(labels.formula_required)}")
    body = "".join(parts)
    if formula.message and formula.state != "agrees":
        body += f"<pre><code>{_esc(strip_ansi(formula.message))}</code></pre>"
    return f'<div class="fc-formula {css}">{body}</div>'


def _columns(labels: Labels) -> tuple[str, ...]:
    return (
        labels.output_column,
        labels.max_abs_column,
        labels.tolerance_column,
        labels.worst_column,
        labels.bad_column,
    )


def _verdicts(verdicts: Iterable[Verdict], labels: Labels) -> str:
    rows = [_verdict_row(verdict, labels) for verdict in verdicts]
    if not rows:
        return ""
    header = "".join(f"<th>{_esc(text)}</th>" for text in _columns(labels))
    return (
        f'<div class="fc-scroll"><table class="fc-verdicts" aria-label="{_esc(labels.compared)}">\n'
        f"<thead><tr>{header}</tr></thead>\n<tbody>\n"
        + "\n".join(rows)
        + "\n</tbody></table></div>"
    )


def _verdict_row(verdict: Verdict, labels: Labels) -> str:
    # Each cell carries its column's name: in a card too narrow for five columns the rows
    # stack, one output to a block, and each value is shown beside its name (the CSS).
    column = [f' data-label="{_esc(text)}"' for text in _columns(labels)]
    css = "fc-ok" if verdict.ok else "fc-bad"
    regime = f"<br><small>{_esc(verdict.regime)}</small>" if verdict.regime else ""
    name = f'<td class="fc-output"{column[0]}><code>{_esc(verdict.name)}</code>{regime}</td>'
    if verdict.problem:
        return f'<tr class="{css}">{name}<td colspan="4">{_esc(verdict.problem)}</td></tr>'
    if verdict.ok:
        worst = _esc(labels.ok_mark)
    else:
        index = ", ".join(str(i) for i in verdict.worst_index)
        got = labels.expected_got.format(
            expected=f"{verdict.worst_expected:.6g}", actual=f"{verdict.worst_actual:.6g}"
        )
        worst = f"({_esc(index)})<br><small>{_esc(got)}</small>"
    bad = f"{verdict.n_bad} / {verdict.n_total}"
    if verdict.nonfinite:
        bad += f"<br><small>{_esc(labels.nonfinite.format(count=verdict.nonfinite))}</small>"
    tolerance = f"{verdict.atol:.1g}"
    if verdict.tolerance.startswith("derived"):  # each element its own: the largest is shown
        own = any(mark in verdict.tolerance for mark in ARTIFACT_ROUNDING)
        label = labels.artifact_tolerance if own else labels.derived_tolerance
        tolerance = _esc(label.format(largest=f"{verdict.atol:.1g}"))
    if verdict.ok and verdict.tolerance:
        share = f"{verdict.used:.0%}"
        used = labels.share_used.format(share=f"≤ {share}" if share != verdict.share() else share)
        tolerance += f"<br><small>{_esc(used)}</small>"
    if verdict.rtol:  # an element passes within atol + rtol × |expected|
        relative = labels.relative_part.format(rtol=f"{verdict.rtol:.1g}")
        tolerance += f"<br><small>{_esc(relative)}</small>"
    largest = f"{verdict.max_abs:.2g}"
    if not verdict.ok and verdict.max_index and verdict.max_index != verdict.worst_index:
        index = f"({', '.join(str(i) for i in verdict.max_index)})"  # the worst is in its column
        largest += f"<br><small>{_esc(labels.largest_at.format(index=index))}</small>"
    return (
        f'<tr class="{css}">{name}<td class="fc-num"{column[1]}>{largest}</td>'
        f'<td class="fc-num"{column[2]}>{tolerance}</td><td{column[3]}>{worst}</td>'
        f'<td class="fc-num"{column[4]}>{bad}</td></tr>'
    )


def _failure(result: CheckResult, labels: Labels) -> str:
    failure = result.failure
    if failure is None:
        return ""
    where = (
        f' <span class="fc-where">{_esc(str(failure.location))}</span>' if failure.location else ""
    )
    brief = brief_message(failure.message)
    lines = [
        '<div class="fc-error">',
        f'<p class="fc-error-title"><strong>{_esc(labels.error_heading)}</strong> '
        f"<code>{_esc(failure.type)}</code>{where}</p>",
        f'<pre class="fc-error-message"><code>{_esc(brief)}</code></pre>',
    ]
    if brief != failure.message.strip():  # TensorFlow's or Keras' wrapping was cut
        whole = f"<pre><code>{_esc(failure.message)}</code></pre>"
        lines.append(_details("fc-full-message", labels.full_message, [whole]))
    if failure.traceback:
        trace = f"<pre><code>{_esc(failure.traceback)}</code></pre>"
        lines.append(_details("fc-traceback", labels.traceback, [trace]))
    lines.append("</div>")
    return "\n".join(lines)


def _figure_html(figure: Figure, image_url: ImageUrl) -> str:
    # A figure shrinks with the page only as far as its smallest text stays readable; on a
    # narrower page it keeps that width and its box scrolls (the CSS marks the edge).
    narrowest = math.ceil(figure.width * READABLE_PX / SMALLEST_TEXT)
    return (
        f'<figure class="fc-figure"><img src="{html.escape(image_url(figure), quote=True)}" '
        f'alt="{_esc(figure.alt)}" width="{figure.width}" height="{figure.height}" '
        f'style="min-width: {min(narrowest, figure.width)}px" '
        f'loading="lazy"><figcaption>{_esc(figure.title)}</figcaption></figure>'
    )


def _details(css: str, heading: str, parts: Iterable[str], *, is_open: bool = False) -> str:
    """A collapsible section; never a blank line inside, which would end a Markdown HTML block."""
    body = "\n".join(part for part in parts if part)
    opened = " open" if is_open else ""
    return (
        f'<details class="fc-section {css}"{opened}><summary>{_esc(heading)}</summary>\n'
        f"{body}\n</details>"
    )


def _figure_section(
    css: str, heading: str, figures: list[Figure], image_url: ImageUrl, *, is_open: bool = False
) -> str:
    if not figures:
        return ""
    body = [_figure_html(figure, image_url) for figure in figures]
    return _details(css, heading, body, is_open=is_open)


def _notes(notes: tuple[str, ...]) -> str:
    if not notes:
        return ""
    items = "".join(f"<li>{_esc(note)}</li>" for note in notes)
    return f'<ul class="fc-notes">{items}</ul>'


def _shapes(shapes: tuple[ShapeInfo, ...], labels: Labels) -> str:
    headings = {"input": labels.inputs, "weight": labels.weights, "output": labels.outputs}
    rows = []
    for role in _ROLES:
        members = [shape for shape in shapes if shape.role == role]
        if members:
            cells = " ".join(f"<code>{_esc(shape.describe())}</code>" for shape in members)
            rows.append(f'<tr><th scope="row">{_esc(headings[role])}</th><td>{cells}</td></tr>')
    if not rows:
        return ""
    table = '<div class="fc-scroll"><table class="fc-shape-table">\n' + "\n".join(rows)
    return _details("fc-shapes", labels.shapes, [table + "\n</table></div>"])


def _timing_row(timing: TimingStats, labels: Labels) -> str:
    extra = [labels.repeats.format(count=timing.repeats)]
    if timing.first > 0:
        extra.append(labels.first_call.format(time=format_seconds(timing.first)))
    return (
        f'<tr><th scope="row">{_esc(labels.timing_name(timing.label))}</th>'
        f'<td class="fc-num">{_esc(timing.describe())}</td>'
        f"<td>{_esc(labels.separator.join(extra))}</td></tr>"
    )


def _environment(environment: Environment, labels: Labels) -> str:
    parts = []
    if environment.tf_version:
        parts.append(f"TensorFlow {environment.tf_version}")
    if environment.keras_version:
        parts.append(f"Keras {environment.keras_version}")
    if environment.device:
        parts.append(f"{labels.device} {environment.device}")
    if environment.threads:
        parts.append(labels.threads.format(count=environment.threads))
    if not parts:
        return ""
    return f'<p class="fc-env">{_esc(labels.environment + labels.colon + " · ".join(parts))}</p>'


def _timings(timings: tuple[TimingStats, ...], environment: Environment, labels: Labels) -> str:
    env = _environment(environment, labels)
    if not timings and not env:
        return ""
    table = ""
    if timings:
        rows = "\n".join(_timing_row(timing, labels) for timing in timings)
        table = f'<div class="fc-scroll"><table class="fc-timing-table">\n{rows}\n</table></div>'
    return _details("fc-timings", labels.timings, [table, env])


def _stdout(stdout: str, labels: Labels) -> str:
    if not stdout:
        return ""
    return _details("fc-stdout", labels.printed_output, [f"<pre><code>{_esc(stdout)}</code></pre>"])
