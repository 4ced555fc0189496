"""The ways a formula can fail to become a checked function, each with its own remedy."""

from __future__ import annotations

from formula_check.errors import FormulaCheckError

NOT_EXECUTABLE = "formula not checked"
CARET_WINDOW = 60


class LatexError(FormulaCheckError):
    """The formula (or a declaration) is wrong at ``column``: a 0-based offset into ``source``."""

    def __init__(self, message: str, source: str, column: int) -> None:
        super().__init__(message)
        self.source = source
        self.column = max(0, min(column, len(source)))

    def caret(self) -> str:
        """The source line holding the column, and a ``^`` under it; of a long line, only
        the :data:`CARET_WINDOW` characters either side of the column, ``…`` marking a cut."""
        start = self.source.rfind("\n", 0, self.column) + 1
        end = self.source.find("\n", self.column)
        end = len(self.source) if end < 0 else end
        left = max(start, self.column - CARET_WINDOW)
        right = min(end, self.column + CARET_WINDOW)
        before = "…" if left > start else ""
        after = "…" if right < end else ""
        line = f"{before}{self.source[left:right]}{after}"
        return f"{line}\n{' ' * (len(before) + self.column - left)}^"

    def __str__(self) -> str:
        return f"column {self.column + 1}: {self.message}"


class UnreadableLatexError(LatexError):
    r"""LaTeX the compiler's grammar cannot read (math inside ``\text{...}``, ``:=``, an
    unclosed brace): like :class:`NotExecutable`, the formula is not checked. A formula read
    whose names or shapes do not fit is a plain :class:`LatexError`, and fails its block."""


class NotExecutable(FormulaCheckError):  # noqa: N818  (the outcome's name, not a fault)
    """The formula uses LaTeX outside the executable subset, or is too long to check: it is
    "formula not checked", and only code and oracle are compared."""

    def __init__(self, reason: str) -> None:
        super().__init__(f"{NOT_EXECUTABLE}: {reason}")
        self.reason = reason


class EvaluationError(FormulaCheckError):
    """The compiled formula cannot run on the arrays it was given (missing or misshapen)."""
