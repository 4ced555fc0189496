r"""A page as a runnable notebook: its prose and formulas as Markdown cells, each block's
code as a ``%%formula`` cell under the block's own options, so that a reader runs the same
checks in Jupyter.

The cells are cut from the page by our own reading of its fences, and nbformat writes them:

- the first cell loads the magic (``%load_ext formula_check``);
- a formula block becomes its display math (``$$ … $$``), in the Markdown around it;
- the code a block checks becomes a code cell: ``%%formula`` and the block's header (the
  page's front-matter defaults the block takes, then its own options, then ``latex="…"``)
  over the inline snippet, or a ``%formula`` line for a block whose code lives elsewhere
  (``code="…"``; run the notebook from the project's root, as the site is built);
- every other fence stays in the Markdown as it was shown: no code runs that the page did not
  check.

jupytext's Markdown reader is not used, though it reads such a page: it makes a code cell of
every fence in a language it knows (a ``bash`` fence becomes a ``%%bash`` cell, an ``html``
one a ``%%html`` cell), so shown code would run on "Run all". Which fence is checked code is
known here already; only the cells are left to make.

The notebook is the same bytes for the same page: cell ids are numbered, not random, and no
version or time is written into it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from formula_check.errors import FormulaCheckError
from formula_check.model import Location
from formula_check.oracles import get_oracle
from formula_check.pages.blocks import oracle_names
from formula_check.pages.fence_scan import Fence, FormulaFence, find_formulas, scan_fences
from formula_check.pages.fences import page_defaults, parse_header, parse_options
from formula_check.pages.front_matter import block_options

LOAD = "%load_ext formula_check"
_MARKER = re.compile(r"^[ \t>]*(`{3,}|~{3,})")
_TEX_COMMENT = re.compile(r"(?<!\\)((?:\\\\)*)%.*$")
_KERNEL = {"display_name": "Python 3", "language": "python", "name": "python3"}
NO_CODE = "# the page gives this formula no code: no ```python fence follows it"
"""The body of the cell of a block without code, which the magic reports as an error."""


def notebook_name(page: str) -> str:
    """``guide/attention.md`` -> ``attention.ipynb``: the notebook's file name, next to the
    page's HTML."""
    stem = page.replace("\\", "/").rsplit("/", 1)[-1].rsplit(".", 1)[0]
    return f"{stem or 'page'}.ipynb"


def page_notebook(markdown: str, *, page: str, meta: Mapping[str, Any] | None = None) -> str:
    """The notebook of a page (its Markdown without front matter, and the front matter's
    values), as the text of an ``.ipynb`` file."""
    import nbformat
    from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

    defaults = page_defaults(meta, Location(page, 1))
    cells = [("code", LOAD), *_cells(markdown.splitlines(), defaults, page)]
    notebook = new_notebook(  # type: ignore[no-untyped-call]
        cells=[
            new_code_cell(text) if kind == "code" else new_markdown_cell(text)  # type: ignore[no-untyped-call]
            for kind, text in cells
        ],
        metadata={"kernelspec": _KERNEL, "language_info": {"name": "python"}},
    )
    for index, cell in enumerate(notebook.cells):
        cell.id = f"cell-{index + 1}"
    nbformat.validate(notebook)
    written: str = nbformat.writes(notebook, version=4)  # type: ignore[no-untyped-call]
    return written if written.endswith("\n") else written + "\n"


def _cells(lines: Sequence[str], defaults: Mapping[str, str], page: str) -> list[tuple[str, str]]:
    """The page's cells: its Markdown, each formula as display math in it, each checked
    snippet a ``%%formula`` cell; every other fence left in the Markdown as it is."""
    formulas = {formula.row: formula for formula in find_formulas(lines)}
    fences = scan_fences(lines)
    ends = _fence_ends(lines, fences)
    checked = {
        f.snippet.row: f
        for f in formulas.values()
        if f.snippet and not _elsewhere(f, defaults, page)
    }
    cells: list[tuple[str, str]] = []
    text: list[str] = []

    def code_cell(source: str) -> None:
        cells.append(("markdown", "\n".join(text).strip("\n")))
        cells.append(("code", source))
        text.clear()

    row = 0
    for fence in fences:
        text += lines[row : fence.row]
        row = ends[fence.row]
        formula = formulas.get(fence.row)
        if formula is not None:
            text += ["$$", *formula.latex.strip("\n").splitlines(), "$$"]
            if _elsewhere(formula, defaults, page):
                code_cell(_magic("%formula", formula, defaults, page))
            elif formula.snippet is None:
                code_cell(
                    _magic("%%formula", formula, defaults, page, no_code=True) + "\n" + NO_CODE
                )
        elif fence.row in checked:
            code_cell(
                _magic("%%formula", checked[fence.row], defaults, page) + "\n" + fence.body.rstrip()
            )
        else:
            text += lines[fence.row : row]
    text += lines[row:]
    cells.append(("markdown", "\n".join(text).strip("\n")))
    return [(kind, source) for kind, source in cells if kind == "code" or source.strip()]


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


