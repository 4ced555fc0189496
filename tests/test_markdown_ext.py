"""The extension alone, under ``markdown.Markdown`` (no MkDocs): cards, math, lines, errors."""

from __future__ import annotations

import html
import re
from pathlib import Path
from typing import Any

import markdown
import pytest
from pymdownx.superfences import SuperFencesException

from fakes import FakeEngine, drift_on_axis_1
from formula_check.errors import FormulaCheckError
from formula_check.faces.markdown_ext import FormulaCheckExtension, display_math
from formula_check.pages.blocks import Settings
from formula_check.render import labels_for
from formula_check.session import DataUriImages, FormulaSession, PageContext
from formula_check.session.engine import Engine
from support import shared_engine

# The face's own behaviour is tested on a fake engine (no TensorFlow): a softmax over axis 1
# is the drift. The tests marked ``tf`` need real figures from a real check.

SOFTMAX = """\
```formula id="sm" oracle="softmax" timing="off"
\\sigma(x) < 1
```

```python
import tensorflow as tf


def softmax(x):
    return tf.nn.softmax(x, axis={axis})
```
"""


@pytest.fixture
def fake() -> FakeEngine:
    return FakeEngine(drift_on_axis_1)


def render(text: str, engine: Any, root: Path, **config: Any) -> str:
    extensions = [
        "pymdownx.superfences",
        "pymdownx.arithmatex",
        "pymdownx.highlight",
        "formula_check",
    ]
    configs = {
        "pymdownx.arithmatex": {"generic": True},
        "formula_check": {"engine": engine, "root": str(root), "page": "docs/page.md", **config},
    }
    return markdown.Markdown(extensions=extensions, extension_configs=configs).convert(text)


def card_of(html: str, block: str) -> str:
    match = re.search(
        rf'<div class="admonition [^"]*" id="fc-{re.escape(block)}".*?\n</div>', html, re.S
    )
    assert match is not None, html
    return match.group(0)


def test_verified_block_renders_math_card_and_code(fake: FakeEngine, tmp_path: Path) -> None:
    html = render(SOFTMAX.format(axis=-1), fake, tmp_path)
    assert html.startswith('<div class="arithmatex">\\[\n\\sigma(x) &lt; 1\n\\]</div>\n')
    card = card_of(html, "sm")
    assert 'data-fc-status="verified"' in card
    assert '<span class="fc-where">docs/page.md:1</span>' in card
    assert '<span class="kn">import</span>' in html  # the python fence still highlights


def test_checks_turned_off_render_each_formula_as_math_alone(tmp_path: Path) -> None:
    """``check=False`` runs nothing (no engine is ever asked for) and drops no formula: a
    malformed header or an unclosed fence still renders as math."""

    class NoEngine(Engine):
        def __init__(self) -> None:  # never started: any use of it would fail loudly
            pass

    page = (
        SOFTMAX.format(axis=0)
        + '\n```formula oracle="nope" dims="n=\n\\alpha + \\beta\n```\n'
        + "\n~~~formula\n\\gamma"
    )
    html = render(page, NoEngine(), tmp_path, check=False)
    assert "fc-card" not in html and "formula" not in html
    maths = re.findall(r'<div class="arithmatex fc-unchecked">\\\[\n(.*?)\n\\\]</div>', html, re.S)
    assert maths == ["\\sigma(x) &lt; 1", "\\alpha + \\beta", "\\gamma"]
    assert '<span class="kn">import</span>' in html


def _math_element(html_text: str) -> tuple[str, str]:
    """A display formula's element (tag and attributes) and its text as the browser reads it."""
    found = re.fullmatch(r'(<div class="[^"]*">)\\\[\n(.*)\n\\\]</div>', html_text, re.S)
    assert found, html_text
    return found[1], html.unescape(found[2])


def test_display_math_matches_arithmatex() -> None:
    """The element, its class and the formula's text are arithmatex's own. Whether a quote is
    written as ``&quot;`` differs between pymdown-extensions releases (12 writes it as it is,
    13 escapes it): the page's text is the same either way, and ours always escapes it."""
    latex = 'a < b & "c" > d'
    plain = markdown.Markdown(
        extensions=["pymdownx.arithmatex"],
        extension_configs={"pymdownx.arithmatex": {"generic": True}},
    ).convert(f"$$\n{latex}\n$$")
    ours = display_math(latex)
    assert _math_element(ours) == _math_element(plain) == ('<div class="arithmatex">', latex)
    assert "<" not in ours[len('<div class="arithmatex">') : -len("</div>")]
    assert '"c"' not in ours and "&amp;" in ours


@pytest.mark.tf
def test_mismatch_card_has_the_delta_figure_inline(tmp_path: Path) -> None:
    html = render(SOFTMAX.format(axis=1), shared_engine(), tmp_path)
    card = card_of(html, "sm")
    assert 'data-fc-status="mismatch"' in card
    assert '<img src="data:image/svg+xml;base64,' in card


