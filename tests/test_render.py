"""The rendering layer: cards (golden HTML), figures (PNG) and reports. Pure: no TensorFlow."""

from __future__ import annotations

import dataclasses
import difflib
import io
import json
import os
import string
from pathlib import Path

import matplotlib.image
import numpy as np
import pytest

from formula_check.model import (
    CheckResult,
    Environment,
    Location,
    ShapeInfo,
    SnippetFailure,
    Status,
    SweepPoint,
    TimingStats,
    Verdict,
)
from formula_check.render import (
    STYLESHEET,
    Figure,
    figures_for,
    labels_for,
    outcome_key,
    render_card,
    report_json,
    report_markdown,
    strip_ansi,
)
from formula_check.render.labels import CHINESE, ENGLISH

GOLDEN = Path(__file__).parent / "golden"
EN = labels_for("en")
ZH = labels_for("zh")
HOSTILE = "\x1b[1mOnly input tensors\x1b[0m may be passed <script>alert(1)</script> & \x1b]8;;x\x07"


def image_url(figure: Figure) -> str:
    return f"assets/formula-check/sdpa-{figure.name}.png?v=1&x=<y>"


def assert_golden(name: str, text: str) -> None:
    """Compare with ``tests/golden/<name>``; ``FORMULA_CHECK_UPDATE_GOLDEN=1`` rewrites it."""
    path = GOLDEN / name
    if os.environ.get("FORMULA_CHECK_UPDATE_GOLDEN") == "1":
        path.parent.mkdir(exist_ok=True)
        path.write_bytes(text.encode("utf-8"))
        return
    if not path.exists():
        pytest.fail(f"{path} is missing: run with FORMULA_CHECK_UPDATE_GOLDEN=1", pytrace=False)
    expected = path.read_bytes().decode("utf-8")
    if text != expected:
        diff = difflib.unified_diff(
            expected.splitlines(keepends=True),
            text.splitlines(keepends=True),
            fromfile=str(path),
            tofile="rendered",
        )
        pytest.fail("golden file differs:\n" + "".join(diff), pytrace=False)


def _shapes() -> tuple[ShapeInfo, ...]:
    return (
        ShapeInfo("weights", "output", (2, 5, 7), ("b", "n", "m")),
        ShapeInfo("q", "input", (2, 5, 16), ("b", "n", "d_k")),
        ShapeInfo("k", "input", (2, 7, 16), ("b", "m", "d_k")),
        ShapeInfo("w_q", "weight", (16, 16), ("d_model", "d_k")),
        ShapeInfo("output", "output", (2, 5, 16), ("b", "n", "d_v")),
    )


def _timings() -> tuple[TimingStats, ...]:
    return (
        TimingStats("eager", 9.1e-4, 4e-5, 5, first=0.026),
        TimingStats("function", 1.0e-3, 3e-5, 5),
        TimingStats("trace", 0.063, 0.002, 3),
        TimingStats("oracle", 2.2e-4, 1e-5, 5),
    )


def _ok_verdict() -> Verdict:
    return Verdict(
        "output",
        True,
        ("b", "n", "d_v"),
        (2, 5, 16),
        (2, 5, 16),
        7.2e-7,
        5e-3,
        n_total=160,
        atol=1e-6,
        rtol=1e-5,
    )


def verified() -> CheckResult:
    return CheckResult(
        block_id="sdpa",
        location=Location("docs/attention.md", 42),
        oracle="scaled_dot_product_attention",
        status=Status.VERIFIED,
        verdicts=(_ok_verdict(),),
        shapes=_shapes(),
        timings=_timings(),
        environment=Environment("2.21.0", "3.15.0", "CPU:0", 2),
        notes=("mask convention: additive (-1e9)",),
        cached=True,
    )


