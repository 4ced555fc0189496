"""The "Open as notebook" link and the ``.ipynb`` behind it, for the pages that ask for one
(the site's ``notebooks:`` option, a page's ``formula_check_notebook:`` front matter)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from html import escape
from pathlib import Path
from typing import Any
from urllib.parse import quote

from formula_check.errors import FormulaCheckError, SpecError
from formula_check.faces.mkdocs_plugin import site
from formula_check.model import Location
from formula_check.pages.fence_scan import find_formulas
from formula_check.project.notebook_export import notebook_name, page_notebook
from formula_check.render.labels import Labels

PAGE_KEY = "formula_check_notebook"
"""The front-matter key with which a page turns its notebook on or off."""


@dataclass
class PageNotebooks:
    """The notebooks of one build, by the folder of the page's HTML."""

    enabled: bool
    written: dict[str, tuple[str, str]] = field(default_factory=dict)
    """Page source path -> (notebook path in the site, notebook text)."""
    _shipped: tuple[int, frozenset[str]] = (0, frozenset())
    """The site paths of the build's files (``id`` of its ``Files``, the paths)."""

    def wanted(self, meta: Mapping[str, Any], page: str) -> bool:
        """Whether ``page`` gets a notebook: its own front matter, else the site's option."""
        value = meta.get(PAGE_KEY, self.enabled)
        if not isinstance(value, bool):
            raise SpecError(
                f"front matter {PAGE_KEY!r} must be true or false, not {value!r}",
                Location(page, 1),
            )
        return value

    def add(
        self,
        markdown: str,
        *,
        page: str,
        dest: str,
        meta: Mapping[str, Any],
        files: Iterable[Any] = (),
    ) -> None:
        """Make the page's notebook, if it has formula blocks and wants one. A front-matter
        value that is not a boolean is a :class:`SpecError` at the page's first line, a
        missing nbformat a :class:`FormulaCheckError`: the page is built without a link.
        ``files``: the build's files (MkDocs' ``Files``); a notebook the docs ship where the
        page's would go is kept, and the page's is named ``<stem>.formula.ipynb``."""
        self.written.pop(page, None)
        if not self.wanted(meta, page) or not find_formulas(markdown.split("\n")):
            return
        try:
            text = page_notebook(markdown, page=page, meta=meta)
        except ImportError as exc:
            raise FormulaCheckError(
                f"'Open as notebook' links need nbformat ({exc.name} is not "
                "installed): pip install 'mkdocs-formula-check[notebook]', or set notebooks: "
                "false"
            ) from None
        folder = dest.replace("\\", "/").rpartition("/")[0]
        name = notebook_name(page)
        path = f"{folder}/{name}" if folder else name
        if path in self._shipped_paths(files):
            name = name.removesuffix(".ipynb") + ".formula.ipynb"
            site.log.info(
                f"{page}: its notebook is {name}, not {path.rpartition('/')[2]}: the docs "
                f"ship a file {path} of their own, which is kept"
            )
            path = f"{folder}/{name}" if folder else name
        self.written[page] = (path, text)

    def _shipped_paths(self, files: Iterable[Any]) -> frozenset[str]:
        """The site paths of ``files``, kept for the build (its pages share one ``Files``)."""
        if self._shipped[0] != id(files):
            paths = frozenset(str(file.dest_uri).replace("\\", "/") for file in files)
            self._shipped = (id(files), paths)
        return self._shipped[1]

    def link(self, page: str, labels: Labels) -> str:
        """The link's HTML at the top of the page, or nothing."""
        if page not in self.written:
            return ""
        name = self.written[page][0].rpartition("/")[2]
        return (
            f'<p class="fc-notebook"><a href="{escape(quote(name))}" download '
            f'title="{escape(labels.open_notebook_title)}">{escape(labels.open_notebook)}</a></p>\n'
        )

    def write(self, site_dir: Path) -> None:
        """Write every notebook of the build into the site."""
        for path, text in self.written.values():
            target = site_dir / path
            target.parent.mkdir(parents=True, exist_ok=True)
            if not target.exists() or target.read_text(encoding="utf-8") != text:
                target.write_text(text, encoding="utf-8", newline="\n")
