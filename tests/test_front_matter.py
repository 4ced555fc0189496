"""Front matter read without MkDocs, exactly as MkDocs reads it."""

from __future__ import annotations

import pytest
from mkdocs.utils.meta import get_data

from formula_check.pages.front_matter import front_matter, split_front_matter

PAGES = [
    "",
    "# Title\n\ntext\n",
    "---\ntitle: T\n---\n\n# Body\n",
    "---\ntitle: T\nformula_check:\n  seed: 3\n...\n# Body\n",
    "---  \ntitle: T\n--- \t\n\n\n# Body\n",
    "---\n- a list\n---\n# Body\n",
    "---\njust text\n---\n# Body\n",
    "---\nformula_check:\n\tseed: 3\n---\n# Body\n",  # a tab: not YAML
    "---\ntitle: [unclosed\n---\n# Body\n",
    "---\ntitle: T\n# never closed\n",
    "---\n---\n# Body\n",
    "---\r\ntitle: T\r\n---\r\n# Body\r\n",
    "Title: My page\nAuthors: A\n    B\n\tC\n\n# Body\n",
    "title: one\nTITLE: two\n\nbody\n",
    "Key: v\r\nmore text\r\n\r\nbody\r\n",
    "    indented: no key\n\nbody\n",
    "\n---\ntitle: T\n---\nbody\n",
    "a_b-c: 1\n   spaced: 2\n\n",
    "---\n\n---\n\n",
]


@pytest.mark.parametrize("page", PAGES)
def test_split_front_matter_is_mkdocs_get_data(page: str) -> None:
    assert split_front_matter(page) == get_data(page)


@pytest.mark.parametrize(
    ("lines", "expected"),
    [
        (["---", "title: T", "---", "body"], {"title": "T"}),
        (["---", "- a", "---"], None),
        (["---", "a: [", "---"], None),
        (["title: T", "", "body"], None),
        (["---", "title: T"], None),
    ],
)
def test_front_matter_of_plain_markdown(lines: list[str], expected: object) -> None:
    assert front_matter(lines) == expected
