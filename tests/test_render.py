"""The rendering layer: cards (golden HTML), figures (SVG) and reports. Pure: no TensorFlow."""

from __future__ import annotations

import base64
import dataclasses
import difflib
import json
import os
import re
import string
import struct
import subprocess
import sys
import zlib
from pathlib import Path
from xml.etree import ElementTree as ET

import numpy as np
import pytest

from formula_check.model import Location, Status
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
from formula_check.render.svg import COLORMAPS
from formula_check.results import (
    CheckResult,
    Environment,
    ShapeInfo,
    SnippetFailure,
    SweepPoint,
    TimingStats,
    Verdict,
)

GOLDEN = Path(__file__).parent / "golden"
EN = labels_for("en")
ZH = labels_for("zh")
HOSTILE = "\x1b[1mOnly input tensors\x1b[0m may be passed <script>alert(1)</script> & \x1b]8;;x\x07"


def image_url(figure: Figure) -> str:
    return f"assets/formula-check/sdpa-{figure.name}{figure.suffix}?v=1&x=<y>"


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
    assert 'src="assets/formula-check/sdpa-delta.svg?v=1&amp;x=&lt;y&gt;"' in html


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
    html = render_card(verified(), labels=ZH, image_url=image_url, served=True)
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

SVG = "{http://www.w3.org/2000/svg}"
HREF = "{http://www.w3.org/1999/xlink}href"
PNG_PREFIX = "data:image/png;base64,"
VIRIDIS_TOP, VIRIDIS_BOTTOM, VIRIDIS_MIDDLE = (
    (0xFD, 0xE7, 0x25),
    (0x44, 0x01, 0x54),
    (0x21, 0x91, 0x8C),
)
MAGMA_TOP, MAGMA_BOTTOM = (0xFC, 0xFD, 0xBF), (0x00, 0x00, 0x04)
HATCH_LIGHT, HATCH_DARK = (0xBD, 0xBD, 0xBD), (0x61, 0x61, 0x61)


def _attention(heads: int | None, seed: int = 0) -> CheckResult:
    rng = np.random.default_rng(seed)
    shape = (2, 5, 7) if heads is None else (2, heads, 5, 7)
    weights = rng.random(shape)
    weights /= weights.sum(axis=-1, keepdims=True)
    return dataclasses.replace(verified(), arrays={"weights": weights})


def _sweep() -> tuple[SweepPoint, ...]:
    return (SweepPoint(64, 1e-3, 1e-4), SweepPoint(16, 1e-4, 2e-4), SweepPoint(32, 3e-4, 1e-5))


def _svg(figure: Figure) -> ET.Element:
    """The parsed document, after checking it is a standalone, self-contained SVG."""
    assert figure.media_type == "image/svg+xml" and figure.suffix == ".svg"
    root = ET.fromstring(figure.data)
    assert root.tag == f"{SVG}svg" and root.get("version") == "1.1"
    assert root.get("width") == str(figure.width) and root.get("height") == str(figure.height)
    assert root.get("viewBox") == f"0 0 {figure.width} {figure.height}"
    text = figure.data.decode("utf-8")
    assert "<script" not in text and "foreignObject" not in text and "javascript:" not in text
    for element in root.iter():
        assert element.tag.startswith(SVG), element.tag
        for name, value in element.attrib.items():
            if name in {HREF, "href"}:
                assert value.startswith(PNG_PREFIX)  # embedded, never fetched
            assert "url(" not in value or value.startswith("url(#"), value
    background = root.find(f"{SVG}rect")
    assert background is not None and background.get("fill") == "#ffffff"
    assert background.get("width") == str(figure.width)  # opaque white: readable on slate
    return root


def _texts(root: ET.Element, css: str | None = None) -> list[str]:
    scope = root.iter() if css is None else _group(root, css).iter()
    return [element.text or "" for element in scope if element.tag == f"{SVG}text"]


def _group(root: ET.Element, css: str) -> ET.Element:
    group = root.find(f".//{SVG}g[@class='{css}']")
    assert group is not None, css
    return group


