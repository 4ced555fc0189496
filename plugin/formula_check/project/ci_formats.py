"""Results -> what CI reads: a terminal card, JUnit XML, GitHub annotations. Pure functions."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

from formula_check.model import Location
from formula_check.pages.notebooks import cell_source
from formula_check.render import strip_ansi
from formula_check.render.labels import ENGLISH
from formula_check.results import CheckResult, FormulaVerdict, Verdict, brief_message, regime_words
from formula_check.sinks import Sink, for_sink, no_workflow_commands

_FLOAT32_TINY = 1.1754944e-38
"""float32's smallest normal number: an expected value below it is zero to float32 code."""

FailurePredicate = Callable[[CheckResult], bool]


def verdict_lines(verdict: Verdict) -> list[str]:
    """A verdict's numbers, one fact per line (the card's table, as text)."""
    dims = f" ({', '.join(verdict.dims)})" if verdict.dims else ""
    regime = f" {regime_words(verdict.regime)}" if verdict.regime else ""
    lines = [f"{'ok  ' if verdict.ok else 'FAIL'} {verdict.name}{dims}{regime}"]
    if verdict.problem:
        return [*lines, f"     {verdict.problem}"]
    where = ", ".join(str(i) for i in verdict.worst_index)
    largest = ", ".join(str(i) for i in verdict.max_index)
    at = f" at ({largest})" if verdict.max_index else ""
    tolerance = verdict.tolerance or f"atol {verdict.atol:.1g}, rtol {verdict.rtol:.1g}"
    lines += [
        f"     max |Δ| = {verdict.max_abs:.3g}{at}  max rel = {relative_error(verdict)}",
        f"     tolerance: {tolerance}; {_share(verdict)}",
        f"     worst against its tolerance at ({where}): expected {verdict.worst_expected:.6g}, "
        f"got {verdict.worst_actual:.6g}, tolerance there {verdict.worst_allowed:.2g}",
        f"     {verdict.n_bad} of {verdict.n_total} elements out of tolerance",
    ]
    if verdict.hint:
        lines.append(f"     {verdict.hint}")
    if verdict.nonfinite:
        lines.append(f"     {verdict.nonfinite} non-finite values")
    return lines


def _share(verdict: Verdict) -> str:
    """How much of its tolerance the code used: a share when within, a multiple when not."""
    if verdict.used <= 1:
        return f"{verdict.used:.0%} of it used at most"
    return f"up to {verdict.used:.3g} times it"


def relative_error(verdict: Verdict) -> str:
    """``max rel`` as a number, or ``n/a (expected 0)`` where the largest relative error
    divides by an expected value float32 cannot tell from zero: a quotient of 1e+307 says
    nothing about the code. (Only then can it exceed ``max |Δ|`` / float32's smallest normal:
    each element's quotient is its |Δ| over its |expected|.)"""
    if verdict.max_rel * _FLOAT32_TINY > verdict.max_abs:
        return "n/a (expected 0)"
    return f"{verdict.max_rel:.3g}"


_FORMULA_TITLES = {
    "agrees": ENGLISH.formula_agrees,
    "differs": ENGLISH.formula_differs,
    "invalid": ENGLISH.formula_invalid,
    "not_executable": ENGLISH.formula_not_executable,
}


def formula_lines(formula: FormulaVerdict) -> list[str]:
    """The formula as written against the oracle, whole, as the card says it: the verdict,
    max |Δ|, the compiled form and the message, each line of them (a ``where head_i = ...``
    of the compiled form, the caret under a LaTeX error)."""
    title = _FORMULA_TITLES[formula.state]
    if formula.state in {"agrees", "differs"}:
        title += f"  max |Δ| = {formula.max_abs:.2g}"
    lines = [title]
    if formula.compiled:
        first, *rest = formula.compiled.splitlines()
        lead = f"{ENGLISH.formula_compiled}: "
        lines += [lead + first, *(" " * len(lead) + line for line in rest)]
    if formula.message and formula.state != "agrees":
        lines += strip_ansi(formula.message).splitlines()
    return lines


def _not_executable(result: CheckResult) -> FormulaVerdict | None:
    """The formula verdict of a block that passed without its formula checked; one that
    failed for it (``formula="required"``) says so in its headline."""
    formula = result.formula
    return formula if formula is not None and formula.unchecked and not formula.failed else None


