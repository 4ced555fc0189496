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

from .errors import FormulaCheckError
from .model import CheckResult, Location
from .notebooks import definitions, split_magic_options
from .options import Options
from .pages import page_blocks
from .render import STYLESHEET, labels_for
from .render.figure_cache import FigureCache
from .session import SHARED_ENGINES, DataUriImages, FormulaSession, is_failure


class FormulaCheckFailedError(AssertionError):
    """A ``%%formula strict`` cell whose check failed; its message is the block's headline."""


def block_page(header: str, latex: str, earlier: str, body: str) -> tuple[list[str], int]:
    """A one-block page for the cell, and the line offset that makes the code's lines the
    cell's (its first line is the ``%%formula`` line, so the code starts on line 2)."""
    formula = latex.strip() or "?"
    off = "" if latex.strip() else ' formula="off"'
    code = (earlier + "\n\n" if earlier else "") + body
    lines = [f"```formula {header}{off}", formula, "```", "", "```python", *code.split("\n"), "```"]
    before = earlier.count("\n") + 2 if earlier else 0  # the earlier cells' lines come first
    return lines, -(4 + before)


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

    def __call__(self, line: str, cell: str | None = None) -> CheckResult | None:
        """Run ``cell`` in the kernel, then check it; show its card. ``None``: the kernel
        raised, and showed why, as it does for any cell. As a line magic (``%formula … entry=
        "name"``) there is no code of its own: it checks what earlier cells defined."""
        cell = cell or ""
        if cell.strip():
            ran = self.shell.run_cell(cell, store_history=False)
            if not ran.success:
                return None
        header, latex, strict = split_magic_options(line)
        result = self.check(header, latex, cell)
        self.show(result, latex)
        if strict and is_failure(result, self.options.fail_on):
            raise FormulaCheckFailedError(result.headline())
        return result

    def check(self, header: str, latex: str, cell: str) -> CheckResult:
        """The cell's result, as a page block's would be."""
        earlier = definitions(self._earlier_cells())
        lines, offset = block_page(header, latex, earlier, cell)
        name = self._cell_name()
        blocks = page_blocks(lines, page=name, line_offset=offset, settings=self.session.settings)
        if not blocks:
            raise FormulaCheckError(f"{name}: the %%formula cell could not be read")
        (block,) = blocks
        [result] = self.session.answers_for([block])
        assert isinstance(result, CheckResult)
        return dataclasses.replace(result, location=Location(name, 1))

    def show(self, result: CheckResult, latex: str) -> None:
        """The card under the cell, self-contained: its style and images are in the output."""
        from IPython import display as shown

        if latex.strip():
            shown.display(shown.Math(latex))  # type: ignore[no-untyped-call]
        style = f"<style>{STYLESHEET.read_text(encoding='utf-8')}</style>"
        shown.display(shown.HTML(style + self.session.card(result, None)))  # type: ignore[no-untyped-call]

    def _earlier_cells(self) -> list[str]:
        """The cells run before this one, as Python (a ``%%formula`` cell's code included)."""
        raw: list[str] = list(self.shell.history_manager.input_hist_raw)[1:-1]
        cells = []
        for text in raw:
            code = text
            if text.lstrip().startswith("%%formula"):  # its code; a %formula line is no code
                code = text.lstrip().split("\n", 1)[1] if "\n" in text else ""
            cells.append(self.shell.transform_cell(code))
        return cells

    def _cell_name(self) -> str:
        """``In [7]``: the number Jupyter shows beside the cell being run."""
        return f"In [{len(self.shell.history_manager.input_hist_raw) - 1}]"


def load_ipython_extension(shell: Any) -> None:
    """``%load_ext formula_check``: register ``%%formula``."""
    magic = FormulaMagic(shell)
    shell.register_magic_function(magic, magic_kind="line_cell", magic_name="formula")