def _decode_png(data: bytes) -> np.ndarray:
    """The RGB pixels of a PNG as this renderer writes it: 8-bit RGB, filter 0 on every row."""
    assert data.startswith(b"\x89PNG\r\n\x1a\n")
    position, chunks = 8, []
    while position < len(data):
        length, kind = struct.unpack(">I4s", data[position : position + 8])
        body = data[position + 8 : position + 8 + length]
        (crc,) = struct.unpack(">I", data[position + 8 + length : position + 12 + length])
        assert zlib.crc32(kind + body) == crc
        chunks.append((kind, body))
        position += 12 + length
    assert [kind for kind, _ in chunks] == [b"IHDR", b"IDAT", b"IEND"]
    width, height, depth, colour, _, _, _ = struct.unpack(">IIBBBBB", chunks[0][1])
    assert (depth, colour) == (8, 2)
    rows = np.frombuffer(zlib.decompress(chunks[1][1]), dtype=np.uint8).reshape(height, -1)
    assert rows.shape[1] == 1 + 3 * width and not rows[:, 0].any()  # filter byte 0
    return rows[:, 1:].reshape(height, width, 3)


@dataclasses.dataclass
class Grid:
    """One heatmap image: where it is drawn and what it holds."""

    x: float
    y: float
    width: float
    height: float
    pixels: np.ndarray

    def colour(self, row: int, col: int, shape: tuple[int, int]) -> tuple[int, ...]:
        """The colour of cell ``(row, col)`` of a ``shape`` grid, read at its centre."""
        y = int((row + 0.5) * self.pixels.shape[0] / shape[0])
        x = int((col + 0.5) * self.pixels.shape[1] / shape[1])
        return tuple(int(c) for c in self.pixels[y, x])

    def colours(self, row: int, col: int, shape: tuple[int, int]) -> set[tuple[int, ...]]:
        """Every colour inside cell ``(row, col)`` of a ``shape`` grid."""
        height, width = self.pixels.shape[0] / shape[0], self.pixels.shape[1] / shape[1]
        cell = self.pixels[
            round(row * height) : round((row + 1) * height),
            round(col * width) : round((col + 1) * width),
        ]
        return {tuple(int(c) for c in pixel) for pixel in cell.reshape(-1, 3)}

    def centre(self, row: int, col: int, shape: tuple[int, int]) -> tuple[float, float]:
        return (
            self.x + (col + 0.5) * self.width / shape[1],
            self.y + (row + 0.5) * self.height / shape[0],
        )


def _grids(root: ET.Element) -> list[Grid]:
    grids = []
    for image in root.iter(f"{SVG}image"):
        assert image.get("preserveAspectRatio") == "none"
        assert "image-rendering:pixelated" in (image.get("style") or "")
        data = base64.b64decode(image.get(HREF, "").removeprefix(PNG_PREFIX))
        size = [float(image.get(name, "nan")) for name in ("x", "y", "width", "height")]
        grids.append(Grid(*size, pixels=_decode_png(data)))
    return grids


def _hex(colour: str) -> tuple[int, ...]:
    return tuple(bytes.fromhex(colour.removeprefix("#")))


def test_figures_are_reproducible_svg() -> None:
    result = dataclasses.replace(
        mismatch(), arrays={**mismatch().arrays, **_attention(3).arrays}, sweep=_sweep()
    )
    first = figures_for(result, None, EN)
    second = figures_for(dataclasses.replace(result), None, EN)
    assert [f.name for f in first] == ["weights", "delta", "sweep"]
    assert [f.data for f in first] == [f.data for f in second]
    for figure in first:
        _svg(figure)
        assert figure.data.startswith(b'<?xml version="1.0" encoding="UTF-8"?>\n<svg ')
        assert 200 <= figure.width <= 600 and 150 <= figure.height <= 600


def test_figure_media_type_and_suffix() -> None:
    (figure,) = figures_for(_attention(None), None, EN)
    assert (figure.media_type, figure.suffix) == ("image/svg+xml", ".svg")
    png = Figure("x", "t", "a", b"\x89PNG", 10, 10, media_type="image/png")
    assert png.suffix == ".png"
    with pytest.raises(ValueError, match="media type"):
        Figure("x", "t", "a", b"", 10, 10, media_type="image/gif")