def _first_line(text: str) -> str:
    return next(iter(strip_ansi(text).splitlines()), "")


def formula_note(result: CheckResult) -> str | None:
    """``docs/x.md:12 [id]: formula not checked: why``, for a block whose formula could not
    be compiled: no headline says it, since it fails nothing, but every face must (the code
    was compared with the oracle, not the formula)."""
    formula = _not_executable(result)
    if formula is None:
        return None
    return for_sink(f"{result.location} [{result.block_id}]: {formula.summary()}", Sink.LINE)


def formula_notes(results: Iterable[CheckResult]) -> list[str]:
    """The closing lines of a run: each block whose formula was not checked, and why."""
    found = [(result, _not_executable(result)) for result in results]
    reasons = [
        f"  {result.location} [{result.block_id}]: {_first_line(formula.message)}"
        for result, formula in found
        if formula is not None
    ]
    if not reasons:
        return []
    title = f"formulas not checked, only their code compared with the oracle ({len(reasons)}):"
    return [title, *(for_sink(reason, Sink.LINE) for reason in reasons)]


def source_line(root: Path, where: Location) -> str | None:
    """The text of ``where`` in its file (a snippet error points into the page or a file, or
    into a notebook's cell)."""
    try:
        if where.cell is not None:
            text = cell_source((root / where.file).read_bytes(), where.file, where.cell) or ""
        else:
            text = (root / where.path).read_text(encoding="utf-8-sig")
    except (OSError, ValueError):  # no such file, not UTF-8, or no name a system has
        return None
    lines = text.splitlines()
    return lines[where.line - 1] if 0 < where.line <= len(lines) else None


def failure_lines(result: CheckResult, root: Path) -> list[str]:
    """The snippet's exception, with the line of code it came from."""
    failure = result.failure
    if failure is None:
        return [result.message] if result.message else []
    where = f" at {failure.location}" if failure.location else ""
    lines = [f"{failure.type}{where}: {strip_ansi(failure.message)}"]
    code = source_line(root, failure.location) if failure.location else None
    if failure.location is not None and code is not None:
        lines.append(f"  {failure.location.line:>5} | {code}")
    return lines


def _section(title: str, lines: Sequence[str]) -> list[str]:
    return [f"{title}:", *(f"  {line}" for line in lines)] if lines else []


def text_card(result: CheckResult, root: Path) -> str:
    """Everything one check found, for a terminal (see :data:`~..sinks.Sink.LINE`)."""
    cached = " (cached)" if result.cached else ""
    lines = [result.headline(), f"oracle {result.oracle}, status {result.status.value}{cached}"]
    if result.expected_failure:
        lines.append(
            f"expected: {result.expect} -> {'as promised' if result.outcome_ok else 'NOT'}"
        )
    lines += _section("verdicts", [line for v in result.verdicts for line in verdict_lines(v)])
    if result.formula is not None:
        lines += _section("formula", formula_lines(result.formula))
    shapes = [f"{shape.role:<6} {shape.describe()}" for shape in result.shapes]
    lines += _section("shapes", shapes)
    timings = [f"{t.label:<12} {t.describe()}  ({t.repeats} runs)" for t in result.timings]
    lines += _section("timings", timings)
    env = result.environment
    if env.tf_version:
        lines.append(f"environment: TensorFlow {env.tf_version} on {env.device or '?'}")
    if result.status.value in {"error", "timeout"}:
        lines += _section(result.status.value, failure_lines(result, root))
    lines += _section("notes", list(result.notes))
    lines += _section("stdout", strip_ansi(result.stdout).splitlines())
    return for_sink("\n".join(lines), Sink.LINE)


def _formula_section(result: CheckResult) -> list[str]:
    """The formula, whole, where a one-line headline cannot say all of it: one that fails the
    block or could not be compiled (a formula that agrees is not news in a failure)."""
    formula = result.formula
    if formula is None or formula.state == "agrees":
        return []
    return _section("formula", formula_lines(formula))


