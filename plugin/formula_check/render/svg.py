"""Hand-drawn SVG: the few primitives the figures need, from NumPy and the standard library.

A figure is a short list of SVG elements around one embedded PNG (the value grid), so drawing
one costs about a millisecond and needs no plotting library. Text stays text: the browser sets
it in the page's language and fonts. Every number is written with a fixed format and every id
is derived from what it names, so the same input always gives the same bytes.
"""

from __future__ import annotations

import hashlib
import html
import itertools
import math
import re
import struct
import unicodedata
import zlib
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager

import numpy as np

from formula_check.model import Array
from formula_check.render.picture import data_uri

FONT_FAMILY = (
    "system-ui, -apple-system, 'Segoe UI', Roboto, 'Noto Sans', 'Noto Sans CJK SC', "
    "'Microsoft YaHei', sans-serif"
)
TEXT_COLOUR = "#212121"
AXIS_COLOUR = "#616161"
BACKGROUND = "#ffffff"
DARK_STYLE = (
    "@media (prefers-color-scheme: dark) {"
    " .fc-background, .fc-legend rect { fill: #1e2129; }"
    f' text {{ fill: #e0e0e0; }} [stroke="{AXIS_COLOUR}"] {{ stroke: #9e9e9e; }} }}'
)
"""A figure in a dark page: a browser draws an ``<img>``'s SVG in the colour scheme of the
element (the stylesheet gives card figures ``color-scheme: dark`` on a dark palette), so the
figure's background and text follow the page while its colour scale stays the same."""

# 33 evenly spaced anchors of matplotlib's colormaps (sampled once, at development time);
# interpolating between them is within 3/255 of the 256-entry originals.
_ANCHORS = {
    "viridis": (
        "440154 470d60 48186a 482374 472d7b 453781 424086 3e4989 3b528b 375b8d 33638d "
        "2f6b8e 2c728e 297a8e 26828e 23898e 21918c 1f988b 1fa088 22a785 28ae80 32b67a "
        "3fbc73 4ec36b 5ec962 70cf57 84d44b 98d83e addc30 c2df23 d8e219 ece51b fde725"
    ),
    "magma": (
        "000004 030312 0a0822 130d34 1d1147 29115a 36106b 440f76 51127c 5d177f 6a1c81 "
        "762181 832681 902a81 9c2e7f aa337d b73779 c43c75 d0416f dc4869 e75263 ef5d5e "
        "f56b5c f9795d fc8961 fd9869 fea772 feb67c fec488 fed395 fde2a3 fcf0b2 fcfdbf"
    ),
}
COLORMAPS: dict[str, tuple[str, ...]] = {
    name: tuple(f"#{anchor}" for anchor in anchors.split()) for name, anchors in _ANCHORS.items()
}
"""Each colormap as its anchor colours, lowest value first."""


def rgb(colour: str) -> tuple[int, int, int]:
    """``#rrggbb`` as three integers."""
    red, green, blue = bytes.fromhex(colour[1:])
    return red, green, blue


_TABLES = {
    name: np.array([rgb(colour) for colour in colours], dtype=np.float64)
    for name, colours in COLORMAPS.items()
}

# Characters XML 1.0 forbids even as references: a dim name carrying one must not break the file.
_NOT_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")


def escape(text: str) -> str:
    """``text`` safe as XML character data and inside a double-quoted attribute."""
    return html.escape(_NOT_XML.sub("", text), quote=True)


def num(value: float) -> str:
    """A coordinate with at most two decimals: fixed, so output bytes never drift."""
    return f"{round(value, 2) + 0.0:g}"  # + 0.0: no "-0"


def text_width(text: str, size: float) -> float:
    """A generous estimate of rendered width: 1 em for wide (CJK) characters, 0.6 em else."""
    return size * sum(1.0 if unicodedata.east_asian_width(c) in "WF" else 0.6 for c in text)


def fit_text(text: str, size: float, width: float) -> str:
    """``text``, cut with an ellipsis where its estimated width would exceed ``width``."""
    if text_width(text, size) <= width:
        return text
    while text and text_width(text + "…", size) > width:
        text = text[:-1]
    return text + "…" if text else ""


def colorize(values: Array, cmap: str, lo: float, hi: float, bad: str) -> Array:
    """``values`` (2-D) as 8-bit RGB: ``cmap`` over ``[lo, hi]``, ``bad`` where non-finite."""
    table = _TABLES[cmap]
    finite = np.isfinite(values)
    with np.errstate(all="ignore"):
        scaled = (np.where(finite, values, lo) - lo) / (hi - lo)
    position = np.clip(scaled, 0.0, 1.0) * (len(table) - 1)  # hi > lo, both finite: no NaN
    index = np.minimum(position.astype(np.intp), len(table) - 2)
    fraction = (position - index)[..., np.newaxis]
    colours = table[index] * (1.0 - fraction) + table[index + 1] * fraction
    pixels: Array = np.rint(colours).astype(np.uint8)
    pixels[~finite] = rgb(bad)
    return pixels


