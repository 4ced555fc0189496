r"""A page as a runnable notebook: its prose and formulas as Markdown cells, each block's
code as a ``%%formula`` cell under the block's own options, so that a reader runs the same
checks in Jupyter.

The page is rewritten as the Markdown that jupytext reads as a notebook, and jupytext and
nbformat make and write the notebook:

- the first cell loads the magic (``%load_ext formula_check``);
- a formula block becomes its display math (``$$ … $$``), in the Markdown around it;
- the code a block checks becomes a code cell: ``%%formula`` and the block's header (the
  page's front-matter defaults, then the block's own options, then ``latex="…"``) over the
  inline snippet, or a ``%formula`` line for a block whose code lives elsewhere
  (``code="…"``; run the notebook from the project's root, as the site is built);
- every other fence stays in the Markdown as it was shown: no code runs that the page did not
  check.

The notebook is the same bytes for the same page: cell ids are numbered, not random, and no
version or time is written into it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from .fences import page_defaults, parse_header
from .model import Location
from .pages import Fence, FormulaFence, find_formulas, scan_fences

LOAD = "%load_ext formula_check"
_BACKSLASHES = re.compile(r"\\{2,}")
_MARKER = re.compile(r"^[ \t>]*(`{3,}|~{3,})")
_KERNEL = {"display_name": "Python 3", "language": "python", "name": "python3"}


def notebook_name(page: str) -> str:
    """``guide/attention.md`` -> ``attention.ipynb``: the notebook's file name, next to the
    page's HTML."""
    stem = page.replace("\\", "/").rsplit("/", 1)[-1].rsplit(".", 1)[0]
    return f"{stem or 'page'}.ipynb"


def page_notebook(markdown: str, *, page: str, meta: Mapping[str, Any] | None = None) -> str:
    """The notebook of a page (its Markdown without front matter, and the front matter's
    values), as the text of an ``.ipynb`` file."""
    import jupytext
    import nbformat

    lines = markdown.splitlines()
    defaults = page_defaults(meta, Location(page, 1))
    text = "\n".join([_fence(LOAD, "python"), "", *_rewritten(lines, defaults, page)])
    notebook = jupytext.reads(text, fmt="md")
    notebook.metadata = nbformat.from_dict(  # type: ignore[no-untyped-call]
        {"kernelspec": _KERNEL, "language_info": {"name": "python"}}
    )
    for index, cell in enumerate(notebook.cells):
        cell.id = f"cell-{index + 1}"
        cell.metadata = nbformat.from_dict({})  # type: ignore[no-untyped-call]
        if cell.cell_type == "code":
            cell.outputs, cell.execution_count = [], None
    nbformat.validate(notebook)
    written: str = nbformat.writes(notebook, version=4)  # type: ignore[no-untyped-call]
    return written if written.endswith("\n") else written + "\n"


def _rewritten(lines: Sequence[str], defaults: Mapping[str, str], page: str) -> list[str]:
    """The page's lines with each formula as display math and each checked snippet as a
    ``%%formula`` cell; every other fence made one that jupytext leaves in the Markdown."""
    formulas = {formula.row: formula for formula in find_formulas(lines)}
    fences = scan_fences(lines)
    ends = _fence_ends(lines, fences)
    checked = {
        f.snippet.row: f
        for f in formulas.values()
        if f.snippet and not _elsewhere(f, defaults, page)
    }
    out: list[str] = []
    row = 0
    for fence in fences:
        out += lines[row : fence.row]
        row = ends[fence.row]
        formula = formulas.get(fence.row)
        if formula is not None:
            out += ["$$", *formula.latex.strip("\n").splitlines(), "$$"]
            if _elsewhere(formula, defaults, page) or formula.snippet is None:
                out += ["", _fence(_magic("%formula", formula, defaults, page), "python")]
        elif fence.row in checked:
            magic = _magic("%%formula", checked[fence.row], defaults, page)
            out.append(_fence(f"{magic}\n{fence.body.rstrip()}", "python"))
        else:
            out += _shown(lines[fence.row : row])
    out += lines[row:]
    return out


def _fence_ends(lines: Sequence[str], fences: Sequence[Fence]) -> dict[int, int]:
    """Each fence's first row after its closing line (the page's end, if never closed)."""
    ends = {}
    for fence in fences:
        marker = _MARKER.match(lines[fence.row])
        run = marker[1] if marker else "```"
        closing = re.compile(rf"^[ \t>]*{re.escape(run[0])}{{{len(run)},}}[ \t]*$")
        rows = range(fence.row + 1, len(lines))
        stop = next((r for r in rows if closing.match(lines[r])), len(lines) - 1)
        ends[fence.row] = stop + 1
    return ends


def _elsewhere(formula: FormulaFence, defaults: Mapping[str, str], page: str) -> bool:
    """Whether the block's code lives elsewhere (``code="…"``, its own or the page's)."""
    own = parse_header(formula.header, Location(page, formula.line))
    return "code" in {**defaults, **own}


def _magic(sign: str, formula: FormulaFence, defaults: Mapping[str, str], page: str) -> str:
    """``%%formula`` and the block's options: the page's, then its own, then its LaTeX."""
    own = parse_header(formula.header, Location(page, formula.line))
    options = {**defaults, **own}
    words = [sign, *(_option(key, value) for key, value in options.items())]
    latex = " ".join(formula.latex.split())
    if latex and options.get("formula", "on") not in ("off", "false"):
        # the magic reads every pair of backslashes in latex="…" as one: double each run
        # of two or more, so that \frac stays \frac and a row break \\ comes back as \\
        words.append(_option("latex", _BACKSLASHES.sub(lambda m: m[0] * 2, latex)))
    return " ".join(words)


def _option(key: str, value: str) -> str:
    """``key="value"``, or single-quoted when the value holds a double quote."""
    return f"{key}='{value}'" if '"' in value else f'{key}="{value}"'


def _fence(body: str, info: str) -> str:
    """A fence around ``body`` with enough backticks for what it holds."""
    longest = max((len(run) for run in re.findall(r"`{3,}", body)), default=2)
    ticks = "`" * (longest + 1)
    return f"{ticks}{info}\n{body}\n{ticks}"


def _shown(fence_lines: Sequence[str]) -> list[str]:
    """A fence shown on the page and left in the notebook's Markdown: a ``python`` fence is
    relabelled ``py`` (jupytext makes a code cell of ``python``), so it stays text."""
    first = fence_lines[0]
    relabelled = re.sub(r"^(\s*(?:`{3,}|~{3,})\s*\{?\s*\.?)python\b", r"\1py", first)
    return [relabelled, *fence_lines[1:]]
