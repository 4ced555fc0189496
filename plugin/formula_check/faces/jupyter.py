r"""The Jupyter face: ``%load_ext formula_check``, then a ``%%formula`` cell.

A ``%%formula`` cell holds the code a formula block would pair with, under the block's own
header::

    %%formula oracle="attention" mask="causal" latex="\text{softmax}(QK^T/\sqrt{d_k} + M)V"
    def attention(q, k, v, mask=None):
        ...

The cell runs in the kernel first, as any cell would, so what it defines is there for the
next cells. Then it is checked exactly as a page block is: same header syntax and errors,
same planning and judging, in the same worker processes (TensorFlow is imported there, one
process per check, never by this face), and its card is shown under the cell.

What the worker runs is the code as written, not the kernel's state: the cell, after the
imports, functions and classes of the cells run before it (their other statements, such as a
training loop, are left out). ``entry=`` may so name a function or layer defined earlier,
from a line magic: ``%formula oracle="softmax" entry="my_softmax"``.

Magic-only options, taken out of the header before it is read as a block's: ``latex="…"``,
the formula (without it, the code is checked against the oracle alone), and ``strict``, which
raises :class:`FormulaCheckFailedError` when the check fails (for "Run all" in CI); by default the
failing card is shown and the notebook goes on.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from formula_check.errors import FormulaCheckError
from formula_check.model import Location
from formula_check.pages.blocks import PageBlock, page_blocks
from formula_check.pages.notebooks import (
    NO_OWN_CODE,
    CellCode,
    LatexDefinitions,
    cell_code,
    formula_cell_lines,
    own_code,
    runs_in_kernel,
    split_magic_options,
)
from formula_check.render import STYLESHEET, labels_for
from formula_check.render.figure_cache import FigureCache
from formula_check.results import CheckResult
from formula_check.session import SHARED_ENGINES, DataUriImages, FormulaSession, is_failure
from formula_check.session.options import Options

RESULT_NAME = "_formula_result"
"""The user-namespace name under which the last ``%%formula`` cell's result is kept."""


class FormulaCheckFailedError(AssertionError):
    """A ``%%formula strict`` cell whose check failed; its message is the block's headline."""


def block_page(header: str, latex: str, code: CellCode) -> list[str]:
    """A one-block page for the cell: its formula fence, then its code as the check runs it."""
    return [*formula_cell_lines(header, latex), "```python", *code.source.split("\n"), "```"]