def sample(count: int, length: float, *, block: int = 6) -> tuple[Array, int]:
    """Which of ``count`` cells drawn over ``length`` px the image keeps, and how many pixels each.

    A browser that smooths a stretched image blurs about one source pixel at every edge, so a
    cell becomes a block of ``block`` pixels (fewer if it is drawn smaller): the blur stays a
    thin rim where ``image-rendering`` is ignored. A grid finer than the screen is sampled
    (nearest cell) down to one value per drawn pixel, so the image never outgrows its box.
    """
    if count <= length:
        return np.arange(count), max(1, min(math.ceil(length / count), block))
    pixels = max(1, math.ceil(length))
    return ((np.arange(pixels) + 0.5) * (count / pixels)).astype(np.intp), 1


def upscale(pixels: Array, across: int, down: int) -> Array:
    """Each pixel repeated into a block ``across`` wide and ``down`` high."""
    blocks: Array = np.repeat(np.repeat(pixels, down, axis=0), across, axis=1)
    return blocks


def png(pixels: Array) -> bytes:
    """An 8-bit RGB PNG of ``pixels`` (rows, columns, 3): filter 0 on every row, no metadata."""
    height, width = pixels.shape[:2]
    rows = np.zeros((height, 1 + 3 * width), dtype=np.uint8)
    rows[:, 1:] = pixels.reshape(height, 3 * width)

    def chunk(kind: bytes, body: bytes) -> bytes:
        check = zlib.crc32(kind + body)
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", check)

    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return b"".join(
        (
            b"\x89PNG\r\n\x1a\n",
            chunk(b"IHDR", header),
            chunk(b"IDAT", zlib.compress(rows.tobytes(), 6)),
            chunk(b"IEND", b""),
        )
    )


def integer_ticks(count: int, most: int) -> list[int]:
    """At most ``most`` indices in ``range(count)``, every 1, 2, 5, 10, 20, 50... from 0."""
    for step in _steps((1, 2, 5)):
        ticks = range(0, count, round(step))
        if len(ticks) <= max(most, 1):
            return list(ticks)
    raise AssertionError("unreachable")  # pragma: no cover


def nice_ticks(lo: float, hi: float, most: int) -> list[float]:
    """At most ``most`` round values in ``[lo, hi]``: 1, 2, 2.5 or 5 times a power of ten."""
    exponent = math.floor(math.log10((hi - lo) / most))
    for step in _steps((1, 2, 2.5, 5), exponent):
        first, last = math.ceil(lo / step - 1e-9), math.floor(hi / step + 1e-9)
        if last - first + 1 <= most:
            return [float(f"{k * step:.12g}") + 0.0 for k in range(first, last + 1)]
    raise AssertionError("unreachable")  # pragma: no cover


def _steps(mantissas: Sequence[float], exponent: int = 0) -> Iterator[float]:
    for power in itertools.count(exponent):
        for mantissa in mantissas:
            yield mantissa * 10.0**power


def compact(values: Sequence[float]) -> list[str]:
    """Short labels (``0.25``, ``1e-07``) with just enough digits to tell them apart."""
    for digits in range(3, 18):
        texts = [format(value + 0.0, f".{digits}g") for value in values]
        if len(set(texts)) == len(texts):
            return texts
    return texts