def test_drawing_never_loads_matplotlib() -> None:
    code = (
        "import sys\n"
        "import formula_check.render as render\n"
        "assert 'formula_check.render.heatmaps' not in sys.modules\n"
        "from test_render import _attention, mismatch\n"
        "render.figures_for(_attention(2), None, render.labels_for('en'))\n"
        "render.figures_for(mismatch(), (), render.labels_for('en'))\n"
        "assert 'formula_check.render.heatmaps' in sys.modules\n"
        "assert not [m for m in sys.modules if m.startswith('matplotlib')]\n"
    )
    here = Path(__file__).parent
    paths = os.pathsep.join([str(here.parent / "plugin"), str(here)])
    done = subprocess.run(
        [sys.executable, "-c", code],
        cwd=here,
        env={**os.environ, "PYTHONPATH": paths},
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr


def test_colormap_anchors() -> None:
    assert len(COLORMAPS["viridis"]) == len(COLORMAPS["magma"]) == 33
    assert (COLORMAPS["viridis"][0], COLORMAPS["viridis"][-1]) == ("#440154", "#fde725")
    assert (COLORMAPS["magma"][0], COLORMAPS["magma"][-1]) == ("#000004", "#fcfdbf")


def test_single_head_alt_text() -> None:
    (figure,) = figures_for(_attention(None), None, EN)
    assert figure.name == "weights"
    assert figure.alt == "Attention weights — oracle, batch 0, 5×7"
    assert figure.title == "Attention weights — oracle"
    assert _svg(figure).findtext(f"{SVG}title") == figure.alt


def test_weights_cells_have_the_colormap_colours() -> None:
    weights = np.zeros((2, 5, 7))
    weights[0, 2, 3], weights[0, 4, 6] = 1.0, 0.5
    weights[1] = 9.0  # batch 1 is not drawn and does not stretch the scale
    (figure,) = figures_for(dataclasses.replace(verified(), arrays={"weights": weights}), None, EN)
    root = _svg(figure)
    (grid,) = _grids(root)
    assert grid.colour(2, 3, (5, 7)) == VIRIDIS_TOP
    assert grid.colour(4, 6, (5, 7)) == VIRIDIS_MIDDLE
    assert grid.colour(0, 0, (5, 7)) == grid.colour(4, 5, (5, 7)) == VIRIDIS_BOTTOM
    # At least six image pixels a cell: browsers that smooth images still show sharp cells.
    assert grid.pixels.shape[0] >= 6 * 5 and grid.pixels.shape[1] >= 6 * 7
    assert _texts(root, "fc-colorbar") == ["0", "0.2", "0.4", "0.6", "0.8", "1"]
    assert _texts(root, "fc-xticks") == ["0", "2", "4", "6"]  # at most six, at whole cells
    assert _texts(root, "fc-yticks") == ["0", "1", "2", "3", "4"]
    gradient = root.find(f".//{SVG}linearGradient")
    assert gradient is not None
    stops = [stop.get("stop-color") for stop in gradient]
    assert (stops[0], stops[-1]) == ("#440154", "#fde725")
    assert {"n", "m"} <= set(_texts(root))  # the axes carry the oracle's dim names


def test_ticks_sit_at_cell_centres() -> None:
    (figure,) = figures_for(_attention(None), None, EN)
    root = _svg(figure)
    (grid,) = _grids(root)
    labels = _group(root, "fc-xticks")
    for text in labels:
        x, _ = grid.centre(0, int(text.text or ""), (5, 7))
        assert float(text.get("x", "nan")) == pytest.approx(x, abs=0.01)


@pytest.mark.parametrize(("heads", "rows"), [(3, 1), (4, 1), (6, 2), (8, 2)])
def test_multihead_weights_make_one_grid(heads: int, rows: int) -> None:
    (figure,) = figures_for(_attention(heads), None, EN)
    assert figure.alt == f"Attention weights — oracle, batch 0, {heads} heads, 5×7"
    assert figure.width <= 600
    assert figure.height == 4 + 180 * rows  # grows with the rows
    root = _svg(figure)
    panels = root.findall(f".//{SVG}g[@class='fc-panel']")
    assert len(panels) == heads
    titles = [text for panel in panels for text in _texts(panel) if text.startswith("head")]
    assert titles == [f"head {index + 1}" for index in range(heads)]
    grids = _grids(root)
    assert len(grids) == heads
    assert len({grid.x for grid in grids}) == min(heads, 4)  # wraps at four a row
    assert len({grid.y for grid in grids}) == rows
    if heads > 4:
        assert grids[4].x == grids[0].x and grids[4].y > grids[0].y
    assert len(root.findall(f".//{SVG}g[@class='fc-colorbar']")) == 1  # one shared scale


def test_multihead_shares_one_scale() -> None:
    weights = np.zeros((1, 2, 3, 3))
    weights[0, 0, 1, 1], weights[0, 1, 0, 0] = 0.5, 2.0
    result = dataclasses.replace(verified(), arrays={"weights": weights})
    first, second = _grids(_svg(figures_for(result, None, EN)[0]))
    assert first.colour(1, 1, (3, 3)) != VIRIDIS_TOP  # 0.5 of a scale that ends at 2
    assert second.colour(0, 0, (3, 3)) == VIRIDIS_TOP


def test_chinese_alt_text_and_panel_titles() -> None:
    (figure,) = figures_for(_attention(3), None, ZH)
    assert figure.alt == "注意力权重——参考实现，批次 0，3 个注意力头，5×7"
    assert figure.title == "注意力权重——参考实现"
    texts = _texts(_svg(figure))
    assert {"头 1", "头 2", "头 3"} <= set(texts)
    assert not any(text.startswith("head") for text in texts)


def test_hostile_dim_names_are_escaped() -> None:
    hostile = '<b>&"'
    shapes = (ShapeInfo("weights", "output", (2, 5, 7), ("b", hostile, "m\x1b[1m")),)
    result = dataclasses.replace(_attention(None), shapes=shapes)
    (figure,) = figures_for(result, None, EN)
    root = _svg(figure)  # still parses
    assert hostile in _texts(root) and "m[1m" in _texts(root)
    assert b"<b>" not in figure.data and b"&lt;b&gt;&amp;&quot;" in figure.data
    sweep = dataclasses.replace(verified(), sweep=_sweep())
    (plot,) = figures_for(sweep, (), EN, sweep_dim=hostile)
    assert f"size {hostile}" in _texts(_svg(plot))


def test_long_dim_names_are_cut_to_fit() -> None:
    long_name = "a_dimension_name_far_too_long_to_fit_under_the_plot" * 2
    shapes = (ShapeInfo("weights", "output", (2, 5, 7), ("b", "n", long_name)),)
    (figure,) = figures_for(dataclasses.replace(_attention(None), shapes=shapes), None, EN)
    (cut,) = [text for text in _texts(_svg(figure)) if text.startswith("a_dimension")]
    assert cut.endswith("…") and len(cut) < len(long_name)


def _weights_verdict(shape: tuple[int, ...], expected: tuple[int, ...] = (2, 5, 7)) -> Verdict:
    return Verdict("weights", False, ("b", "n", "m"), expected, shape, max_abs=0.5, n_bad=3)


def test_code_and_oracle_weights_are_drawn_side_by_side_on_one_scale() -> None:
    code, oracle = np.zeros((2, 5, 7)), np.zeros((2, 5, 7))
    code[0, 1, 2], oracle[0, 1, 5] = 1.0, 1.0
    result = dataclasses.replace(
        verified(),
        verdicts=(_weights_verdict((2, 5, 7)),),
        arrays={"weights": code, "weights:oracle": oracle},
    )
    (figure,) = figures_for(result, None, EN)
    assert figure.title == "Attention weights — code, oracle"
    root = _svg(figure)
    texts = _texts(root)
    assert "Attention weights — code" in texts and "Attention weights — oracle" in texts
    left, right = _grids(root)
    assert left.x < right.x and left.y == right.y  # the code's on the left
    assert left.colour(1, 2, (5, 7)) == right.colour(1, 5, (5, 7)) == VIRIDIS_TOP
    assert left.colour(1, 5, (5, 7)) == right.colour(1, 2, (5, 7)) == VIRIDIS_BOTTOM
    (chinese,) = figures_for(result, None, ZH)
    assert chinese.title == "注意力权重——代码，参考实现"


def test_multihead_code_and_oracle_pair_each_head() -> None:
    weights = np.random.default_rng(0).random((2, 2, 5, 7))
    result = dataclasses.replace(
        verified(), arrays={"weights": weights, "weights:oracle": weights[:, ::-1]}
    )
    root = _svg(figures_for(result, None, EN)[0])
    titles = [t for t in _texts(root) if t.startswith("head")]
    assert titles == ["head 1 — code", "head 1 — oracle", "head 2 — code", "head 2 — oracle"]


def test_only_the_oracles_values_when_the_codes_shape_is_wrong() -> None:
    result = dataclasses.replace(
        verified(),
        verdicts=(_weights_verdict((2, 7, 5)),),
        arrays={"weights:oracle": np.ones((2, 5, 7))},
    )
    (figure,) = figures_for(result, ("weights",), EN)
    assert figure.title == "Attention weights — oracle"
    assert len(_grids(_svg(figure))) == 1


@pytest.mark.parametrize(
    ("actual", "whose"),
    [((2, 5, 7), "code"), ((2, 7, 5), "oracle")],
)
def test_a_result_cached_before_the_oracle_key_says_whose_values_by_its_verdict(
    actual: tuple[int, ...], whose: str
) -> None:
    # Then ``weights`` alone held the code's values if their shape was right, else the oracle's.
    result = dataclasses.replace(
        verified(), verdicts=(_weights_verdict(actual),), arrays={"weights": np.ones((2, 5, 7))}
    )
    (figure,) = figures_for(result, None, EN)
    assert figure.title == f"Attention weights — {whose}"


def test_a_value_heatmap_hatches_and_keys_what_is_not_finite() -> None:
    weights = np.zeros((1, 5, 7))
    weights[0, 2, 3], weights[0, 0, 0], weights[0, 4, 6] = 1.0, np.inf, np.nan
    (figure,) = figures_for(dataclasses.replace(verified(), arrays={"weights": weights}), None, EN)
    root = _svg(figure)
    (grid,) = _grids(root)
    assert grid.colours(0, 0, (5, 7)) == grid.colours(4, 6, (5, 7)) == {HATCH_LIGHT, HATCH_DARK}
    assert grid.colour(2, 3, (5, 7)) == VIRIDIS_TOP  # the scale: the finite values only
    assert _texts(root, "fc-nonfinite-key") == ["NaN/Inf"]
    assert _texts(root, "fc-colorbar")[-1] == "1"
    finite = dataclasses.replace(verified(), arrays={"weights": np.ones((1, 5, 7))})
    assert "fc-nonfinite-key" not in figures_for(finite, None, EN)[0].data.decode()


def test_a_delta_of_zeros_and_infinities_keeps_its_scale_and_keys_them() -> None:
    delta = np.zeros((3, 4))
    delta[1, 2] = np.inf
    delta[0, 1] = 2e-3
    (figure,) = figures_for(mismatch(arrays={"delta": delta}), (), ZH)
    root = _svg(figure)
    (grid,) = _grids(root)
    assert grid.colours(1, 2, (3, 4)) == {HATCH_LIGHT, HATCH_DARK}
    assert grid.colour(0, 1, (3, 4)) == MAGMA_TOP
    assert _texts(root, "fc-colorbar")[-1] == "0.002"
    assert _texts(root, "fc-nonfinite-key") == ["NaN/Inf（非有限值）"]


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
    assert figure.alt == "Positional encoding — code, 50×16 (position × dim)"
    (grid,) = _grids(_svg(figure))
    assert grid.colour(10, 3, (50, 16)) == VIRIDIS_BOTTOM  # a constant map: no division by 0
    attention_output = dataclasses.replace(verified(), arrays={"output": np.zeros((2, 5, 16))})
    assert figures_for(attention_output, None, EN) == []


def test_hidden_heatmap_draws_batch_zero() -> None:
    hidden = np.zeros((2, 5, 64))
    hidden[0, 1, 40] = -3.0
    hidden[0, 4, 0] = 5.0
    hidden[1] = 100.0
    result = dataclasses.replace(verified(), arrays={"hidden": hidden})
    (figure,) = figures_for(result, None, EN)
    assert figure.alt == "Feed-forward hidden activations — oracle, batch 0, 5×64 (n × d_ff)"
    (grid,) = _grids(_svg(figure))
    assert grid.colour(1, 40, (5, 64)) == VIRIDIS_BOTTOM
    assert grid.colour(4, 0, (5, 64)) == VIRIDIS_TOP


def test_huge_maps_are_sampled_to_their_drawn_size() -> None:
    result = dataclasses.replace(verified(), arrays={"output": np.ones((2000, 1500))})
    (figure,) = figures_for(result, None, EN)
    (grid,) = _grids(_svg(figure))
    assert grid.pixels.shape[0] <= grid.height + 1 and grid.pixels.shape[1] <= grid.width + 1
    assert len(figure.data) < 50_000


@pytest.mark.parametrize(
    "matrix",
    [
        np.array([[0.0, 5e-324], [0.0, 0.0]]),  # a range of one denormal
        np.full((2, 3), 1.5e308),  # constant, near the largest float
        np.full((2, 3), -1.5e308),
        np.array([[1e-310, 2e-310]]),
    ],
)
def test_extreme_value_ranges_still_draw(matrix: np.ndarray) -> None:
    encoding = dataclasses.replace(verified(), arrays={"output": matrix}, shapes=())
    (figure,) = figures_for(encoding, None, EN)
    ET.fromstring(figure.data)


def test_delta_heatmap_only_when_present() -> None:
    assert [f.name for f in figures_for(mismatch(), (), EN)] == ["delta"]
    assert figures_for(mismatch(arrays={}), (), EN) == []
    (figure,) = figures_for(mismatch(), (), EN)
    assert figure.alt == "|actual − expected|: output, b=1, worst at (1, 3, 7), 5×16"
    assert "|Δ| at b=1; worst (1, 3, 7)" in _texts(_svg(figure))


def test_delta_colours_and_worst_cell_circle() -> None:
    delta = np.zeros((2, 5, 16))
    delta[1, 3, 7] = 3.1e-2
    delta[1, 0, 2] = np.nan
    delta[1, 4, 15] = np.inf
    delta[0, 0, 0] = 1.0  # another batch: not drawn
    (figure,) = figures_for(
        mismatch(arrays={"delta": delta, "delta_worst": np.array([1, 3, 7])}), (), EN
    )
    root = _svg(figure)
    (grid,) = _grids(root)
    assert grid.colour(3, 7, (5, 16)) == MAGMA_TOP
    assert grid.colour(0, 0, (5, 16)) == MAGMA_BOTTOM
    for row, col in ((0, 2), (4, 15)):  # NaN and Inf: hatched, and said in the key
        assert grid.colours(row, col, (5, 16)) == {HATCH_LIGHT, HATCH_DARK}
    assert _texts(root, "fc-nonfinite-key") == ["NaN/Inf"]
    (ring,) = [c for c in root.iter(f"{SVG}circle") if c.get("stroke") == "#00e5ff"]
    assert ring.get("fill") == "none"
    centre = float(ring.get("cx", "nan")), float(ring.get("cy", "nan"))
    assert centre == pytest.approx(grid.centre(3, 7, (5, 16)), abs=0.01)
    gradient = root.find(f".//{SVG}linearGradient")
    assert gradient is not None
    assert [gradient[0].get("stop-color"), gradient[-1].get("stop-color")] == ["#000004", "#fcfdbf"]
    assert _texts(root, "fc-colorbar")[-1] == "0.03"


def test_delta_colorbar_labels_are_compact() -> None:
    delta = np.zeros((3, 4))
    delta[1, 2] = 4e-7
    (figure,) = figures_for(mismatch(arrays={"delta": delta}), (), EN)
    assert _texts(_svg(figure), "fc-colorbar") == ["0", "1e-07", "2e-07", "3e-07", "4e-07"]


def test_delta_without_worst_index_uses_argmax() -> None:
    delta = np.zeros((3, 4))
    delta[2, 1] = 1.0
    delta[0, 0] = np.nan
    (figure,) = figures_for(mismatch(arrays={"delta": delta}), (), EN)
    assert "(2, 1)" in figure.alt
    assert "|Δ|; worst (2, 1)" in _texts(_svg(figure))


def test_delta_in_chinese_has_a_chinese_title() -> None:
    (figure,) = figures_for(mismatch(), (), ZH)
    assert "|Δ|（b=1）；最大误差 (1, 3, 7)" in _texts(_svg(figure))


def test_one_dimensional_delta_is_one_row() -> None:
    (figure,) = figures_for(mismatch(arrays={"delta": np.array([0.0, 2.0, 1.0])}), (), EN)
    assert "(1)" in figure.alt
    (grid,) = _grids(_svg(figure))
    assert grid.colour(0, 1, (1, 3)) == MAGMA_TOP


def test_delta_with_bad_worst_index_is_an_error() -> None:
    result = mismatch(arrays={"delta": np.zeros((3, 4)), "delta_worst": np.array([5, 0])})
    with pytest.raises(ValueError, match="delta_worst"):
        figures_for(result, (), EN)


def test_sweep_plot_present_with_points() -> None:
    (figure,) = figures_for(dataclasses.replace(verified(), sweep=_sweep()), (), EN)
    assert figure.name == "sweep"
    assert figure.alt.endswith("n = 16, 32, 64")
    root = _svg(figure)
    assert _texts(root, "fc-xticks") == ["16", "32", "64"]  # exactly the measured sizes
    y_ticks = _texts(root, "fc-yticks")
    assert {"100 µs", "1 ms"} <= set(y_ticks)
    assert all(re.fullmatch(r"\d+(\.\d+)? (s|ms|µs|ns)", tick) for tick in y_ticks), y_ticks
    assert {"Median time", "O(n²) guide", "size n"} <= set(_texts(root))
    dashed = [line for line in root.iter(f"{SVG}polyline") if line.get("stroke-dasharray")]
    assert len(dashed) == 2  # the guide and its legend sample
    html = render_card(
        dataclasses.replace(verified(), sweep=_sweep()), labels=EN, image_url=image_url
    )
    assert '<details class="fc-section fc-scaling">' in html
    assert figures_for(verified(), (), EN) == []


def test_sweep_under_one_decade_ticks_two_and_five() -> None:
    sweep = (SweepPoint(100, 1.5e-4, 1e-5), SweepPoint(300, 5.5e-4, 1e-5))
    (figure,) = figures_for(dataclasses.replace(verified(), sweep=sweep), (), EN)
    assert _texts(_svg(figure), "fc-yticks") == ["100 µs", "200 µs", "500 µs"]
    narrow = (SweepPoint(100, 2.1e-4, 1e-5), SweepPoint(200, 4.5e-4, 1e-5))
    (figure,) = figures_for(dataclasses.replace(verified(), sweep=narrow), (), EN)
    assert _texts(_svg(figure), "fc-yticks") == ["200 µs", "300 µs", "400 µs"]  # every digit


def test_sweep_skips_points_a_log_axis_cannot_show() -> None:
    sweep = (SweepPoint(0, 1e-3, 0.0), SweepPoint(8, 0.0, 0.0))
    assert figures_for(dataclasses.replace(verified(), sweep=sweep), (), EN) == []
    sweep = (SweepPoint(64, 2e-3, 5e-3),)  # one point, spread larger than the median
    (figure,) = figures_for(dataclasses.replace(verified(), sweep=sweep), (), EN)
    assert _texts(_svg(figure), "fc-xticks") == ["64"]


def test_sweep_in_chinese() -> None:
    (figure,) = figures_for(dataclasses.replace(verified(), sweep=_sweep()), (), ZH)
    assert figure.title == "耗时随规模变化"
    assert {"中位耗时", "O(n²) 参考线", "规模 n"} <= set(_texts(_svg(figure)))


def test_card_puts_figures_in_their_sections() -> None:
    html = render_card(
        mismatch(arrays={**mismatch().arrays, "weights": np.ones((2, 5, 7))}),
        labels=EN,
        image_url=image_url,
    )
    assert '<details class="fc-section fc-delta" open><summary>Where they differ</summary>' in html
    assert '<details class="fc-section fc-figures"><summary>Heatmaps</summary>' in html
    assert 'loading="lazy"' in html and 'width="480" height="340"' in html
    assert 'src="assets/formula-check/sdpa-weights.svg?v=1' in html


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


def first_result_seconds(results: list[CheckResult]) -> float:
    """The seconds of the result the JSON lists third (page order), rounded as written."""
    ordered = sorted(results, key=lambda r: (r.location.path, r.location.line, r.block_id))
    return round(ordered[2].elapsed, 4)


def test_report_json_round_trips() -> None:
    text = report_json(_results())
    document = json.loads(text)
    assert text == json.dumps(document, sort_keys=True, indent=2, ensure_ascii=False) + "\n"
    assert document["summary"] == {
        "total": 5,
        "failed": 3,
        "outcomes": {"verified": 2, "mismatch": 2, "error": 1},
        "formulas_not_checked": 0,
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
        "seconds",
        "notes",
        "formula",
        "regimes",
        "verdicts",
    }
    assert first["notes"] == ["mask convention: additive (-1e9)"]
    assert first["regimes"] == ["standard"]
    assert [v["name"] for v in first["verdicts"]] == ["output"]
    assert first["formula"] is None  # no LaTeX was compiled for this hand-made result
    assert first["status"] == "verified" and first["outcome_ok"] is True
    assert first["max_abs_error"] == pytest.approx(7.2e-7)
    assert first["timings"]["function"] == pytest.approx(1e-3)
    assert first["cached"] is True
    assert first["seconds"] == first_result_seconds(_results())
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


def test_a_timeout_card_says_its_message_in_the_card_language() -> None:
    result = CheckResult(
        "hangs",
        Location("docs/page.md", 5),
        "attention",
        Status.TIMEOUT,
        message="timed out: no answer within 2 s; its process was stopped",
    )
    chinese = render_card(result, labels=ZH, image_url=image_url, timeout=2.0)
    assert "2 秒内没有结果：工作进程已被终止" in chinese and "no answer" not in chinese
    english = render_card(result, labels=EN, image_url=image_url, timeout=2.0)
    assert "No answer within 2 s: the worker was stopped" in english
    assert "no answer within 2 s" in render_card(result, labels=ZH, image_url=image_url), (
        "without the block's timeout (a hand-made result) the message is shown as it is"
    )


def test_inf_and_nan_on_both_sides_render_a_mismatch_quietly() -> None:
    """From the comparison to the card, the report and the terminal: no NumPy RuntimeWarning
    (warnings are errors in this suite), and every face says the values were not finite."""
    from formula_check.checking.compare import delta_array
    from formula_check.project.ci_formats import text_card
    from support import compare

    actual = np.array([[1.0, np.inf, np.nan], [-np.inf, 0.5, 2.0]], dtype=np.float32)
    expected = np.array([[np.inf, np.inf, 1.0], [np.nan, 0.5, 2.0]])
    verdict = compare("output", actual, expected, ("n", "d_v"), 1e-5, 1e-5)
    delta = delta_array(actual, expected)
    assert delta is not None
    result = CheckResult(
        block_id="inf",
        location=Location("docs/attention.md", 42),
        oracle="softmax",
        status=Status.MISMATCH,
        verdicts=(verdict,),
        shapes=(ShapeInfo("output", "output", (2, 3), ("n", "d_v")),),
        arrays={
            "output": actual,
            "weights": actual[np.newaxis],
            "hidden": actual,
            "delta": delta,
            "delta_worst": np.asarray(verdict.worst_index, dtype=np.int64),
        },
    )
    said = "3 NaN/Inf values in the result; 3 in the oracle&#x27;s expected values"
    for labels in (EN, ZH):
        card = render_card(result, labels=labels, image_url=image_url)
        assert said in card
        assert len(figures_for(result, None, labels)) == 4  # weights, output, hidden, |Δ|
    assert "3 NaN/Inf values in the result; 3 in the oracle's expected values" in text_card(
        result, Path()
    )
    [block] = json.loads(report_json([result]))["blocks"]
    assert block["status"] == "mismatch"


def test_an_error_card_leads_with_the_message_tensorflow_buried() -> None:
    wrapped = (
        "{{function_node __wrapped__MatMul_device_/job:localhost/replica:0/task:0/device:CPU:0}} "
        "Matrix size-incompatible: In[0]: [2,5,7], In[1]: [2,6,4] [Op:BatchMatMulV2] name: "
    )
    failure = SnippetFailure("InvalidArgumentError", wrapped, Location("docs/a.md", 9))
    result = CheckResult("mm", Location("docs/a.md", 3), "attention", Status.ERROR, failure=failure)
    card = render_card(result, labels=EN, image_url=image_url)
    shown = re.search(r'<pre class="fc-error-message"><code>(.*?)</code></pre>', card, re.S)
    assert shown is not None
    assert shown.group(1).startswith("Matrix size-incompatible: In[0]: [2,5,7]")
    assert "function_node" not in shown.group(1)
    assert '<details class="fc-section fc-full-message"><summary>Full message</summary>' in card
    assert "{{function_node __wrapped__MatMul" in card, "the whole message is one click away"


def test_an_error_card_with_a_plain_message_has_no_second_copy() -> None:
    failure = SnippetFailure("ValueError", "shapes differ", None)
    result = CheckResult("v", Location("docs/a.md", 3), "attention", Status.ERROR, failure=failure)
    assert "fc-full-message" not in render_card(result, labels=ZH, image_url=image_url)


@pytest.mark.parametrize(
    ("label", "english", "chinese"),
    [
        ("eager", "eager", "即时执行（eager）"),
        ("eager (timing)", "eager (timing run)", "即时执行（eager），计时运行"),
        ("tf.function (timing)", "tf.function (timing run)", "tf.function，计时运行"),
        ("oracle (NumPy float64)", "NumPy oracle (float64)", "NumPy 参考实现（float64）"),
    ],
)
def test_every_timing_row_is_named_in_the_card_language(
    label: str, english: str, chinese: str
) -> None:
    assert (EN.timing_name(label), ZH.timing_name(label)) == (english, chinese)


def test_report_json_lists_a_notebooks_cells_by_number() -> None:
    cells = [
        dataclasses.replace(
            verified(), location=Location(f"nb.ipynb:cell {n}", 3), block_id=f"c{n}"
        )
        for n in (10, 2, 1)
    ]
    document = json.loads(report_json([*cells, verified()]))
    assert [b["page"] for b in document["blocks"]] == [
        "docs/attention.md",
        "nb.ipynb:cell 1",
        "nb.ipynb:cell 2",
        "nb.ipynb:cell 10",
    ]


@pytest.mark.parametrize(
    ("account", "label"),
    [
        ("", "float32 rounding, up to 0.2"),
        (
            "+ int8 quantization: its activations' rounding as measured (up to 0.058)",
            "float32 and the artifact's own rounding, up to 0.2",
        ),
        (
            "+ float16 outputs: one float16 rounding added",
            "float32 and the artifact's own rounding, up to 0.2",
        ),
    ],
)
def test_a_tolerance_widened_by_the_artifacts_rounding_says_so_in_its_column(
    account: str, label: str
) -> None:
    how = f"derived: 64 × float32 rounding + float32 ulp {account}".strip()
    verdict = dataclasses.replace(_ok_verdict(), atol=0.2, rtol=0.0, tolerance=how)
    result = dataclasses.replace(verified(), verdicts=(verdict,))
    html = render_card(result, labels=EN, image_url=image_url)
    assert label.replace("'", "&#x27;") in html
    if account:
        assert "float32 rounding, up to" not in html