class FormulaMagic:
    """What ``%%formula`` does in one kernel; :func:`load_ipython_extension` registers it."""

    def __init__(
        self, shell: Any, options: Options | None = None, root: Path | None = None
    ) -> None:
        self.shell = shell
        self.options = options or Options()
        self.root = (root or Path.cwd()).resolve()
        self.session = FormulaSession(
            settings=self.options.pages(self.root),
            labels=labels_for("en"),
            images=DataUriImages(),
            engine_factory=lambda: SHARED_ENGINES.get(self.options.engine(self.root)),
            figure_cache=FigureCache(None),
        )
        self.cells_run: list[tuple[str, str]] = []
        """The cells that ran without an error, as Python: ``(In [n], code)``."""
        self.latex = LatexDefinitions()
        self._inside = False
        self._formula_code: str | None = None

    def __call__(self, line: str, cell: str | None = None) -> None:
        """Check the cell and show its card under it. Its code runs in the kernel first,
        unless the page would not run it (``skip``, ``expect="error"`` or ``"timeout"``); if
        it raises there, Jupyter shows why, as for any cell, and nothing is checked. As a
        line magic (``%formula … entry="name"``) there is no code of its own: it checks what
        earlier cells defined. The result is kept as ``_formula_result`` in the user's
        namespace, not returned: Jupyter would print it under the card."""
        cell = cell or ""
        header, latex, strict = split_magic_options(line)
        code, block = self.block(header, latex, cell)
        if cell.strip() and runs_in_kernel(block.spec):
            self._inside = True
            try:
                ran = self.shell.run_cell(cell, store_history=False)
            finally:
                self._inside = False
            if not ran.success:
                return
            self._formula_code = cell
        result = self.answer(block, code)
        self.shell.user_ns[RESULT_NAME] = result
        self.show(result, latex)
        if strict and is_failure(result, self.options.fail_on):
            raise FormulaCheckFailedError(result.headline())

    def check(self, header: str, latex: str, cell: str) -> CheckResult:
        """The cell's result, as a page block's would be."""
        code, block = self.block(header, latex, cell)
        return self.answer(block, code)

    def block(self, header: str, latex: str, cell: str) -> tuple[CellCode, PageBlock]:
        """The cell's code as the check runs it, and its block."""
        name = self._cell_name()
        code = cell_code(name, self.cells_run, cell, 2)
        lines = block_page(header, latex, code)
        blocks = page_blocks(lines, page=name, settings=self.session.settings)
        if not blocks:
            raise FormulaCheckError(f"{name}: the %%formula cell could not be read")
        (block,) = blocks
        return code, self.latex.given(own_code(block, code, NO_OWN_CODE))

    def answer(self, block: PageBlock, code: CellCode) -> CheckResult:
        """The block's result, its failure placed in the cell (or the earlier cell) it is in."""
        [result] = self.session.answers_for([block])
        assert isinstance(result, CheckResult)
        failure = result.failure
        where = failure.location if failure is not None else None
        if failure is not None and where is not None and where.path == code.page:
            cell, row = code.where(where.line - code.line_offset())
            failure = dataclasses.replace(failure, location=Location(cell or code.page, row))
        return dataclasses.replace(result, location=Location(code.page, 1), failure=failure)

    def show(self, result: CheckResult, latex: str) -> None:
        """The card under the cell, self-contained: its style and images are in the output."""
        from IPython import display as shown

        if latex.strip():
            shown.display(shown.Math(latex))  # type: ignore[no-untyped-call]
        style = f"<style>{STYLESHEET.read_text(encoding='utf-8')}</style>"
        shown.display(shown.HTML(style + self.session.card(result, None)))  # type: ignore[no-untyped-call]

    def cell_ran(self, result: Any) -> None:
        """IPython's ``post_run_cell``: keep a cell that ran without an error, as Python (of
        a ``%%formula`` cell, its code when it ran in the kernel), for the later checks. A
        cell that failed defined nothing a later cell may rely on."""
        if self._inside:
            return  # the %%formula cell's own run: kept once the cell is done
        formula_code, self._formula_code = self._formula_code, None
        raw = str(getattr(result.info, "raw_cell", "") or "")
        if raw.lstrip().startswith(("%%formula", "%formula")):
            if formula_code is None:
                return  # its code did not run in the kernel
            raw = formula_code
        elif not result.success:
            return
        count = getattr(result, "execution_count", None)
        name = f"In [{count}]" if count is not None else self._cell_name()
        self.cells_run.append((name, self.shell.transform_cell(raw)))

    def _cell_name(self) -> str:
        """``In [7]``: the number Jupyter shows beside the cell being run."""
        return f"In [{len(self.shell.history_manager.input_hist_raw) - 1}]"


def load_ipython_extension(shell: Any) -> None:
    """``%load_ext formula_check``: register ``%%formula``, and follow which cells ran."""
    magic = FormulaMagic(shell)
    # The cells run before the extension was loaded: whether each succeeded is not known,
    # so all are kept, as Python (the current cell, the last, is this %load_ext).
    before = list(shell.history_manager.input_hist_raw)[1:-1]
    magic.cells_run += [(f"In [{n}]", shell.transform_cell(raw)) for n, raw in enumerate(before, 1)]
    shell.register_magic_function(magic, magic_kind="line_cell", magic_name="formula")
    shell.events.register("post_run_cell", magic.cell_ran)