def test_lines_count_front_matter_in_plain_markdown(fake: FakeEngine, tmp_path: Path) -> None:
    text = "---\ntitle: T\nformula_check:\n  seed: 2\n---\n\n" + SOFTMAX.format(axis=-1)
    html = render(text, fake, tmp_path)
    assert '<span class="fc-where">docs/page.md:7</span>' in card_of(html, "sm")


def test_lines_add_the_offset_mkdocs_stripped(fake: FakeEngine, tmp_path: Path) -> None:
    session = FormulaSession(
        settings=Settings(tmp_path),
        labels=labels_for("en"),
        images=DataUriImages(),
        engine=fake,
        page=PageContext("docs/fm.md", line_offset=5, meta={"formula_check": {"timing": False}}),
    )
    html = render("Intro\n\n" + SOFTMAX.format(axis=-1), fake, tmp_path, session=session)
    assert '<span class="fc-where">docs/fm.md:8</span>' in card_of(html, "sm")


def test_spec_errors_render_escaped_error_cards(fake: FakeEngine, tmp_path: Path) -> None:
    text = '```formula id="bad" oracle="<b>softmax</b>"\nx\n```\n\n```python\nf = 1\n```\n'
    html = render(text, fake, tmp_path)
    card = card_of(html, "bad")
    assert 'data-fc-status="error"' in card
    assert "unknown oracle &#x27;&lt;b&gt;softmax&lt;/b&gt;&#x27;" in card
    assert "<b>" not in html


def test_unknown_option_shows_did_you_mean(fake: FakeEngine, tmp_path: Path) -> None:
    text = '```formula id="t" oracle="softmax" atoll="1"\nx\n```\n\n```python\nf = 1\n```\n'
    card = card_of(render(text, fake, tmp_path), "t")
    assert "unknown option &#x27;atoll&#x27;; did you mean &#x27;atol&#x27;?" in card


def test_example_inside_a_longer_fence_is_left_alone(fake: FakeEngine, tmp_path: Path) -> None:
    text = '````markdown\n```formula oracle="softmax"\nx\n```\n````\n'
    html = render(text, fake, tmp_path)
    assert "fc-card" not in html
    assert "formula" in html


def test_a_commented_out_block_is_neither_checked_nor_carded(
    fake: FakeEngine, tmp_path: Path
) -> None:
    """SuperFences reads fences even inside an HTML comment: the block there, which the page
    does not show and the checker does not check, must not become a card either."""
    text = f"<!--\n{SOFTMAX.format(axis=1)}-->\n\n{SOFTMAX.format(axis=-1)}"
    html = render(text, fake, tmp_path)
    assert [spec.location.line for spec in fake.checked] == [15]
    assert html.count("fc-card") == 1 and "not found by formula_check" not in html


def test_fail_on_raises_superfences_exception(fake: FakeEngine, tmp_path: Path) -> None:
    with pytest.raises(SuperFencesException, match=r"docs/page.md:1 \[sm\]: mismatch: output"):
        render(SOFTMAX.format(axis=1), fake, tmp_path, fail_on=["mismatch"])


def test_the_formula_option_is_every_blocks_default(fake: FakeEngine, tmp_path: Path) -> None:
    """``formula="required"`` on the extension requires each block's formula, as the plugin's
    ``formula: required`` does; a block's own ``formula=`` wins, and a bad value is refused."""
    text = SOFTMAX.format(axis=-1) + SOFTMAX.format(axis=-1).replace(
        'id="sm"', 'id="own" formula="on"'
    )
    render(text, fake, tmp_path, formula="required")
    assert [spec.formula_required for spec in fake.checked] == [True, False]
    with pytest.raises(FormulaCheckError, match="option 'formula' has a bad value 'always'"):
        render(text, fake, tmp_path, formula="always")


def test_superfences_is_required(fake: FakeEngine, tmp_path: Path) -> None:
    md = markdown.Markdown(extensions=[FormulaCheckExtension(engine=fake, root=str(tmp_path))])
    with pytest.raises(FormulaCheckError, match=r"needs pymdownx\.superfences"):
        md.convert("text")


@pytest.mark.tf
def test_image_dir_writes_content_addressed_pngs(tmp_path: Path) -> None:
    images = tmp_path / "images"
    images.mkdir()
    html = render(
        SOFTMAX.format(axis=1), shared_engine(), tmp_path, image_dir=str(images), image_url="img"
    )
    written = sorted(p.name for p in images.iterdir())
    assert written
    assert f'<img src="img/{written[0]}"' in html or any(f'src="img/{n}"' in html for n in written)


def test_known_results_are_not_checked_twice(fake: FakeEngine, tmp_path: Path) -> None:
    session = FormulaSession(
        settings=Settings(tmp_path),
        labels=labels_for("zh"),
        images=DataUriImages(),
        engine=fake,
    )
    text = SOFTMAX.format(axis=-1).replace('id="sm"', 'id="twice"')
    render(text, fake, tmp_path, session=session)
    assert len(fake.checked) == 1
    html = render(text, fake, tmp_path, session=session)
    assert len(fake.checked) == 1, "the second page render reuses the session's result"
    assert "已验证" in card_of(html, "twice")
