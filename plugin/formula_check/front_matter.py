"""A page's front matter, read as MkDocs reads it, without MkDocs.

The CLI and pytest plan a page's blocks from its source file before (or without) a build;
the lines they report must be the ones the built page has. :func:`split_front_matter` follows
MkDocs' ``mkdocs.utils.meta.get_data`` (MkDocs 1.6): YAML between a first line ``---`` and a
closing ``---`` or ``...``, or else MultiMarkdown-style ``key: value`` lines up to the first
blank one.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

import yaml

try:  # the loader MkDocs uses: the C one where PyYAML has it
    from yaml import CSafeLoader as _SafeLoader
except ImportError:  # pragma: no cover
    from yaml import SafeLoader as _SafeLoader

_YAML_BLOCK = re.compile(r"^-{3}[ \t]*\n(.*?\n)(?:\.{3}|-{3})[ \t]*\n", re.UNICODE | re.DOTALL)
_META_KEY = re.compile(r"^[ ]{0,3}(?P<key>[A-Za-z0-9_-]+):\s*(?P<value>.*)")
_META_MORE = re.compile(r"^([ ]{4}|\t)(\s*)(?P<value>.*)")


def split_front_matter(doc: str) -> tuple[str, dict[str, Any]]:
    """``doc`` without its front matter, and what the front matter says (``{}``: none).

    YAML that does not parse, or is not a mapping, stays in the text, as MkDocs keeps it
    (:func:`front_matter_problem` says why, when it held our defaults)."""
    found = _YAML_BLOCK.match(doc)
    if found:
        try:
            data = yaml.load(found.group(1), _SafeLoader)
        except Exception:  # as MkDocs: YAML it cannot read stays page text
            return doc, {}
        if not isinstance(data, dict):
            return doc, {}
        return doc[found.end() :].lstrip("\n"), data
    return _split_multimarkdown(doc)


def _split_multimarkdown(doc: str) -> tuple[str, dict[str, Any]]:
    """``Key: value`` lines (a line indented four spaces or a tab continues the value)."""
    data: dict[str, Any] = {}
    lines = doc.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    key = None
    while lines:
        line = lines.pop(0)
        if line.strip() == "":
            break
        if first := _META_KEY.match(line):
            key = first.group("key").lower().strip()
            value = first.group("value").strip()
            data[key] = f"{data[key]} {value}" if key in data else value
            continue
        more = _META_MORE.match(line)
        if more and key:
            data[key] += " {}".format(more.group("value").strip())
            continue
        lines.insert(0, line)
        break
    return "\n".join(lines).lstrip("\n"), data


def front_matter_lines(raw: str, markdown: str) -> int:
    """How many lines MkDocs stripped from the top of ``raw`` to get ``markdown``."""
    if not markdown or not raw.endswith(markdown):
        return 0 if not markdown else raw.count("\n") - markdown.count("\n")
    return raw[: len(raw) - len(markdown)].count("\n")


_FRONT_MATTER_END = frozenset({"---", "..."})


def front_matter_text(lines: Sequence[str]) -> str | None:
    """The YAML between a page's opening ``---`` and its closing ``---`` or ``...``."""
    if not lines or lines[0].strip() != "---":
        return None
    end = next((i for i in range(1, len(lines)) if lines[i].strip() in _FRONT_MATTER_END), None)
    return None if end is None else "\n".join(lines[1:end])


def front_matter(lines: Sequence[str]) -> dict[str, Any] | None:
    """YAML front matter at the top of ``lines`` (plain Markdown keeps it in the text), or
    None when there is none, or it is not a mapping, or not YAML (the blocks say so if it held
    their defaults: :func:`front_matter_problem`)."""
    text = front_matter_text(lines)
    if text is None:
        return None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError:
        return None
    return data if isinstance(data, dict) else None


_DEFAULTS_KEY = re.compile(r"^formula_check[ \t]*:", re.MULTILINE)


def front_matter_problem(lines: Sequence[str]) -> str:
    """Why front matter that sets ``formula_check`` defaults cannot be read, or nothing.

    MkDocs keeps front matter it cannot parse as page text, silently: the page's defaults
    would be dropped and its blocks checked without them."""
    text = front_matter_text(lines)
    if text is None or not _DEFAULTS_KEY.search(text):
        return ""  # not front matter of ours, or two rules around prose
    try:
        yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = mark.line + 2 if mark is not None else 1  # below the opening ---
        what = getattr(exc, "problem", None) or str(exc).split("\n")[0]
        return f"not valid YAML at line {line} ({what}), so none of its defaults apply"
    return ""
