"""The notebook pages of a site rendered with mkdocs-jupyter: their blocks, and their cards.

mkdocs-jupyter makes each ``.ipynb`` file of the docs a page and renders it with nbconvert
instead of Markdown, so the ``formula`` fence of the extension never sees its cells. The
plugin instead reads such a page's blocks from the notebook file, as the CLI and pytest do
(:func:`formula_check.pages.notebooks.notebook_blocks`), checks them in the site's batch, and puts
each card into the HTML that mkdocs-jupyter made. mkdocs-jupyter is optional and never
imported: it is known by its name in ``plugins:``, and its pages by what MkDocs says of them.

A card is placed by the cell's id, which nbconvert writes on each cell's element as
``id="cell-id=<id>"`` (cells have ids from nbformat 4.5 on):

* a Markdown cell that shows each of its ``formula`` fences as nbconvert renders a fenced
  code block (``<pre><code class="language-formula">``) gets each card right under its
  formula; one showing another number gets its cards right after the cell;
* a ``%%formula`` cell gets its card right after the cell;
* a card the magic showed when the notebook was run, saved in its outputs, is taken out: it
  is that run's verdict, and carries the id of the build's own card;
* a block whose cell is not on the page (an older notebook without cell ids, a cell that a
  tag removed) gets its card at the end of the page, and :meth:`Placed.note` says which.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field

from formula_check.errors import PageError
from formula_check.pages.blocks import PageBlock, Settings
from formula_check.pages.notebooks import notebook_blocks, read_notebook
from formula_check.render import Labels
from formula_check.session import FormulaSession

JUPYTER_PLUGIN = "mkdocs-jupyter"
"""The name mkdocs-jupyter registers under in ``plugins:``."""

_FORMULA_CODE = re.compile(
    r"""<pre\b[^>]*>\s*<code\b[^>]*\bclass=["'][^"']*\blanguage-formula\b[^>]*>.*?</code>\s*</pre>""",
    re.S,
)


@dataclass(frozen=True)
class NotebookPage:
    """One notebook page: its name in messages, its blocks, and its cells' kinds and ids."""

    path: str
    blocks: tuple[PageBlock, ...]
    cells: tuple[tuple[str, str], ...] = ()
    """``(cell_type, id)`` of each cell, from the top (an id is empty before nbformat 4.5)."""

    def cell(self, number: int | None) -> tuple[str, str]:
        """The kind and id of cell ``number`` (from 1); empty for a block of no cell."""
        if number is None or not 0 < number <= len(self.cells):
            return "", ""
        return self.cells[number - 1]


@dataclass(frozen=True)
class Placed:
    """A notebook page's HTML with its cards, and the cells whose cards went to its end."""

    html: str
    at_the_end: tuple[int, ...] = ()

    def note(self, path: str) -> str:
        """The INFO line about cards that are not next to their cells (empty when none)."""
        if not self.at_the_end:
            return ""
        cells = ", ".join(str(cell) for cell in self.at_the_end)
        noun = "cell" if len(self.at_the_end) == 1 else "cells"
        return (
            f"{path}: the cards of {noun} {cells} are at the end of the page: mkdocs-jupyter's "
            "HTML does not show the cell with its id (a notebook saved before nbformat 4.5 has "
            "no cell ids; a tag may have removed the cell)"
        )


def renders_notebooks(plugin_names: Iterable[str]) -> bool:
    """Whether mkdocs-jupyter is one of the site's plugins."""
    return JUPYTER_PLUGIN in plugin_names


def read_page(data: bytes, path: str, settings: Settings) -> NotebookPage:
    """The blocks and cells of the notebook file ``data``, named ``path`` in messages."""
    blocks = tuple(notebook_blocks(data, notebook=path, settings=settings))
    try:
        cells = read_notebook(data, path).cells
    except PageError:  # its one block already says why it is no notebook
        return NotebookPage(path, blocks)
    kinds = tuple((str(cell.get("cell_type", "")), str(cell.get("id", ""))) for cell in cells)
    return NotebookPage(path, blocks, kinds)


