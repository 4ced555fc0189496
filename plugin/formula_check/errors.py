"""One exception family. Each error knows where it happened, so every face can say page:line."""

from __future__ import annotations

from formula_check.model import Location

MESSAGE_LIMIT = 2_000
"""The most characters of an error message the checker writes: it may quote what a page holds
(a header value, a formula's name), and a log line or a card must stay readable."""


def capped(message: str, limit: int = MESSAGE_LIMIT) -> str:
    """``message``, or its first ``limit`` characters and a mark saying how many were cut."""
    if len(message) <= limit:
        return message
    return f"{message[:limit]}… ({len(message) - limit:,} more characters)"


class FormulaCheckError(Exception):
    """Base of every error the checker raises on purpose; its message is :func:`capped`."""

    def __init__(self, message: str, location: Location | None = None) -> None:
        message = capped(message)
        super().__init__(message)
        self.message = message
        self.location = location

    def __str__(self) -> str:
        return f"{self.location}: {self.message}" if self.location else self.message


class SpecError(FormulaCheckError):
    """A block header, option or page default is malformed or unknown."""


class OracleError(FormulaCheckError):
    """An oracle is unknown, cannot be imported, or was called with unusable arguments."""


class PageError(FormulaCheckError):
    """A page cannot be read as text (it is not UTF-8); its blocks are read all the same."""


class SnippetError(FormulaCheckError):
    """The snippet cannot be found or read (missing file, path outside the project, ...)."""


class WorkerError(FormulaCheckError):
    """The worker process could not be started or speaks an unknown protocol."""


class MissingTensorFlowError(WorkerError):
    """TensorFlow is not importable by the worker's interpreter."""

    def __init__(self, python: str) -> None:
        super().__init__(
            f"TensorFlow is not installed for {python}. Install it there with "
            "`pip install tensorflow-cpu` (or `pip install 'tensorflow[and-cuda]'` for a GPU, "
            "as the package's cpu and gpu extras do), or use the TensorFlow you already have."
        )
