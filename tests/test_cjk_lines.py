"""The docs' CJK hook: a wrapped Chinese sentence shows no space where its source line broke."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType, SimpleNamespace

import markdown
import pytest

HOOK = Path(__file__).resolve().parent.parent / "docs" / "hooks" / "cjk_lines.py"


def load_hook() -> ModuleType:
    spec = importlib.util.spec_from_file_location("cjk_lines_hook", HOOK)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


hook = load_hook()


def page(**meta: object) -> SimpleNamespace:
    return SimpleNamespace(meta=meta)


def test_a_break_between_two_chinese_characters_goes() -> None:
    assert hook.join_cjk_lines("<p>每个公式块\n都配有代码，\n  并与参考实现比较。</p>") == (
        "<p>每个公式块都配有代码，并与参考实现比较。</p>"
    )


def test_a_break_next_to_latin_text_or_math_stays_a_space() -> None:
    html = '<p>使用 float64\n精度的 NumPy；宽度是\n<span class="arithmatex">\\(d_k\\)</span></p>'
    assert hook.join_cjk_lines(html) == html


def test_links_and_emphasis_around_the_break_do_not_stop_the_join() -> None:
    html = '<p>见英文的\n<a href="../authoring/">编写公式块</a>，\n<strong>拆分</strong>\n把张量变形</p>'
    assert hook.join_cjk_lines(html) == (
        '<p>见英文的<a href="../authoring/">编写公式块</a>，<strong>拆分</strong>把张量变形</p>'
    )


def test_code_and_display_math_keep_their_lines() -> None:
    html = (
        "<pre><code># 注释\n# 注释\n</code></pre>\n"
        "<p><code>中\n文</code></p>\n"
        '<div class="arithmatex">\\[\n\\text{中}\n\\text{文}\n\\]</div>\n'
        "<p>之后\n的文字</p>"
    )
    assert hook.join_cjk_lines(html) == html.replace("之后\n的", "之后的")


def test_breaks_between_blocks_stay() -> None:
    html = "<p>第一段。</p>\n<p>第二段。</p>\n<ul>\n<li>一</li>\n<li>二</li>\n</ul>"
    assert hook.join_cjk_lines(html) == html


@pytest.mark.parametrize(
    ("meta", "chinese"),
    [
        ({"language": "zh"}, True),
        ({"language": "zh-CN"}, True),
        ({"language": "zh_TW"}, True),
        ({"language": "en"}, False),
        ({"language": "zhx"}, False),
        ({}, False),
    ],
)
def test_only_pages_that_ask_for_chinese_are_joined(meta: dict[str, str], chinese: bool) -> None:
    html = "<p>中文\n句子</p>"
    joined = hook.on_page_content(html, page=page(**meta), config={}, files=[])
    assert (joined == "<p>中文句子</p>") is chinese


def test_a_wrapped_markdown_paragraph_renders_without_the_gap() -> None:
    source = (
        "页面里的每个公式块\n"
        "都配有一段实现它的 TensorFlow 代码，详见\n"
        "[编写公式块](authoring.md)。\n\n"
        "- 列表项的第一行，\n"
        "  接着第二行。\n"
    )
    html = hook.on_page_content(
        markdown.markdown(source), page=page(language="zh"), config={}, files=[]
    )
    assert "每个公式块都配有一段实现它的 TensorFlow 代码，详见<a" in html
    assert "第一行，接着第二行。" in html


def test_the_markdown_is_left_alone_so_formula_blocks_keep_their_lines() -> None:
    # The build, the CLI and the cache locate a block by its line in the page's Markdown.
    assert not hasattr(hook, "on_page_markdown")
