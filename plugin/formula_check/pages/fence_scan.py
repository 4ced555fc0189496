"""Page lines -> fenced blocks -> formula blocks, with true page line numbers.

The scanner follows fences the way SuperFences does (a fence runs to a closing run of the
same character at least as long), so a ```` ```formula ```` shown *inside* a longer
``````markdown`` fence is an example, not a block. Each formula block is paired with the
first ```` ```python ```` fence after it and before the next formula block. Pure text: no
files, no options read.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

_OPENING = re.compile(r"^(?P<indent>[ \t>]*)(?P<fence>`{3,}|~{3,})(?P<info>.*)$")
# One way to match each run of blanks: two optional runs side by side ([ \t]*\{?[ \t]*) took
# time growing with the square of a long run's length before failing.
_FORMULA = re.compile(r"^[ \t]*(?:\{[ \t]*)?\.?formula(?=[\s}]|$)(?P<rest>.*)$")
_PYTHON = re.compile(r"^[ \t]*(?:\{[ \t]*)?\.?(?:python3?|py)(?=[\s}]|$)")


@dataclass(frozen=True)
class Fence:
    """One fenced block: ``row`` is its opening line's index in the scanned lines."""

    row: int
    info: str
    body: str
    closed: bool


@dataclass(frozen=True)
class FormulaFence:
    """A formula block as written: header text, LaTeX and its paired python fence (if any)."""

    row: int
    line: int
    index: int
    header: str
    latex: str
    closed: bool
    snippet: Fence | None


def _closing(fence: str) -> re.Pattern[str]:
    return re.compile(rf"^[ \t>]*{re.escape(fence[0])}{{{len(fence)},}}[ \t]*$")


def _dedent(line: str, indent: str) -> str:
    return line[len(indent) :] if line.startswith(indent) else line.lstrip(" \t>")


_BACKTICKS = re.compile(r"`+")


def _without_code_spans(line: str) -> str:
    """``line`` less its code spans: a run of backticks opens one, closed by the next run of
    as many (one pass over the runs: a pattern with a backreference took time growing with
    the cube of a long run's length)."""
    runs = [(run.start(), run.end()) for run in _BACKTICKS.finditer(line)]
    closer: list[int | None] = [None] * len(runs)
    seen: dict[int, int] = {}
    for index in range(len(runs) - 1, -1, -1):
        size = runs[index][1] - runs[index][0]
        closer[index] = seen.get(size)
        seen[size] = index
    kept, at, index = [], 0, 0
    while index < len(runs):
        closing = closer[index]
        if closing is None:
            index += 1
            continue
        kept.append(line[at : runs[index][0]])
        at = runs[closing][1]
        index = closing + 1
    return "".join([*kept, line[at:]])


def _comment_open_after(line: str, *, was_open: bool) -> bool:
    """Is an HTML comment (``<!-- ... -->``) still open after ``line``? A ``<!--`` in a code
    span opens none; ``<!-->`` and ``<!--->`` are whole comments, as HTML reads them."""
    at = 0
    if was_open:
        end = line.find("-->")
        if end < 0:
            return True
        at = end + 3
    text = _without_code_spans(line[at:])
    at = 0
    while (start := text.find("<!--", at)) >= 0:
        end = text.find("-->", start + 2)
        if end < 0:
            return True
        at = end + 3
    return False


def scan_fences(lines: Sequence[str], commented: list[int] | None = None) -> list[Fence]:
    """Every top-level fenced block of ``lines`` (fences inside fences are content, and so
    are fences inside an HTML comment: the page shows neither, so neither is checked; the
    rows of the lines that open one in a comment are added to ``commented``)."""
    fences: list[Fence] = []
    row = 0
    in_comment = False
    while row < len(lines):
        match = _OPENING.match(lines[row])
        if in_comment and match is not None and commented is not None:
            commented.append(row)
        if in_comment or match is None or (match["fence"][0] == "`" and "`" in match["info"]):
            in_comment = _comment_open_after(lines[row], was_open=in_comment)
            row += 1
            continue
        end = _closing(match["fence"])
        stop = next((r for r in range(row + 1, len(lines)) if end.match(lines[r])), len(lines))
        body = "\n".join(_dedent(line, match["indent"]) for line in lines[row + 1 : stop])
        fences.append(Fence(row, match["info"], body, stop < len(lines)))
        row = stop + 1
    return fences


def commented_formulas(lines: Sequence[str]) -> list[int]:
    """The rows of the formula fences an HTML comment holds: not blocks of the page, though
    SuperFences, which finds fences even there, would render them."""
    commented: list[int] = []
    scan_fences(lines, commented)
    openings = [(row, _OPENING.match(lines[row])) for row in commented]
    return [row for row, found in openings if found and _FORMULA.match(found["info"])]


def find_formulas(lines: Sequence[str], line_offset: int = 0) -> list[FormulaFence]:
    """The formula blocks of a page, each with its page line and its paired python fence."""
    fences = scan_fences(lines)
    found: list[FormulaFence] = []
    for position, fence in enumerate(fences):
        match = _FORMULA.match(fence.info)
        if match is None:
            continue
        snippet = None
        for later in fences[position + 1 :]:
            if _FORMULA.match(later.info):
                break
            if _PYTHON.match(later.info):
                snippet = later
                break
        line = line_offset + fence.row + 1
        header = _header(match["rest"])
        found.append(
            FormulaFence(fence.row, line, len(found) + 1, header, fence.body, fence.closed, snippet)
        )
    return found


def _header(rest: str) -> str:
    """The options after ``formula``, less a closing ``}`` and the blanks after it. Cut here
    rather than by the pattern, whose lazy match took time growing with the square of a long
    line's length."""
    rest = rest.rstrip(" \t")
    return rest[:-1] if rest.endswith("}") else rest