class Svg:
    """One SVG 1.1 document under construction: elements in drawing order, then :meth:`finish`."""

    def __init__(self, width: int, height: int) -> None:
        self.width = width
        self.height = height
        self._defs: dict[str, str] = {}
        self._body: list[str] = []

    @contextmanager
    def group(self, css: str) -> Iterator[None]:
        """Elements drawn inside the block share a ``<g class="css">`` (tests find them by it)."""
        self._body.append(f'<g class="{css}">')
        yield
        self._body.append("</g>")

    def rect(
        self,
        x: float,
        y: float,
        width: float,
        height: float,
        *,
        fill: str = "none",
        stroke: str | None = None,
    ) -> None:
        """A rectangle; with ``stroke``, a crisp 1 px outline."""
        line = f' stroke="{stroke}" shape-rendering="crispEdges"' if stroke else ""
        self._body.append(
            f'<rect x="{num(x)}" y="{num(y)}" width="{num(width)}" height="{num(height)}" '
            f'fill="{fill}"{line}/>'
        )

    def segments(
        self,
        lines: Iterable[tuple[float, float, float, float]],
        *,
        stroke: str = AXIS_COLOUR,
        width: float = 1.0,
        crisp: bool = True,
    ) -> None:
        """Separate straight lines ``(x1, y1, x2, y2)`` as one path (tick marks, grid lines).

        ``crisp`` snaps axis-parallel strokes to whole pixels.
        """
        steps = "".join(f"M{num(a)} {num(b)}L{num(c)} {num(d)}" for a, b, c, d in lines)
        if not steps:
            return
        snap = ' shape-rendering="crispEdges"' if crisp else ""
        self._body.append(
            f'<path d="{steps}" fill="none" stroke="{stroke}" stroke-width="{num(width)}"{snap}/>'
        )

    def polyline(
        self,
        points: Sequence[tuple[float, float]],
        *,
        stroke: str,
        width: float = 1.5,
        dash: str | None = None,
    ) -> None:
        """A connected line through ``points``."""
        coordinates = " ".join(f"{num(x)},{num(y)}" for x, y in points)
        dashes = f' stroke-dasharray="{dash}"' if dash else ""
        self._body.append(
            f'<polyline points="{coordinates}" fill="none" stroke="{stroke}" '
            f'stroke-width="{num(width)}" stroke-linejoin="round"{dashes}/>'
        )

    def circle(
        self,
        cx: float,
        cy: float,
        r: float,
        *,
        fill: str = "none",
        stroke: str | None = None,
        width: float = 1.0,
    ) -> None:
        """A circle: a marker, or a ring with ``stroke``."""
        ring = f' stroke="{stroke}" stroke-width="{num(width)}"' if stroke else ""
        self._body.append(
            f'<circle cx="{num(cx)}" cy="{num(cy)}" r="{num(r)}" fill="{fill}"{ring}/>'
        )

    def text(
        self,
        x: float,
        y: float,
        content: str,
        *,
        size: float,
        anchor: str = "start",
        vertical: bool = False,
    ) -> None:
        """Text whose baseline starts (or is centred, ``anchor``) at ``(x, y)``, escaped here.

        ``vertical`` turns it a quarter to the left about ``(x, y)``, reading upwards.
        """
        turn = f' transform="rotate(-90 {num(x)} {num(y)})"' if vertical else ""
        self._body.append(
            f'<text x="{num(x)}" y="{num(y)}" font-size="{num(size)}" text-anchor="{anchor}" '
            f'fill="{TEXT_COLOUR}"{turn}>{escape(content)}</text>'
        )

    def labels(
        self, items: Iterable[tuple[float, float, str]], *, size: float, anchor: str, css: str
    ) -> None:
        """Several short texts in one styled ``<g class="css">``: tick labels."""
        texts = "".join(f'<text x="{num(x)}" y="{num(y)}">{escape(t)}</text>' for x, y, t in items)
        self._body.append(
            f'<g class="{css}" font-size="{num(size)}" text-anchor="{anchor}" '
            f'fill="{TEXT_COLOUR}">{texts}</g>'
        )

    def image(self, x: float, y: float, width: float, height: float, data: bytes) -> None:
        """An embedded PNG stretched over the box, drawn with hard pixel edges."""
        self._body.append(
            f'<image x="{num(x)}" y="{num(y)}" width="{num(width)}" height="{num(height)}" '
            'preserveAspectRatio="none" image-rendering="optimizeSpeed" '
            'style="image-rendering:pixelated" '
            f'xlink:href="{data_uri("image/png", data)}"/>'
        )

    def gradient(self, colours: Sequence[str]) -> str:
        """A bottom-to-top gradient through ``colours``; returns its ``url(#...)`` paint.

        The id is a digest of the stops: equal ids always mean equal gradients, so even
        figures inlined side by side in one page cannot paint with each other's colours.
        """
        digest = hashlib.sha256(" ".join(colours).encode("ascii")).hexdigest()[:10]
        ident = f"fc-gradient-{digest}"
        if ident not in self._defs:
            last = max(len(colours) - 1, 1)
            stops = "".join(
                f'<stop offset="{index / last:.4f}" stop-color="{colour}"/>'
                for index, colour in enumerate(colours)
            )
            self._defs[ident] = (
                f'<linearGradient id="{ident}" x1="0" y1="1" x2="0" y2="0">{stops}</linearGradient>'
            )
        return f"url(#{ident})"

    def finish(self, title: str) -> bytes:
        """The whole document as UTF-8 bytes: white background (dark in a dark page, see
        :data:`DARK_STYLE`), ``title`` for assistive tech."""
        size = f'width="{self.width}" height="{self.height}"'
        defs = f"<defs>{''.join(self._defs.values())}</defs>\n" if self._defs else ""
        return "".join(
            (
                '<?xml version="1.0" encoding="UTF-8"?>\n',
                '<svg xmlns="http://www.w3.org/2000/svg" '
                'xmlns:xlink="http://www.w3.org/1999/xlink" version="1.1" ',
                f'{size} viewBox="0 0 {self.width} {self.height}" font-family="{FONT_FAMILY}">\n',
                f"<title>{escape(title)}</title>\n",
                f"<style>{DARK_STYLE}</style>\n",
                defs,
                f'<rect class="fc-background" {size} fill="{BACKGROUND}"/>\n',
                "\n".join(self._body),
                "\n</svg>\n",
            )
        ).encode("utf-8")
