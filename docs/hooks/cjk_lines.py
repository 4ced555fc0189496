"""MkDocs hook: no stray space where a Chinese sentence was wrapped in the source.

A browser renders the line break inside a paragraph as a space. Between two words of English
that is right; between two Chinese characters it is a gap that does not belong there. Pages
whose front matter says ``language: zh`` (or ``zh-CN``, ``zh_TW``...) get every break that
sits between two CJK characters removed, so their Markdown can stay wrapped like the rest.

The join works on the page's HTML (``on_page_content``), not on its Markdown: a formula
block's line is where the build, the command line and the cache say it is, and removing lines
from the Markdown before it is converted would move every block below the join. A tag between
the two characters (a link, emphasis) does not stop the join. Code, preformatted text, scripts
and styles are left exactly as written; the formula cards are not in the HTML yet at this
point, and their display math is the one place besides code that keeps its breaks.
"""

from __future__ import annotations

import re
from typing import Any

_CJK = (
    "\u2e80-\u2fdf"  # radicals
    "\u3000-\u303f"  # CJK punctuation: 、。「」
    "\u3040-\u30ff"  # kana
    "\u3100-\u312f\u3190-\u31ff"  # bopomofo, kanbun, strokes
    "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"  # ideographs
    "\ufe30-\ufe4f\uff00-\uffef"  # vertical and full-width forms: ，；：（）
    "\u2014\u2018-\u201d\u2026"  # the dash, quotes and ellipsis Chinese text uses
)
# Inline tags only: a break next to a block tag (</p>, <li>) is not inside a sentence.
_INLINE_TAGS = r"(?:</?(?:a|abbr|b|del|em|i|ins|kbd|mark|s|small|span|strong|sub|sup|u)\b[^<>]*>)*"
_BREAK = re.compile(
    rf"(?P<before>[{_CJK}])(?P<tags_before>{_INLINE_TAGS})[ \t]*\n[ \t]*"
    rf"(?P<tags_after>{_INLINE_TAGS})(?=[{_CJK}])"
)
_KEPT = re.compile(
    r"<(?P<tag>pre|code|script|style|textarea)\b.*?</(?P=tag)>"
    r'|<div class="arithmatex[^"]*">.*?</div>',
    re.DOTALL | re.IGNORECASE,
)


def join_cjk_lines(html: str) -> str:
    """``html`` with the line breaks between two CJK characters removed, outside code."""
    pieces, start = [], 0
    for kept in _KEPT.finditer(html):
        pieces += [_join(html[start : kept.start()]), kept.group()]
        start = kept.end()
    pieces.append(_join(html[start:]))
    return "".join(pieces)


def _join(text: str) -> str:
    return _BREAK.sub(r"\g<before>\g<tags_before>\g<tags_after>", text)


def is_chinese(meta: dict[str, Any]) -> bool:
    """Whether a page's front matter asks for Chinese (``zh``, ``zh-CN``, ``zh_TW``...)."""
    language = str(meta.get("language") or "")
    return re.split(r"[-_]", language.strip().lower())[0] == "zh"


def on_page_content(html: str, *, page: Any, **kwargs: Any) -> str:
    """Join the wrapped lines of a Chinese page; leave every other page alone."""
    return join_cjk_lines(html) if is_chinese(page.meta) else html