@dataclass
class NotebookPages:
    """The notebook pages of one build, by their name in messages."""

    enabled: bool
    """mkdocs-jupyter renders the site's notebooks: ``.ipynb`` pages are ours to read."""
    pages: dict[str, NotebookPage] = field(default_factory=dict)

    def is_notebook(self, src_uri: str, *, documentation_page: bool) -> bool:
        """Whether a file is a notebook that mkdocs-jupyter renders as a page."""
        return self.enabled and documentation_page and src_uri.lower().endswith(".ipynb")

    def begin_build(self) -> None:
        """A new build: the pages of the last one are forgotten."""
        self.pages.clear()

    def read(self, data: bytes, path: str, settings: Settings) -> list[PageBlock]:
        """The page's blocks, kept for its cards."""
        page = self.pages[path] = read_page(data, path, settings)
        return list(page.blocks)

    def holds(self, path: str) -> bool:
        """Whether ``path`` is a notebook page of this build."""
        return path in self.pages

    def with_cards(self, html: str, path: str, session: FormulaSession, labels: Labels) -> Placed:
        """The page's HTML with a card (or a placeholder, while the check runs) per block.
        The session must have entered the page: its cards' figure links are relative to it."""
        page = self.pages[path]
        answers = session.answers_for(page.blocks)
        cards = [
            session.placeholder(answer, block, labels)
            if isinstance(answer, Future)
            else session.card(answer, block, labels)
            for block, answer in zip(page.blocks, answers, strict=True)
        ]
        return place_cards(html, page, cards)


def place_cards(html: str, page: NotebookPage, cards: Sequence[str]) -> Placed:
    """``html`` with ``cards`` (one per block of ``page``, in order) placed as the module
    docstring says; the cards saved in the notebook's outputs are taken out."""
    html = without_saved_cards(html)
    by_cell: dict[int | None, list[str]] = {}
    for block, card in zip(page.blocks, cards, strict=True):
        by_cell.setdefault(block.location.cell, []).append(card)
    inserts: list[tuple[int, str]] = []
    at_the_end: list[int] = []
    for number, cell_cards in by_cell.items():
        kind, cell_id = page.cell(number)
        span = _element_span(html, f"cell-id={cell_id}") if cell_id else None
        if span is None:
            inserts.extend((len(html), card) for card in cell_cards)
            if number is not None:
                at_the_end.append(number)
            continue
        formulas = list(_FORMULA_CODE.finditer(html, span[0], span[1]))
        if kind == "markdown" and len(formulas) == len(cell_cards):
            inserts.extend((f.end(), card) for f, card in zip(formulas, cell_cards, strict=True))
        else:
            inserts.extend((span[1], card) for card in cell_cards)
    return Placed(_inserted(html, inserts), tuple(at_the_end))


_SAVED_CARD = re.compile(
    r"""(?:<style>[^<]*</style>\s*)?<(?P<tag>div)\b[^>]*\bclass=["'][^"']*\bfc-card\b[^>]*>"""
)
"""A card the ``%%formula`` magic showed, saved in the notebook's outputs (its stylesheet,
written just before it, goes with it)."""


def without_saved_cards(html: str) -> str:
    """``html`` without the cards saved in the notebook's outputs: they are the verdicts of
    when the notebook was last run, carry the ids of the build's own cards, and would stand
    beside them."""
    position = 0
    while (saved := _SAVED_CARD.search(html, position)) is not None:
        end = _closing(html, saved)
        if end is None:
            return html  # never closed: nothing to cut that can be trusted
        html, position = html[: saved.start()] + html[end:], saved.start()
    return html


def _element_span(html: str, element_id: str) -> tuple[int, int] | None:
    """Where the element with id ``element_id`` starts and ends (after its closing tag)."""
    opening = re.search(
        rf"""<(?P<tag>[a-zA-Z][\w-]*)\b[^>]*\sid=["']{re.escape(element_id)}["'][^>]*>""", html
    )
    if opening is None:
        return None
    end = _closing(html, opening)
    return None if end is None else (opening.start(), end)


def _closing(html: str, opening: re.Match[str]) -> int | None:
    """The offset after the tag that closes the element ``opening`` starts (``tag`` group),
    counting nested elements of its kind; an HTML comment's tags are no elements."""
    depth = 1
    tags = rf"<!--.*?-->|<(/?){opening['tag']}\b[^>]*>"
    for tag in re.finditer(tags, html[opening.end() :], re.S):
        if tag[0].startswith("<!--"):
            continue
        depth += -1 if tag[1] else 1
        if depth == 0:
            return opening.end() + tag.end()
    return None  # never closed: no place to trust


def _inserted(html: str, inserts: Sequence[tuple[int, str]]) -> str:
    """``html`` with each ``(offset, text)`` inserted, texts at one offset kept in order."""
    pieces: list[str] = []
    last = 0
    for offset, text in sorted(inserts, key=lambda insert: insert[0]):
        pieces += [html[last:offset], "\n", text, "\n"]
        last = offset
    return "".join([*pieces, html[last:]])
