r"""A Jupyter notebook's formula blocks, read from its file: the notebook is never run.

Two kinds of cell hold a block:

- a Markdown cell's ```` ```formula ```` fence, paired as on a page: with a
  ```` ```python ```` fence after it in the same cell, else with the next code cell (before
  the next formula), or with ``code=``;
- a ``%%formula`` code cell (the magic of :mod:`.notebook`): its first line is the block's
  header, with the magic's own ``latex="…"`` and ``strict``, and the rest is the code; a
  ``%formula … entry="name"`` line checks what the cells above defined.

Each block is read by :func:`.pages.page_blocks` from a small page built for it and named after
its cell (``analysis.ipynb:cell 7``, cells counted from 1 from the top), so headers, errors and
specs are a page block's, and lines count within the cell. A code cell is checked after the
imports, functions and classes of the code cells above it, as the magic checks it in a
kernel; IPython's own lines (``%magic``, ``!shell``) are read as ``pass``. Default ids are
numbered through the notebook (``analysis-3``), and an id may be used once per notebook.
"""

from __future__ import annotations

import ast
import dataclasses
import re
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from .errors import PageError, SpecError
from .model import Location, in_cell
from .pages import FormulaFence, PageBlock, Settings, default_id, find_formulas, page_blocks

_MAGIC_FLAG = re.compile(r"(?:^|\s)strict(?=\s|$)")
_LATEX = re.compile(r"""(?:^|\s)latex=(?P<quote>["'])(?P<latex>.*?)(?P=quote)""", re.S)
_KEPT = (ast.Import, ast.ImportFrom, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
_IPYTHON_LINE = re.compile(r"^(?P<indent>[ \t]*)[%!]")
_DECLARED_ID = re.compile(r"(?:^|\s)id=")
_MAGIC = re.compile(r"^(?P<sign>%%?)formula(?=\s|$)")


def split_magic_options(line: str) -> tuple[str, str, bool]:
    """The block header, the LaTeX (``latex="…"``) and ``strict``, from a ``%%formula`` line."""
    latex = ""
    found = _LATEX.search(line)
    if found is not None:
        latex = found["latex"].replace("\\\\", "\\")
        line = line[: found.start()] + " " + line[found.end() :]
    strict = _MAGIC_FLAG.search(line) is not None
    return _MAGIC_FLAG.sub(" ", line).strip(), latex, strict


def definitions(cells: Sequence[str]) -> str:
    """The imports, functions and classes of ``cells`` (Python already), in order: what a
    later cell's code may use without running the rest."""
    kept: list[str] = []
    for cell in cells:
        try:
            tree = ast.parse(cell)
        except SyntaxError:
            continue  # the kernel refused it too: nothing of it exists
        lines = cell.splitlines()
        for node in tree.body:
            if isinstance(node, _KEPT):
                first = min([node.lineno, *(d.lineno for d in getattr(node, "decorator_list", []))])
                kept.append("\n".join(lines[first - 1 : node.end_lineno]))
    return "\n\n".join(kept)


def as_python(cell: str) -> str:
    """A code cell as Python, line for line: IPython's ``%magic`` and ``!shell`` lines become
    ``pass``; a cell magic's cell (``%%time``, ``%%writefile``) is no Python and reads as
    nothing (``%%formula`` cells are split before)."""
    if cell.lstrip().startswith("%%"):
        return ""
    return "\n".join(_IPYTHON_LINE.sub(r"\g<indent>pass  # ", line) for line in cell.split("\n"))


@dataclass(frozen=True)
class _Code:
    """A code cell's code as a block runs it: the cells' definitions above, then its own."""

    page: str
    earlier: str
    body: str
    first_line: int
    """The cell line of the body's first line (2 under a ``%%formula`` line)."""

    def source(self) -> str:
        return (self.earlier + "\n\n" if self.earlier else "") + self.body

    def line_offset(self) -> int:
        """Cell line = offset + source line (the definitions above come first)."""
        before = self.earlier.count("\n") + 2 if self.earlier else 0
        return self.first_line - 1 - before


def _fence_for(code: str) -> str:
    """Backticks enough that no run of them in ``code`` closes the fence."""
    runs = [len(run) for run in re.findall(r"`+", code)]
    return "`" * max(3, max(runs, default=0) + 1)


def _code_fence(code: str) -> list[str]:
    fence = _fence_for(code)
    return [fence + "python", *code.split("\n"), fence]


def _relocated(block: PageBlock, code: _Code) -> PageBlock:
    """``block`` with its inline code placed in the code cell it came from."""
    spec = block.spec
    if spec is None or spec.snippet.origin != "inline":
        return block
    snippet = dataclasses.replace(
        spec.snippet, location=Location(code.page, 1), line_offset=code.line_offset()
    )
    return dataclasses.replace(block, spec=dataclasses.replace(spec, snippet=snippet))


class _Reader:
    """One pass over a notebook's cells, in order (see the module docstring)."""

    def __init__(self, notebook: str, settings: Settings) -> None:
        self.notebook = notebook
        self.settings = settings
        self.blocks: list[PageBlock] = []
        self.cells_above: list[str] = []
        self.waiting: tuple[str, list[str]] | None = None
        """A Markdown cell whose last formula has no code yet: its page name and lines."""

    def markdown(self, number: int, text: str) -> None:
        lines = text.split("\n")
        formulas = find_formulas(lines)
        if not formulas:
            return
        self.flush()
        page = in_cell(self.notebook, number)
        if formulas[-1].snippet is None:
            self.waiting = (page, lines)
        else:
            self._add(page, lines)

    def code(self, number: int, text: str) -> None:
        page = in_cell(self.notebook, number)
        stripped = text.lstrip()
        magic = _MAGIC.match(stripped)
        if magic is not None:
            self.flush()
            self._magic_cell(page, stripped, cell_magic=magic["sign"] == "%%")
        elif self.waiting is not None:
            code = _Code(page, definitions(self.cells_above), as_python(text), 1)
            waiting_page, lines = self.waiting
            self.waiting = None
            paired = [*lines, "", *_code_fence(code.source())]
            self._add(waiting_page, paired, code=code, own_lines=len(lines))
        cell_magic = magic is not None and magic["sign"] == "%%"
        self.cells_above.append(as_python(self._code_of(stripped) if cell_magic else text))

    @staticmethod
    def _code_of(cell: str) -> str:
        """A ``%%formula`` cell's code (its first line is the magic's)."""
        return cell.split("\n", 1)[1] if "\n" in cell else ""

    def _magic_cell(self, page: str, cell: str, *, cell_magic: bool) -> None:
        first, _, body = cell.partition("\n")
        magic_line = first[len("%%formula" if cell_magic else "%formula") :]
        header, latex, _strict = split_magic_options(magic_line)
        code = _Code(page, definitions(self.cells_above), as_python(body) if cell_magic else "", 2)
        formula = latex.strip() or "?"
        off = "" if latex.strip() else ' formula="off"'
        lines = [f"```formula {header}{off}", *formula.split("\n"), "```", ""]
        self._add(page, [*lines, *_code_fence(code.source())], code=code, own_lines=0)

    def flush(self) -> None:
        """The waiting Markdown cell's blocks, its last one without code of its own."""
        if self.waiting is not None:
            page, lines = self.waiting
            self.waiting = None
            self._add(page, lines)

    def _add(
        self, page: str, lines: list[str], *, code: _Code | None = None, own_lines: int = 0
    ) -> None:
        found = page_blocks(lines, page=page, settings=self.settings, front_matter_error="")
        for block in found:
            fence = block.fence.snippet
            paired = code is not None and fence is not None and fence.row >= own_lines
            placed = _relocated(block, code) if code is not None and paired else block
            self.blocks.append(self._numbered(placed))

    def _numbered(self, block: PageBlock) -> PageBlock:
        """A default id numbered through the notebook; a second use of an id is an error."""
        if not _DECLARED_ID.search(block.fence.header):
            block_id = default_id(self.notebook, len(self.blocks) + 1)
            spec = block.spec and dataclasses.replace(block.spec, block_id=block_id)
            block = dataclasses.replace(block, block_id=block_id, spec=spec)
        first = next((b for b in self.blocks if b.block_id == block.block_id), None)
        if first is None or block.spec is None:
            return block
        where = first.location
        message = (
            f"duplicate id {block.block_id!r} (first used at cell {where.cell}:line {where.line})"
        )
        return dataclasses.replace(block, spec=None, error=SpecError(message, block.location))


def read_notebook(data: bytes, notebook: str) -> Any:
    """The notebook in ``data`` (nbformat 4), or :class:`PageError` saying why it is none."""
    try:
        import nbformat
    except ImportError:
        raise PageError(
            "reading a notebook needs nbformat: pip install nbformat (Jupyter brings it)",
            Location(notebook),
        ) from None
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # a missing cell id is the notebook's, not ours
            text = data.decode("utf-8-sig")
            return nbformat.reads(text, as_version=4)  # type: ignore[no-untyped-call]
    except (ValueError, KeyError, TypeError, AttributeError) as exc:  # not JSON, not a notebook
        raise PageError(f"not a Jupyter notebook: {exc}", Location(notebook)) from None


def notebook_blocks(data: bytes, *, notebook: str, settings: Settings) -> list[PageBlock]:
    """Every formula block of the notebook file ``data`` (``notebook``: its page name), in cell
    order; a file that is no notebook gives one error block, ``notebook``."""
    try:
        cells = read_notebook(data, notebook).cells
    except PageError as exc:
        where = Location(notebook)
        fence = FormulaFence(0, 0, 0, "", "", True, None)
        return [PageBlock(fence, where, "notebook", "", error=exc)]
    reader = _Reader(notebook, settings)
    for number, cell in enumerate(cells, 1):
        source = str(cell.get("source", ""))
        if cell.get("cell_type") == "markdown":
            reader.markdown(number, source)
        elif cell.get("cell_type") == "code":
            reader.code(number, source)
    reader.flush()
    return reader.blocks


def cell_source(data: bytes, notebook: str, cell: int) -> str | None:
    """The text of cell ``cell`` (from 1) of the notebook file ``data``, if it has one."""
    try:
        cells = read_notebook(data, notebook).cells
    except PageError:
        return None
    return str(cells[cell - 1].get("source", "")) if 0 < cell <= len(cells) else None