def failure_report(result: CheckResult, root: Path) -> str:
    """What a failed test shows: the headline, then the numbers or the error behind it, and
    the formula when it is part of the story (see :data:`~..sinks.Sink.LINE`)."""
    lines = [strip_ansi(result.headline())]
    lines += [line for verdict in result.verdicts for line in verdict_lines(verdict)]
    lines += _formula_section(result)
    if not result.verdicts:  # the headline says the exception, in brief: whole if it differs
        failing = failure_lines(result, root)
        failure = result.failure
        whole = failure is not None and brief_message(failure.message) != failure.message
        lines += failing if whole else failing[1:]
    return for_sink("\n".join(lines), Sink.LINE)


def junit_xml(
    results: Iterable[CheckResult],
    is_failure: FailurePredicate,
    properties: Sequence[tuple[str, str]] = (),
) -> bytes:
    """One ``<testcase>`` per block: classname = page (a notebook: its file), name = id;
    expected failures skipped. A block in a notebook's cell has no ``line``: a cell's line is
    not a line of the file (its headline names the cell and the line). ``properties`` are
    the suite's (a shard's ``shard``: ``2/4``). Any text is well-formed XML: a character
    XML has no place for is shown by a stand-in (see :data:`~..sinks.Sink.MARKUP`)."""
    suite = ET.Element("testsuite", name="formula-check")
    if properties:
        listed = ET.SubElement(suite, "properties")
        for name, text in properties:
            ET.SubElement(listed, "property", name=name, value=text)
    counts = {"tests": 0, "failures": 0, "skipped": 0}
    total_time = 0.0
    for result in results:
        where = result.location
        attributes = {"classname": where.file, "name": result.block_id, "file": where.file}
        if where.cell is None:
            attributes["line"] = str(where.line)
        attributes["time"] = f"{result.elapsed:.3f}"
        case = ET.SubElement(suite, "testcase", attributes)
        counts["tests"] += 1
        total_time += result.elapsed
        headline = strip_ansi(result.headline())
        if is_failure(result):
            counts["failures"] += 1
            failure = ET.SubElement(case, "failure", message=headline, type=result.status.value)
            failure.text = "\n".join([strip_ansi(result.detail()), *_formula_section(result)])
        elif not result.outcome_ok or result.expected_failure:
            counts["skipped"] += 1
            ET.SubElement(case, "skipped", message=headline)
    for key, value in counts.items():
        suite.set(key, str(value))
    suite.set("errors", "0")
    suite.set("time", f"{total_time:.3f}")
    # ElementTree escapes markup but writes every other character as it is: the stand-ins
    # go over the whole document, which holds no control character of its own.
    document = ET.tostring(suite, encoding="unicode")
    declaration = "<?xml version='1.0' encoding='utf-8'?>\n"
    return (declaration + for_sink(document, Sink.MARKUP)).encode("utf-8")


def _escape_data(text: str) -> str:
    # GitHub's workflow-command rules: these three would end or corrupt the command.
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _escape_property(text: str) -> str:
    return _escape_data(text).replace(":", "%3A").replace(",", "%2C")


def github_annotation(result: CheckResult, *, failing: bool) -> str:
    """``::error file=docs/x.md,line=12,title=formula-check [id]::message``; a notebook's
    block is annotated on the notebook, without a line (a cell's line is not the file's: the
    message names both)."""
    level = "error" if failing else "warning"
    where = result.location
    place = [("file", where.file)]
    if where.cell is None:
        place.append(("line", str(where.line)))
    properties = ",".join(
        f"{key}={_escape_property(for_sink(value, Sink.LINE))}"
        for key, value in (*place, ("title", f"formula-check [{result.block_id}]"))
    )
    return f"::{level} {properties}::{_escape_data(for_sink(result.headline(), Sink.LINE))}"


def github_safe(text: str) -> str:
    """``text`` as lines of our own (a summary, in colour or not) may print it, wherever a
    run's output is read: encodable as UTF-8, and with no line a GitHub runner would run as a
    workflow command (:func:`~..sinks.no_workflow_commands`). Text from a snippet or a page
    in it was made a :data:`~..sinks.Sink.LINE` where it was put in."""
    return no_workflow_commands(for_sink(text, Sink.UTF8))


def github_annotations(results: Iterable[CheckResult], is_failure: FailurePredicate) -> list[str]:
    """An error per failing block, a warning per surprise that does not fail the run."""
    return [
        github_annotation(result, failing=is_failure(result))
        for result in results
        if is_failure(result) or not (result.outcome_ok or result.status.value == "skipped")
    ]
