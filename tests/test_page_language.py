"""Per-page card language: front matter ``language: zh`` gives a page Chinese cards."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import markdown
import pytest

from formula_check.pages.blocks import Settings
from formula_check.render import labels_for
from formula_check.session import DataUriImages, FormulaSession
from formula_check.session.engine import Engine
from support import shared_engine

BLOCK = """\
```formula id="sm" oracle="softmax" timing="off" heatmaps="none"
\\text{softmax}(x)_i = \\frac{e^{x_i}}{\\sum_j e^{x_j}}
```

```python
import tensorflow as tf


def softmax(x):
    return tf.nn.softmax(x, axis=-1)
```
"""


def session(site_language: str) -> FormulaSession:
    return FormulaSession(
        settings=Settings(Path("."), 60.0, False),
        labels=labels_for(site_language),
        images=DataUriImages(),
    )


@pytest.mark.parametrize(
    ("meta", "expected"),
    [
        (None, "en"),
        ({}, "en"),
        ({"title": "Attention"}, "en"),
        ({"language": "zh"}, "zh"),
        ({"language": "zh-CN"}, "zh"),
        ({"language": "en"}, "en"),
        ({"language": ""}, "en"),
        ({"language": 3}, "en"),
    ],
)
def test_front_matter_language_picks_the_labels(meta: Any, expected: str) -> None:
    assert session("en").labels_for_page(meta).language == expected


def test_a_page_without_language_keeps_the_site_language() -> None:
    assert session("zh").labels_for_page({"title": "注意力"}).language == "zh"
    assert session("zh").labels_for_page({"language": "en"}).language == "en"


def render(text: str, engine: Engine, root: Path) -> str:
    configs = {
        "pymdownx.arithmatex": {"generic": True},
        "formula_check": {"engine": engine, "root": str(root), "page": "docs/page.md"},
    }
    extensions = ["pymdownx.superfences", "pymdownx.arithmatex", "formula_check"]
    return markdown.Markdown(extensions=extensions, extension_configs=configs).convert(text)


def badge(html: str) -> str:
    found = re.search(r'<span class="fc-badge">([^<]*)</span>', html)
    assert found is not None, html
    return found.group(1)


@pytest.mark.tf
def test_chinese_page_gets_chinese_cards(tmp_path: Path) -> None:
    html = render("---\nlanguage: zh\n---\n\n" + BLOCK, shared_engine(), tmp_path)
    assert badge(html) == "已验证"
    assert "<summary>张量形状</summary>" in html
    assert 'class="fc-where">docs/page.md:5<' in html  # front matter lines still counted


@pytest.mark.tf
def test_page_without_language_gets_english_cards(tmp_path: Path) -> None:
    html = render("---\ntitle: Softmax\n---\n\n" + BLOCK, shared_engine(), tmp_path)
    assert badge(html) == "verified"
    assert "<summary>Shapes</summary>" in html


@pytest.mark.tf
def test_language_does_not_leak_to_the_next_page(tmp_path: Path) -> None:
    configs = {
        "pymdownx.arithmatex": {"generic": True},
        "formula_check": {"engine": shared_engine(), "root": str(tmp_path), "page": "docs/page.md"},
    }
    md = markdown.Markdown(
        extensions=["pymdownx.superfences", "pymdownx.arithmatex", "formula_check"],
        extension_configs=configs,
    )
    assert badge(md.convert("---\nlanguage: zh\n---\n\n" + BLOCK)) == "已验证"
    md.reset()
    assert badge(md.convert(BLOCK)) == "verified"
