"""The page a card is drawn for, where its figures go, and which results fail a build."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from formula_check.render import Figure
from formula_check.results import CheckResult


@dataclass(frozen=True)
class PageContext:
    """The page being rendered.

    ``line_offset`` is how many lines were cut from the top of the file before Markdown saw it
    (MkDocs strips front matter). ``meta`` is the page's front matter; ``None`` means "read it
    from the text" (plain Markdown keeps it in). ``url`` is the page's URL in the site, used to
    make figure links relative.
    """

    path: str = "<page>"
    line_offset: int = 0
    meta: dict[str, Any] | None = None
    url: str = ""
    front_matter_error: str | None = None
    """Why front matter holding defaults could not be read, judged on the page's text before
    Markdown expanded its tabs (``None``: judge the lines Markdown gives)."""


class ImageSink(Protocol):
    """Stores a figure where the page can load it and returns the URL to use."""

    def url(self, figure: Figure, page: PageContext) -> str:
        """The URL of ``figure`` as seen from ``page``."""


class DataUriImages:
    """Figures inlined as ``data:`` URIs: nothing to copy, pages are self-contained."""

    def url(self, figure: Figure, page: PageContext) -> str:
        """The file's bytes as a base64 ``data:`` URI."""
        return figure.data_uri


class DirectoryImages:
    """Figures written to ``directory``; pages link to them under ``url_prefix``."""

    def __init__(self, directory: Path, url_prefix: str) -> None:
        self.directory = directory
        self.url_prefix = url_prefix.rstrip("/")

    def url(self, figure: Figure, page: PageContext) -> str:
        """Write the file (once) and return its URL."""
        name = figure.file_name
        target = self.directory / name
        if not target.exists():
            self.directory.mkdir(parents=True, exist_ok=True)
            target.write_bytes(figure.data)
        return f"{self.url_prefix}/{name}"


def is_failure(result: CheckResult, fail_on: frozenset[str] | set[str]) -> bool:
    """Should this result fail the build? A broken promise (``expect=``) always does."""
    if result.outcome_ok:
        return False
    if result.expected_failure:
        return True
    return result.status.value in fail_on