def mismatch(**changes: object) -> CheckResult:
    delta = np.zeros((2, 5, 16))
    delta[1, 3, 7] = 3.1e-2
    bad = Verdict(
        "output",
        False,
        ("b", "n", "d_v"),
        (2, 5, 16),
        (2, 5, 16),
        max_abs=3.1e-2,
        max_rel=0.2,
        worst_index=(1, 3, 7),
        worst_expected=0.125,
        worst_actual=0.156,
        n_bad=12,
        n_total=160,
        atol=1e-5,
        rtol=1e-5,
        nonfinite=1,
    )
    shape = Verdict(
        "weights",
        False,
        ("b", "n", "m"),
        (2, 5, 7),
        (2, 7, 5),
        problem="shape (2, 7, 5) differs from expected (b, n, m) = (2, 5, 7)",
    )
    result = CheckResult(
        block_id="sdpa",
        location=Location("docs/attention.md", 42),
        oracle="scaled_dot_product_attention",
        status=Status.MISMATCH,
        verdicts=(bad, shape),
        shapes=_shapes(),
        timings=_timings()[:1],
        arrays={"delta": delta, "delta_worst": np.array([1, 3, 7])},
        stdout="tf.Tensor(<b>0.5</b>)\n\nlast line",
    )
    return dataclasses.replace(result, **changes)  # type: ignore[arg-type]


def error() -> CheckResult:
    return CheckResult(
        block_id="sdpa-bad",
        location=Location("docs/attention.md", 57),
        oracle="scaled_dot_product_attention",
        status=Status.ERROR,
        failure=SnippetFailure(
            "ValueError",
            HOSTILE,
            Location("docs/attention.md", 61),
            'Traceback (most recent call last):\n  File "<snippet>", line 5\n'
            "\x1b[31m<script>x</script>",
        ),
    )


