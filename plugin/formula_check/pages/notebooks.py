r"""A Jupyter notebook's formula blocks, read from its file: the notebook is never run.

Two kinds of cell hold a block:

- a Markdown cell's ```` ```formula ```` fence, paired as on a page: with a
  ```` ```python ```` fence after it in the same cell, else with the next code cell (before
  the next formula), or with ``code=``;
- a ``%%formula`` code cell (the magic of :mod:`..faces.jupyter`): its first line is the block's
  header, with the magic's own ``latex="…"`` and ``strict``, and the rest is the code; a
  ``%formula … entry="name"`` line checks what the cells above defined.

Each block is read by :func:`.blocks.page_blocks` from a small page built for it and named after
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

from formula_check.errors import PageError, SpecError
from formula_check.model import CheckSpec, Location, in_cell
from formula_check.pages.blocks import (
    PageBlock,
    Settings,
    default_id,
    page_blocks,
    passes_definition_on,
)
from formula_check.pages.fence_scan import FormulaFence, find_formulas

_KEPT = (ast.Import, ast.ImportFrom, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
_DEFINED = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
_IPYTHON_LINE = re.compile(r"^(?P<indent>[ \t]*)[%!]")
_DECLARED_ID = re.compile(r"(?:^|\s)id=")
_MAGIC = re.compile(r"^(?P<sign>%%?)formula(?=\s|$)")
_MAGIC_WORD = re.compile(
    r"""latex=(?P<quote>["'])(?P<latex>(?:\\.|(?!(?P=quote))[^\\])*)(?P=quote)(?=\s|$)"""
    r"""|(?P<word>(?:"[^"]*"|'[^']*'|[^\s"'])+|\S+)""",
    re.S,
)


def split_magic_options(line: str) -> tuple[str, str, bool]:
    r"""The block header, the LaTeX (``latex="…"``) and ``strict``, from a ``%%formula`` line.

    ``strict`` is the flag only as a bare word: inside a quoted value it is the value's. In
    the LaTeX, ``\\`` stands for one backslash and ``\"`` (``\'`` in ``latex='…'``) for the
    quote; any other backslash is the formula's own (``\frac`` reads as written)."""
    words: list[str] = []
    latex, strict = "", False
    for found in _MAGIC_WORD.finditer(line):
        if found["latex"] is not None:
            latex = re.sub(r"\\([\\" + found["quote"] + "])", r"\1", found["latex"])
        elif found["word"] == "strict":
            strict = True
        else:
            words.append(found["word"])
    return " ".join(words), latex, strict


def as_python(cell: str) -> str:
    """A code cell as Python, line for line: IPython's ``%magic`` and ``!shell`` lines become
    ``pass``; a cell magic's cell (``%%time``, ``%%writefile``) is no Python and reads as
    nothing (``%%formula`` cells are split before)."""
    if cell.lstrip().startswith("%%"):
        return ""
    return "\n".join(_IPYTHON_LINE.sub(r"\g<indent>pass  # ", line) for line in cell.split("\n"))


def _parsed(code: str) -> ast.Module | None:
    try:
        return ast.parse(code)
    except SyntaxError:
        return None  # the kernel refused it too: nothing of it exists


def _is_future(node: ast.stmt) -> bool:
    return isinstance(node, ast.ImportFrom) and node.module == "__future__"


def _defines_own(tree: ast.Module | None) -> bool:
    """Whether code defines what a check may take as its entry by default: a function or a
    class, or a name bound to a call or a lambda (``softmax = tf.function(impl)``). Code
    that does not parse counts: its check reports the syntax error."""
    if tree is None:
        return True
    return any(
        isinstance(node, _DEFINED)
        or (
            isinstance(node, ast.Assign | ast.AnnAssign)
            and isinstance(node.value, ast.Call | ast.Lambda)
        )
        for node in tree.body
    )


@dataclass(frozen=True)
class CellCode:
    """A cell's code as its block runs it: the imports, functions and classes of the cells
    run before it, then its own code (``body``), line for line.

    Made by :func:`cell_code`, so that a verdict is the cell's own: an earlier definition of
    a name the cell defines again is left out (the check's default entry, the last function
    or class the code defines, is then the cell's, not an earlier cell's), and every
    ``from __future__`` import is moved to the top, where Python wants it (IPython keeps such
    an import for the later cells, as this does)."""

    page: str
    source: str
    before: int
    """How many lines of ``source`` come before the body's first."""
    first_line: int
    """The cell line of the body's first line (2 under a ``%%formula`` line)."""
    origins: tuple[tuple[str, int], ...] = ()
    """The earlier cell and its line of each line before the body (``("", 0)`` for a line
    of ours)."""
    defines: bool = True
    """Whether the body defines a function or class of its own (see :func:`_defines_own`)."""

    def line_offset(self) -> int:
        """Cell line = offset + source line (the definitions above come first)."""
        return self.first_line - 1 - self.before

    def where(self, line: int) -> tuple[str, int]:
        """The cell and its line of source line ``line``: the block's own cell (``page``)
        from the body on, an earlier cell before it."""
        if line > self.before or not 0 < line <= len(self.origins):
            return self.page, self.line_offset() + line
        return self.origins[line - 1]


def cell_code(
    page: str, earlier: Sequence[tuple[str, str]], body: str, first_line: int
) -> CellCode:
    """The code of cell ``page`` as its check runs it: the definitions of the ``earlier``
    cells (``(name, Python)`` pairs, in order), then ``body`` (see :class:`CellCode`)."""
    own = _parsed(body)
    redefined = {node.name for node in (own.body if own else []) if isinstance(node, _DEFINED)}
    futures: list[str] = []
    kept: list[tuple[str, int, str]] = []
    for name, cell in earlier:
        kept += _definitions(name, cell, redefined, futures)
    kept = kept[1:]  # each definition is set apart from the one before; the first from none
    body_lines = body.split("\n")
    for node in own.body if own else []:
        if _is_future(node):
            futures += [alias.name for alias in node.names]  # type: ignore[attr-defined]
            for row in range(node.lineno, (node.end_lineno or node.lineno) + 1):
                body_lines[row - 1] = ""  # moved to the top; the lines keep their numbers
    head = (
        [("", 0, f"from __future__ import {', '.join(dict.fromkeys(futures))}")] if futures else []
    )
    before = [*head, *([("", 0, "")] if head and kept else []), *kept]
    if before:
        before.append(("", 0, ""))
    source = "\n".join([*(text for _, _, text in before), *body_lines])
    origins = tuple((name, row) for name, row, _ in before)
    return CellCode(page, source, len(before), first_line, origins, _defines_own(own))


def _definitions(
    name: str, cell: str, redefined: set[str], futures: list[str]
) -> list[tuple[str, int, str]]:
    """The lines of earlier cell ``name`` that a later cell's check keeps: its definitions
    and imports, less those the later cell defines again (``redefined``), each after a blank
    line and tagged ``(cell, row)``; its ``__future__`` imports go to ``futures``."""
    tree, lines = _parsed(cell), cell.split("\n")
    kept: list[tuple[str, int, str]] = []
    for node in tree.body if tree else []:
        if _is_future(node):
            futures += [alias.name for alias in node.names]  # type: ignore[attr-defined]
        elif isinstance(node, _KEPT) and getattr(node, "name", None) not in redefined:
            first = min([node.lineno, *(d.lineno for d in getattr(node, "decorator_list", []))])
            end = node.end_lineno or node.lineno
            kept += [("", 0, "")] + [(name, row, lines[row - 1]) for row in range(first, end + 1)]
    return kept


def _fence_for(code: str) -> str:
    """Backticks enough that no run of them in ``code`` closes the fence."""
    runs = [len(run) for run in re.findall(r"`+", code)]
    return "`" * max(3, max(runs, default=0) + 1)


def _code_fence(code: str) -> list[str]:
    fence = _fence_for(code)
    return [fence + "python", *code.split("\n"), fence]


def own_code(block: PageBlock, code: CellCode, nothing: str) -> PageBlock:
    """``block`` with its inline code placed in the cell it came from; an error saying
    ``nothing`` when that code defines no function or class of its own and no ``entry=``
    names one: the check would otherwise take an earlier cell's."""
    spec = block.spec
    if spec is None or spec.snippet.origin != "inline":
        return block
    if spec.snippet.entry is None and not spec.skip and not code.defines:
        return dataclasses.replace(block, spec=None, error=SpecError(nothing, block.location))
    snippet = dataclasses.replace(
        spec.snippet, location=Location(code.page, 1), line_offset=code.line_offset()
    )
    return dataclasses.replace(block, spec=dataclasses.replace(spec, snippet=snippet))


def runs_in_kernel(spec: CheckSpec | None) -> bool:
    """Whether a ``%%formula`` cell's code runs in the kernel before its check: not when the
    page would not run it either (``skip``), nor when it is expected to raise or hang
    (``expect="error"``, ``"timeout"``: only the check's own process runs it)."""
    return spec is None or (not spec.skip and spec.expect not in ("error", "timeout"))


def formula_cell_lines(header: str, latex: str) -> list[str]:
    """The formula fence of a ``%%formula`` cell (its own ``formula="off"`` without LaTeX)."""
    formula = latex.strip() or "?"
    off = "" if latex.strip() else ' formula="off"'
    return [f"```formula {header}{off}", *formula.split("\n"), "```", ""]


NO_OWN_CODE = (
    "the %%formula cell defines no function or class to check (a %formula line has no code "
    'of its own): name what it checks with entry="name"'
)
"""What a ``%formula`` line without ``entry=``, or a ``%%formula`` cell that defines
nothing, is told: the check would otherwise take an earlier cell's last function."""


@dataclass
class LatexDefinitions:
    r"""The ``\text{Name}(…) = …`` formulas of the blocks so far, passed on to later blocks
    as a page passes them (:func:`.blocks.passes_definition_on`), across cells."""

    passed: list[tuple[str, str, str]] = dataclasses.field(default_factory=list)

    def given(self, block: PageBlock) -> PageBlock:
        """``block`` with the definitions of the blocks before it; its own kept for later."""
        if block.spec is None:
            return block
        spec = dataclasses.replace(block.spec, definitions=tuple(self.passed))
        if passes_definition_on(spec):
            self.passed.append((spec.oracle, spec.latex, str(spec.location)))
        return dataclasses.replace(block, spec=spec)


class _Reader:
    """One pass over a notebook's cells, in order (see the module docstring)."""

    def __init__(self, notebook: str, settings: Settings) -> None:
        self.notebook = notebook
        self.settings = settings
        self.blocks: list[PageBlock] = []
        self.cells_above: list[tuple[str, str]] = []
        self.latex = LatexDefinitions()
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
            if not self._magic_cell(page, stripped, cell_magic=magic["sign"] == "%%"):
                return  # its code never runs in the kernel: later cells do not have it
        elif self.waiting is not None:
            code = cell_code(page, self.cells_above, as_python(text), 1)
            waiting_page, lines = self.waiting
            self.waiting = None
            paired = [*lines, "", *_code_fence(code.source)]
            nothing = _paired_nothing(page, text)
            self._add(waiting_page, paired, code=code, own_lines=len(lines), nothing=nothing)
        cell_magic = magic is not None and magic["sign"] == "%%"
        self.cells_above.append((page, as_python(self._code_of(stripped) if cell_magic else text)))

    @staticmethod
    def _code_of(cell: str) -> str:
        """A ``%%formula`` cell's code (its first line is the magic's)."""
        return cell.split("\n", 1)[1] if "\n" in cell else ""

    def _magic_cell(self, page: str, cell: str, *, cell_magic: bool) -> bool:
        """Read a ``%formula`` line or ``%%formula`` cell; whether its code runs in a kernel."""
        first, _, body = cell.partition("\n")
        magic_line = first[len("%%formula" if cell_magic else "%formula") :]
        header, latex, _strict = split_magic_options(magic_line)
        code = cell_code(page, self.cells_above, as_python(body) if cell_magic else "", 2)
        lines = [*formula_cell_lines(header, latex), *_code_fence(code.source)]
        self._add(page, lines, code=code, nothing=NO_OWN_CODE)
        return runs_in_kernel(self.blocks[-1].spec)

    def flush(self) -> None:
        """The waiting Markdown cell's blocks, its last one without code of its own."""
        if self.waiting is not None:
            page, lines = self.waiting
            self.waiting = None
            self._add(page, lines)

    def _add(
        self,
        page: str,
        lines: list[str],
        *,
        code: CellCode | None = None,
        own_lines: int = 0,
        nothing: str = "",
    ) -> None:
        found = page_blocks(lines, page=page, settings=self.settings, front_matter_error="")
        for block in found:
            fence = block.fence.snippet
            placed = block
            if code is not None and fence is not None and fence.row >= own_lines:
                placed = own_code(block, code, nothing)
            self.blocks.append(self.latex.given(self._numbered(placed)))

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


def _paired_nothing(page: str, text: str) -> str:
    """What a formula is told whose paired code cell (``page``, ``text``) defines nothing."""
    cell = page.rpartition(":")[2]
    magic = re.match(r"\s*(%%\w+)", text)
    why = (
        f": a cell under another cell magic ({magic[1]}) is not read"
        if magic
        else '; to check a function of a cell above, say entry="name"'
    )
    return f"the code {cell} paired with this formula defines nothing to check{why}"


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
    except RecursionError:  # JSON nested deeper than Python's reader (or nbformat's) recurses
        raise PageError(
            "not a Jupyter notebook: its JSON is nested too deeply to read", Location(notebook)
        ) from None


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