def _magic(
    sign: str,
    formula: FormulaFence,
    defaults: Mapping[str, str],
    page: str,
    *,
    no_code: bool = False,
) -> str:
    """``%%formula`` and the block's options: the page's it takes, then its own, then its
    LaTeX. ``no_code``: a block without code, so no ``entry=`` or ``skip=`` that would let
    the magic check a function of another cell, or show it skipped: the magic reports that
    the cell defines nothing to check, as the page reports the missing code."""
    where = Location(page, formula.line)
    options = {**_taken(defaults, formula, where), **parse_header(formula.header, where)}
    if no_code:
        options = {key: value for key, value in options.items() if key not in ("entry", "skip")}
    words = [sign, *(_option(key, value) for key, value in options.items())]
    latex = " ".join(_without_comments(formula.latex).split())
    if latex and options.get("formula", "on") not in ("off", "false"):
        words.append(f'latex="{_escaped(latex)}"')
    return " ".join(words)


def _taken(defaults: Mapping[str, str], formula: FormulaFence, where: Location) -> dict[str, str]:
    """The page's defaults as the page build applies them to the block
    (:func:`..pages.front_matter.block_options`): one the block cannot take is left out, and of a
    list or map the names its oracle has. A header the page refuses keeps them all: the
    notebook then reports what the page does."""
    try:
        own_text = parse_header(formula.header, where)
        own = parse_options(own_text, where)
        parsed = parse_options(defaults, where)
        name = own.get("oracle", parsed.get("oracle"))
        names = oracle_names(get_oracle(name)) if name else None
        options, _notes = block_options(parsed, own, where, names)
    except FormulaCheckError:
        return dict(defaults)
    taken = {}
    for key, text in defaults.items():
        if key in own_text:
            continue
        applied = parse_options({key: text}, where)
        if all(options.get(k) == v for k, v in applied.items()):
            taken[key] = text
        elif any(k in options for k in applied):
            kept = [
                word for word in text.split() if _first_name(word) in _names_of(options, applied)
            ]
            if kept:
                taken[key] = " ".join(kept)
    return taken


def _first_name(word: str) -> str:
    return re.split(r"[=:]", word, maxsplit=1)[0]


def _names_of(options: Mapping[str, Any], applied: Mapping[str, Any]) -> set[str]:
    """The names the block kept of a default's lists and maps."""
    names: set[str] = set()
    for key in applied:
        value = options.get(key)
        if isinstance(value, Mapping | tuple | list):
            names |= {str(name) for name in value}
    return names


def _without_comments(latex: str) -> str:
    """The formula without its TeX comments (an unescaped ``%`` to the end of its line):
    joined onto one line, a comment would run to the end of the formula."""
    return "\n".join(_TEX_COMMENT.sub(r"\1", line) for line in latex.split("\n"))


def _escaped(latex: str) -> str:
    r"""``latex`` as the magic reads it back from ``latex="…"``
    (:func:`..pages.notebooks.split_magic_options`, where ``\\`` is one backslash and ``\"`` a
    quote): a run of backslashes is doubled when it is two or more long, or a quote or the
    formula's end follows it; then each quote is ``\"``. ``\frac`` stays as written."""

    def doubled(run: re.Match[str]) -> str:
        after = latex[run.end() : run.end() + 1]
        return run[0] * 2 if len(run[0]) > 1 or after in ('"', "") else run[0]

    return re.sub(r"\\+", doubled, latex).replace('"', '\\"')


def _option(key: str, value: str) -> str:
    """``key="value"``, or single-quoted when the value holds a double quote."""
    return f"{key}='{value}'" if '"' in value else f'{key}="{value}"'
