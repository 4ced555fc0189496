"""One exception family. Each error knows where it happened, so every face can say page:line."""

from __future__ import annotations

from .model import Location


class FormulaCheckError(Exception):
    """Base of every error the checker raises on purpose."""

    def __init__(self, message: str, location: Location | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.location = location

    def __str__(self) -> str:
        return f"{self.location}: {self.message}" if self.location else self.message


class SpecError(FormulaCheckError):
    """A block header, option or page default is malformed or unknown."""


class OracleError(FormulaCheckError):
    """An oracle is unknown, cannot be imported, or was called with unusable arguments."""


class SnippetError(FormulaCheckError):
    """The snippet cannot be found or read (missing file, path outside the project, ...)."""


class WorkerError(FormulaCheckError):
    """The worker process could not be started or speaks an unknown protocol."""


class MissingTensorFlowError(WorkerError):
    """TensorFlow is not importable by the worker's interpreter."""

    def __init__(self, python: str) -> None:
        super().__init__(
            f"TensorFlow is not installed for {python}. Install it with "
            "`pip install 'mkdocs-formula-check[cpu]'` (or `[gpu]`), or use the "
            "TensorFlow you already have."
        )