def test_golden_mismatch_shows_a_unified_diff(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("FORMULA_CHECK_UPDATE_GOLDEN", raising=False)
    monkeypatch.setattr(f"{__name__}.GOLDEN", tmp_path)
    (tmp_path / "case.html").write_text("<p>old</p>\n", encoding="utf-8")
    with pytest.raises(pytest.fail.Exception) as failure:
        assert_golden("case.html", "<p>new</p>\n")
    assert "-<p>old</p>" in str(failure.value) and "+<p>new</p>" in str(failure.value)


# Golden cards ------------------------------------------------------------------------------


def test_verified_card_golden() -> None:
    assert_golden("card_verified.html", render_card(verified(), labels=EN, image_url=image_url))


def test_verified_card_golden_in_chinese() -> None:
    html = render_card(verified(), labels=ZH, image_url=image_url)
    assert_golden("card_verified_zh.html", html)


def test_mismatch_card_golden() -> None:
    html = render_card(mismatch(), labels=EN, image_url=image_url, heatmaps=())
    assert_golden("card_mismatch.html", html)


def test_error_card_golden() -> None:
    assert_golden("card_error.html", render_card(error(), labels=EN, image_url=image_url))


# Escaping ----------------------------------------------------------------------------------


@pytest.mark.parametrize("result", [verified(), mismatch(), error()], ids=["ok", "bad", "error"])
def test_cards_have_no_blank_line_and_no_escape_codes(result: CheckResult) -> None:
    html = render_card(result, labels=EN, image_url=image_url, heatmaps=())
    assert "\n\n" not in html.strip()
    assert "\x1b" not in html
    assert html.startswith('<div class="admonition ') and html.endswith("</div>\n")


def test_error_card_escapes_markup_and_strips_ansi() -> None:
    html = render_card(error(), labels=EN, image_url=image_url)
    assert "<script" not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert "[1m" not in html and "[0m" not in html and "[31m" not in html
    assert "Only input tensors may be passed" in html
    assert "docs/attention.md:61" in html


def test_stdout_and_urls_are_escaped() -> None:
    html = render_card(mismatch(), labels=EN, image_url=image_url, heatmaps=())
    assert "&lt;b&gt;0.5&lt;/b&gt;" in html
    assert 'src="assets/formula-check/sdpa-delta.png?v=1&amp;x=&lt;y&gt;"' in html


def test_hostile_block_id_and_oracle_are_escaped() -> None:
    result = dataclasses.replace(verified(), block_id='"><script>', oracle="<img onerror=x>")
    html = render_card(result, labels=EN, image_url=image_url)
    assert "<script" not in html and "<img onerror" not in html


def test_strip_ansi_removes_csi_and_osc_sequences() -> None:
    assert strip_ansi("\x1b[1;31mred\x1b[0m \x1b]8;;http://x\x07link\x1b]8;;\x07") == "red link"


# Outcomes ----------------------------------------------------------------------------------


def test_expected_failure_shows_badge_and_underlying_status() -> None:
    html = render_card(mismatch(expect="mismatch"), labels=EN, image_url=image_url, heatmaps=())
    assert "fc-status-xfail" in html
    assert '<span class="fc-badge">expected failure</span>' in html
    assert '<span class="fc-underlying">(mismatch)</span>' in html


def test_expected_failure_that_verifies_is_an_unexpected_pass() -> None:
    result = dataclasses.replace(verified(), expect="fail")
    html = render_card(result, labels=EN, image_url=image_url)
    assert outcome_key(result) == "unexpected_pass"
    assert "fc-status-xpass" in html and "admonition failure" in html
    assert '<span class="fc-badge">unexpected pass</span>' in html


def test_wrong_kind_of_failure_shows_real_status_and_expectation() -> None:
    result = dataclasses.replace(error(), expect="mismatch")
    html = render_card(result, labels=EN, image_url=image_url)
    assert '<span class="fc-badge">error</span>' in html
    assert '<span class="fc-expected">expected mismatch</span>' in html


@pytest.mark.parametrize(
    ("status", "css", "admonition"),
    [
        (Status.VERIFIED, "fc-status-verified", "success"),
        (Status.MISMATCH, "fc-status-mismatch", "failure"),
        (Status.ERROR, "fc-status-error", "danger"),
        (Status.TIMEOUT, "fc-status-timeout", "warning"),
        (Status.SKIPPED, "fc-status-skipped", "quote"),
    ],
)
def test_status_classes(status: Status, css: str, admonition: str) -> None:
    result = CheckResult("b", Location("p.md", 1), "o", status, message="took > 60 s")
    html = render_card(result, labels=EN, image_url=image_url)
    assert f'class="admonition {admonition} fc-card {css}"' in html
    assert '<p class="fc-message">took &gt; 60 s</p>' in html


# Labels ------------------------------------------------------------------------------------


@pytest.mark.parametrize("code", ["zh", "zh-CN", "zh_TW", "ZH", "zh-Hans"])
def test_chinese_codes(code: str) -> None:
    assert labels_for(code) is CHINESE


@pytest.mark.parametrize("code", [None, "", "en", "en-US", "fr", "klingon"])
def test_other_codes_fall_back_to_english(code: str | None) -> None:
    assert labels_for(code) is ENGLISH


def test_chinese_card_uses_chinese_words() -> None:
    html = render_card(verified(), labels=ZH, image_url=image_url)
    for word in ("已验证", "张量形状", "运行耗时", "输入", "权重", "即时执行", "缓存结果"):
        assert word in html
    html = render_card(error(), labels=ZH, image_url=image_url)
    assert "错误" in html


def _fields(text: str) -> set[str]:
    return {name for _, name, _, _ in string.Formatter().parse(text) if name}


def test_every_chinese_label_is_filled_and_keeps_the_format_fields() -> None:
    for field in dataclasses.fields(ENGLISH):
        english, chinese = getattr(ENGLISH, field.name), getattr(CHINESE, field.name)
        assert chinese, field.name
        if isinstance(english, str):
            assert _fields(english) == _fields(chinese), field.name
    assert dict(CHINESE.timing_names).keys() == dict(ENGLISH.timing_names).keys()


# Figures -----------------------------------------------------------------------------------


def _attention(heads: int | None, seed: int = 0) -> CheckResult:
    rng = np.random.default_rng(seed)
    shape = (2, 5, 7) if heads is None else (2, heads, 5, 7)
    weights = rng.random(shape)
    weights /= weights.sum(axis=-1, keepdims=True)
    return dataclasses.replace(verified(), arrays={"weights": weights})


def _decode(figure: Figure) -> np.ndarray:
    assert figure.png.startswith(b"\x89PNG\r\n\x1a\n")
    return np.asarray(matplotlib.image.imread(io.BytesIO(figure.png), format="png"))


def test_png_bytes_are_reproducible() -> None:
    first = figures_for(_attention(3), None, EN)
    second = figures_for(_attention(3), None, EN)
    assert [f.png for f in first] == [f.png for f in second]
    assert b"matplotlib" not in first[0].png  # no "Software" chunk naming the version


def test_png_decodes_with_its_stated_size() -> None:
    (figure,) = figures_for(_attention(None), None, EN)
    pixels = _decode(figure)
    assert pixels.shape[:2] == (figure.height, figure.width)
    assert 200 <= figure.width <= 600 and 150 <= figure.height <= 600
    assert pixels[0, 0, :3].tolist() == [1.0, 1.0, 1.0]  # opaque white, readable on slate


def test_single_head_alt_text() -> None:
    (figure,) = figures_for(_attention(None), None, EN)
    assert figure.name == "weights"
    assert figure.alt == "Attention weights, batch 0, 5×7"


@pytest.mark.parametrize(("heads", "rows"), [(3, 1), (4, 1), (6, 2), (8, 2)])
def test_multihead_weights_make_one_grid(heads: int, rows: int) -> None:
    (figure,) = figures_for(_attention(heads), None, EN)
    assert figure.alt == f"Attention weights, batch 0, {heads} heads, 5×7"
    assert figure.width <= 600
    assert figure.height == 60 + 190 * rows  # wraps at four heads a row


def test_chinese_alt_text() -> None:
    (figure,) = figures_for(_attention(3), None, ZH)
    assert figure.alt == "注意力权重，批次 0，3 个注意力头，5×7"
    assert figure.title == "注意力权重"


def test_heatmap_selection() -> None:
    rng = np.random.default_rng(1)
    arrays = {
        "weights": rng.random((1, 4, 4)),
        "hidden": rng.random((1, 4, 8)),
        "output": rng.random((10, 8)),
    }
    result = dataclasses.replace(verified(), arrays=arrays)
    assert [f.name for f in figures_for(result, None, EN)] == ["weights", "output", "hidden"]
    assert [f.name for f in figures_for(result, ("hidden",), EN)] == ["hidden"]
    assert figures_for(result, (), EN) == []
    with pytest.raises(ValueError, match="unknown heatmap 'attention'"):
        figures_for(result, ("attention",), EN)


def test_positional_encoding_alt_and_three_d_output_skipped() -> None:
    encoding = dataclasses.replace(verified(), arrays={"output": np.zeros((50, 16))}, shapes=())
    (figure,) = figures_for(encoding, None, EN)
    assert figure.alt == "Positional encoding, 50×16 (position × dim)"
    attention_output = dataclasses.replace(verified(), arrays={"output": np.zeros((2, 5, 16))})
    assert figures_for(attention_output, None, EN) == []


def test_delta_heatmap_only_when_present() -> None:
    assert [f.name for f in figures_for(mismatch(), (), EN)] == ["delta"]
    assert figures_for(mismatch(arrays={}), (), EN) == []
    (figure,) = figures_for(mismatch(), (), EN)
    assert figure.alt == "|actual − expected|: output, b=1, worst at (1, 3, 7), 5×16"
    _decode(figure)


def test_delta_without_worst_index_uses_argmax() -> None:
    delta = np.zeros((3, 4))
    delta[2, 1] = 1.0
    (figure,) = figures_for(mismatch(arrays={"delta": delta}), (), EN)
    assert "(2, 1)" in figure.alt


def test_delta_with_bad_worst_index_is_an_error() -> None:
    result = mismatch(arrays={"delta": np.zeros((3, 4)), "delta_worst": np.array([5, 0])})
    with pytest.raises(ValueError, match="delta_worst"):
        figures_for(result, (), EN)


def test_sweep_plot_present_with_points() -> None:
    sweep = (SweepPoint(64, 1e-3, 1e-4), SweepPoint(16, 1e-4, 2e-4), SweepPoint(32, 3e-4, 1e-5))
    (figure,) = figures_for(dataclasses.replace(verified(), sweep=sweep), (), EN)
    assert figure.name == "sweep"
    assert figure.alt.endswith("n = 16, 32, 64")
    _decode(figure)
    html = render_card(dataclasses.replace(verified(), sweep=sweep), labels=EN, image_url=image_url)
    assert '<details class="fc-section fc-scaling">' in html
    assert figures_for(verified(), (), EN) == []


def test_card_puts_figures_in_their_sections() -> None:
    html = render_card(
        mismatch(arrays={**mismatch().arrays, "weights": np.ones((2, 5, 7))}),
        labels=EN,
        image_url=image_url,
    )
    assert '<details class="fc-section fc-delta" open><summary>Where they differ</summary>' in html
    assert '<details class="fc-section fc-figures"><summary>Heatmaps</summary>' in html
    assert 'loading="lazy"' in html and 'width="480" height="340"' in html


# Reports -----------------------------------------------------------------------------------


def _results() -> list[CheckResult]:
    later = dataclasses.replace(
        verified(), location=Location("docs/attention.md", 90), cached=False
    )
    broken = dataclasses.replace(mismatch(), location=Location("docs/<b>.md", 3), block_id="pe")
    nan = dataclasses.replace(
        broken,
        verdicts=(dataclasses.replace(broken.verdicts[0], max_abs=float("nan")),),
        block_id="nan",
    )
    return [later, error(), verified(), broken, nan]


def test_report_json_round_trips() -> None:
    text = report_json(_results())
    document = json.loads(text)
    assert text == json.dumps(document, sort_keys=True, indent=2, ensure_ascii=False) + "\n"
    assert document["summary"] == {
        "total": 5,
        "failed": 3,
        "outcomes": {"verified": 2, "mismatch": 2, "error": 1},
    }
    blocks = document["blocks"]
    assert [(b["page"], b["line"]) for b in blocks][:3] == [
        ("docs/<b>.md", 3),
        ("docs/<b>.md", 3),
        ("docs/attention.md", 42),
    ]
    first = blocks[2]
    assert set(first) == {
        "id",
        "page",
        "line",
        "oracle",
        "status",
        "outcome",
        "expect",
        "outcome_ok",
        "max_abs_error",
        "detail",
        "timings",
        "cached",
        "formula",
    }
    assert first["formula"] is None  # no LaTeX was compiled for this hand-made result
    assert first["status"] == "verified" and first["outcome_ok"] is True
    assert first["max_abs_error"] == pytest.approx(7.2e-7)
    assert first["timings"]["function"] == pytest.approx(1e-3)
    assert first["cached"] is True
    assert blocks[0]["max_abs_error"] is None  # NaN has no JSON spelling
    error_block = next(b for b in blocks if b["id"] == "sdpa-bad")
    assert "\x1b" not in error_block["detail"] and "<script>" in error_block["detail"]


def test_report_json_is_independent_of_input_order() -> None:
    results = _results()
    assert report_json(results) == report_json(list(reversed(results)))


def test_report_markdown_escapes_and_links() -> None:
    text = report_markdown(_results(), EN, lambda r: f"{r.location.path}#fc-{r.block_id}&x")
    assert text.startswith("# Formula check report\n\n")
    assert '<p class="fc-summary">5 blocks: 2 verified, 2 mismatch, 1 error</p>' in text
    assert "<script" not in text and "<b>" not in text
    assert '<a href="docs/&lt;b&gt;.md#fc-pe&amp;x">docs/&lt;b&gt;.md:3</a>' in text
    assert "\x1b" not in text
    table = text.split("\n\n")[-1]
    assert table.count("<tr class=") == 5 and "\n\n" not in table.strip()
    assert "910 µs" in text  # the eager median of the verified blocks


def test_report_markdown_in_chinese() -> None:
    text = report_markdown(_results(), ZH, lambda r: "#")
    assert "# 公式检查报告" in text
    assert "共 5 个公式块：已验证 2，不一致 2，错误 1" in text


def test_stylesheet_ships_with_the_package() -> None:
    css = STYLESHEET.read_text(encoding="utf-8")
    assert '[data-md-color-scheme="slate"]' in css
    for status in ("verified", "mismatch", "error", "timeout", "skipped", "xfail", "xpass"):
        assert f".fc-status-{status}" in css
