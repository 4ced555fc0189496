"""The docs cannot contradict the oracle catalog: every builtin oracle is documented in
``docs/oracles.md`` and listed, with a link that lands on its section, in ``docs/zh/oracles.md``;
and no page says that an oracle the catalog has is missing (as ``existing-code.md`` once did of
additive attention and the learning-rate schedule)."""

from __future__ import annotations

import re
from pathlib import Path

import markdown
import pytest

from formula_check.oracles.catalog import BUILTINS

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
ENGLISH = DOCS / "oracles.md"
CHINESE = DOCS / "zh" / "oracles.md"

# Words a page uses to say the catalog lacks something. A paragraph that says one of them and
# names an oracle of the catalog (by name or by the title its docs give it) contradicts it.
_MISSING = re.compile(
    r"no (?:builtin|built-in) oracle|no oracle (?:for|states)|not in the catalog|"
    r"has no oracle|内置参考实现里没有|没有内置参考实现|目录里没有",
    re.IGNORECASE,
)


def _builtin_names() -> list[str]:
    """The catalog's own oracles, in its order: not the registry, where other tests of the same
    process register oracles of their own."""
    return [oracle.name for oracle in BUILTINS]


def _documented_names(text: str) -> set[str]:
    """Oracle names an English section heading or a catalog table row gives in code."""
    headings = re.findall(r"^#{2,3} [^\n]*", text, re.M)
    rows = re.findall(r"^\| `([A-Za-z_]\w*)` \|", text, re.M)
    named = {name for heading in headings for name in re.findall(r"`([A-Za-z_]\w*)`", heading)}
    return named | set(rows)


def _english_titles(text: str) -> dict[str, str]:
    """Each oracle named alone in a heading, ``## Additive attention: `additive_attention```,
    with its title."""
    found = re.findall(r"^## ([^\n`:]+): `([A-Za-z_]\w*)`$", text, re.M)
    return {name: title.strip() for title, name in found}


def _chinese_rows(text: str) -> dict[str, tuple[str, str]]:
    """The Chinese catalog's rows: each oracle's Chinese title and the anchor its link names."""
    rows = re.findall(
        r"^\| `([A-Za-z_]\w*)` \| ([^|]+?) \| \[[^\]]+\]\(\.\./oracles\.md#([\w-]+)\) \|$",
        text,
        re.M,
    )
    return {name: (title, anchor) for name, title, anchor in rows}


def _heading_ids(text: str) -> set[str]:
    """The ids MkDocs gives the page's headings (the same toc slugs)."""
    html = markdown.markdown(text, extensions=["toc", "attr_list", "pymdownx.superfences"])
    return set(re.findall(r'<h[1-6] id="([^"]+)"', html))


def _paragraphs(path: Path) -> list[tuple[int, str]]:
    """A page's paragraphs and list items, each with the line it starts on."""
    found: list[tuple[int, str]] = []
    start, lines = 0, []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        item = re.match(r"\s*(?:[-*]|\d+\.) ", line)
        if not line.strip() or item:
            if lines:
                found.append((start, " ".join(lines)))
            start, lines = number, [line] if line.strip() else []
            continue
        if not lines:
            start = number
        lines.append(line.strip())
    if lines:
        found.append((start, " ".join(lines)))
    return found


def _contradictions(path: Path, names: dict[str, list[str]], root: Path = ROOT) -> list[str]:
    """Where ``path`` says an oracle of the catalog is missing: PAGE:LINE and the oracle."""
    said = []
    for line, paragraph in _paragraphs(path):
        if not _MISSING.search(paragraph):
            continue
        text = paragraph.lower().replace("-", " ")
        for name, words in names.items():
            if any(word.lower().replace("-", " ") in text for word in words):
                said.append(f"{path.relative_to(root)}:{line}: says {name} is missing")
    return said


def _catalog_words() -> dict[str, list[str]]:
    english = _english_titles(ENGLISH.read_text(encoding="utf-8"))
    chinese = _chinese_rows(CHINESE.read_text(encoding="utf-8"))
    return {
        name: [f"`{name}`", *([english[name]] if name in english else []), chinese[name][0]]
        for name in _builtin_names()
        if name in chinese
    }


def test_every_builtin_oracle_is_documented_in_english() -> None:
    documented = _documented_names(ENGLISH.read_text(encoding="utf-8"))
    assert [name for name in _builtin_names() if name not in documented] == []


def test_every_builtin_oracle_is_listed_in_chinese_with_a_link_that_lands() -> None:
    rows = _chinese_rows(CHINESE.read_text(encoding="utf-8"))
    assert list(rows) == _builtin_names(), "one row per builtin oracle, in the catalog's order"
    ids = _heading_ids(ENGLISH.read_text(encoding="utf-8"))
    assert {name: anchor for name, (_, anchor) in rows.items() if anchor not in ids} == {}
    for name, (_, anchor) in rows.items():
        if name in _english_titles(ENGLISH.read_text(encoding="utf-8")):
            assert anchor.endswith(name), f"{name} links to another oracle's section: {anchor}"


def test_no_page_says_an_oracle_of_the_catalog_is_missing() -> None:
    words = _catalog_words()
    pages = [ROOT / "README.md", *sorted(DOCS.rglob("*.md"))]
    said = [line for page in pages for line in _contradictions(page, words)]
    assert said == []


@pytest.mark.parametrize(
    "claim",
    [
        "- additive attention, and a learning-rate schedule, for which there is no builtin oracle",
        "- 加性注意力和学习率调度，内置参考实现里没有（可以自己写）。",
    ],
)
def test_a_page_saying_so_is_found(tmp_path: Path, claim: str) -> None:
    page = tmp_path / "page.md"
    page.write_text(f"# A page\n\nSome text.\n\n{claim}\n", encoding="utf-8")
    (said,) = {
        line.split(": says")[0] for line in _contradictions(page, _catalog_words(), tmp_path)
    }
    assert said.endswith("page.md:5")


def test_a_page_naming_an_oracle_that_does_not_exist_is_not_a_contradiction(
    tmp_path: Path,
) -> None:
    page = tmp_path / "page.md"
    page.write_text(
        "- rotary embeddings, for which there is no builtin oracle\n"
        "- additive attention: `additive_attention` states it\n",
        encoding="utf-8",
    )
    assert _contradictions(page, _catalog_words(), tmp_path) == []
