"""A heatmap's colour scale: the ends it spans, the colorbar beside it, and the hatching and
key of the cells it has no colour for (NaN and ±inf)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from formula_check.model import Array
from formula_check.render.layout import (
    CBAR_WIDTH,
    GAP,
    HATCH,
    KEY_SIZE,
    LIMIT,
    MOST_TICKS,
    TICK,
    TICK_SIZE,
)
from formula_check.render.svg import (
    AXIS_COLOUR,
    COLORMAPS,
    Svg,
    compact,
    nice_ticks,
    rgb,
    text_width,
)


@dataclass(frozen=True)
class Scale:
    """How values become colours: a colormap over ``[lo, hi]`` (NaN and ±inf are hatched)."""

    cmap: str
    lo: float
    hi: float


def value_range(values: Array, *, lo: float | None = None) -> tuple[float, float]:
    """The colour scale's ends: finite values only, never empty (a constant map gets a unit)."""
    finite = values[np.isfinite(values)]
    low = float(finite.min()) if finite.size else 0.0
    high = float(finite.max()) if finite.size else 1.0
    low = min(max(low if lo is None else lo, -LIMIT), LIMIT)
    high = min(max(high, -LIMIT), LIMIT)
    # A span too thin to divide (a constant map, denormals) gets a width the ticks can use.
    if not high - low > max(abs(low), abs(high), 1e-300) * 1e-9:
        high = low + (abs(low) or 1.0)
    return low, high


def _colorbar_ticks(scale: Scale) -> list[tuple[float, str]]:
    values = nice_ticks(scale.lo, scale.hi, MOST_TICKS)
    return list(zip(values, compact(values), strict=True))


def colorbar(svg: Svg, x: float, top: float, bottom: float, scale: Scale) -> None:
    """A vertical bar of the colormap from ``lo`` (bottom) to ``hi`` (top), ticks at right."""
    height = bottom - top
    svg.rect(x, top, CBAR_WIDTH, height, fill=svg.gradient(COLORMAPS[scale.cmap]))
    svg.rect(x, top, CBAR_WIDTH, height, stroke=AXIS_COLOUR)
    ticks = [
        (bottom - (value - scale.lo) / (scale.hi - scale.lo) * height, text)
        for value, text in _colorbar_ticks(scale)
    ]
    right = x + CBAR_WIDTH
    svg.segments((right, y, right + TICK, y) for y, _ in ticks)
    label_x = right + TICK + GAP
    svg.labels(
        ((label_x, y + 0.35 * TICK_SIZE, text) for y, text in ticks),
        size=TICK_SIZE,
        anchor="start",
        css="fc-colorbar",
    )


def colorbar_width(scale: Scale) -> float:
    """How wide the colorbar of ``scale`` is with its tick labels."""
    widest = max(text_width(text, TICK_SIZE) for _, text in _colorbar_ticks(scale))
    return CBAR_WIDTH + TICK + GAP + widest


def hatched(pixels: Array, missing: Array) -> Array:
    """``pixels`` with the ``missing`` ones in diagonal stripes, two pixels of each grey."""
    rows, cols = np.indices(missing.shape)
    dark = (rows + cols) // 2 % 2 == 1
    striped: Array = pixels.copy()
    striped[missing & ~dark] = rgb(HATCH[0])
    striped[missing & dark] = rgb(HATCH[1])
    return striped


def nonfinite_key(svg: Svg, x: float, y: float, text: str) -> None:
    """The key of the hatched cells: a striped square (as drawn in the grid) and ``text``."""
    size = KEY_SIZE
    stripes = [
        (x + start, y + size - (c - start), x + end, y + size - (c - end))
        for c in np.arange(2.0, 2 * size, 4.0)
        for start, end in [(max(0.0, c - size), min(c, size))]
    ]
    with svg.group("fc-nonfinite-key"):
        svg.rect(x, y, size, size, fill=HATCH[0])
        svg.segments(stripes, stroke=HATCH[1], width=1.4, crisp=False)
        svg.rect(x, y, size, size, stroke=AXIS_COLOUR)
        svg.text(x + size + GAP + 2.0, y + size - 2.0, text, size=TICK_SIZE)


def key_width(text: str) -> float:
    """How wide the key of the hatched cells is with ``text``."""
    return KEY_SIZE + GAP + 2.0 + text_width(text, TICK_SIZE)
