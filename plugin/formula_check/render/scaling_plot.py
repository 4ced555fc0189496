"""The scaling plot: a check's median time at each size of the swept dimension, on log-log
axes, beside an O(n²) guide through the largest size."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from formula_check.render.labels import Labels
from formula_check.render.layout import (
    GAP,
    GRID_COLOUR,
    GUIDE_COLOUR,
    LABEL_SIZE,
    LINE_COLOUR,
    PAD,
    SWEEP_SIZE,
    TICK,
    TICK_SIZE,
    Box,
    describe,
    finish,
)
from formula_check.render.picture import Figure
from formula_check.render.svg import AXIS_COLOUR, Svg, fit_text, text_width
from formula_check.results import SweepPoint, format_seconds


def _log_range(low: float, high: float, *, least: float = 0.6) -> tuple[float, float]:
    """Decade exponents spanning ``[low, high]`` with a 5% margin, at least ``least`` wide."""
    start, stop = math.log10(low), math.log10(high)
    margin = 0.05 * (stop - start)
    start, stop = start - margin, stop + margin
    if stop - start < least:
        middle = (start + stop) / 2
        start, stop = middle - least / 2, middle + least / 2
    return start, stop


def _log_ticks(start: float, stop: float) -> list[float]:
    """Round durations between two decade exponents, for a log axis.

    Decades; under one decade, 2 and 5 times them as well; if that still leaves fewer than
    three, every digit. Over eight decades, every other decade (or third...).
    """
    candidates = ((1,), (1, 2, 5), tuple(range(1, 10)))
    for least, mantissas in zip((2, 3, 0), candidates, strict=True):
        if mantissas == (1,) and stop - start < 1:
            continue
        ticks = [
            float(f"{mantissa * 10.0**power:.6g}")
            for power in range(math.floor(start), math.ceil(stop) + 1)
            for mantissa in mantissas
            if start <= math.log10(mantissa) + power <= stop
        ]
        if len(ticks) >= least:
            break
    return ticks[:: max(1, math.ceil(len(ticks) / 8))]


@dataclass(frozen=True)
class _LogPlot:
    """A log-log plot area: ``box`` on screen, decade exponents ``xs`` and ``ys`` it spans."""

    box: Box
    xs: tuple[float, float]
    ys: tuple[float, float]

    def x(self, value: float) -> float:
        span = self.xs[1] - self.xs[0]
        return self.box.x + (math.log10(value) - self.xs[0]) / span * self.box.width

    def y(self, value: float) -> float:
        span = self.ys[1] - self.ys[0]
        return self.box.bottom - (math.log10(value) - self.ys[0]) / span * self.box.height


def sweep_figure(points: Sequence[SweepPoint], labels: Labels, sweep_dim: str) -> Figure | None:
    """The scaling plot of ``points``, or None where none can sit on a log axis."""
    usable = sorted((p for p in points if p.size > 0 and p.median > 0), key=lambda p: p.size)
    if not usable:
        return None  # a log-log axis has nowhere to put a zero
    sizes = np.array([p.size for p in usable], dtype=np.float64)
    medians = np.array([p.median for p in usable], dtype=np.float64)
    spreads = np.array([max(p.spread, 0.0) for p in usable], dtype=np.float64)
    # A lower error bar reaching zero has no place on a log axis; stop it just above.
    lower = medians - np.minimum(spreads, medians * 0.99)
    upper = medians + spreads
    guide = medians[-1] * (sizes / sizes[-1]) ** 2

    ys = _log_range(float(min(lower.min(), guide.min())), float(max(upper.max(), guide.max())))
    y_ticks = [(value, format_seconds(value, tick=True)) for value in _log_ticks(*ys)]
    x_ticks = sorted({p.size for p in usable})
    svg = Svg(*SWEEP_SIZE)
    widest = max(text_width(text, TICK_SIZE) for _, text in y_ticks)
    left = PAD + LABEL_SIZE + 4.0 + widest + GAP + TICK
    right = PAD + text_width(str(x_ticks[-1]), TICK_SIZE) / 2
    bottom = PAD + TICK + GAP + TICK_SIZE + 4.0 + LABEL_SIZE + 2.0
    box = Box(left, PAD + 4.0, svg.width - left - right, svg.height - PAD - 4.0 - bottom)
    plot = _LogPlot(box, _log_range(float(sizes[0]), float(sizes[-1])), ys)

    x_title = labels.sweep_axis.format(dim=sweep_dim)
    _log_axes(svg, plot, x_ticks, y_ticks, (labels.median_time, x_title))
    svg.polyline(
        [(plot.x(s), plot.y(g)) for s, g in zip(sizes, guide, strict=True)],
        stroke=GUIDE_COLOUR,
        dash="6 4",
    )
    bars = []
    for size, low, high in zip(sizes, lower, upper, strict=True):
        x, bottom_end, top_end = plot.x(size), plot.y(low), plot.y(high)
        bars += [(x, bottom_end, x, top_end)]
        bars += [(x - 3.0, end, x + 3.0, end) for end in (bottom_end, top_end)]
    svg.segments(bars, stroke=LINE_COLOUR, crisp=False)
    middle = [(plot.x(s), plot.y(m)) for s, m in zip(sizes, medians, strict=True)]
    svg.polyline(middle, stroke=LINE_COLOUR)
    for x, y in middle:
        svg.circle(x, y, 3.5, fill=LINE_COLOUR)
    _legend(svg, box, labels)

    sizes_text = ", ".join(str(p.size) for p in usable)
    alt = describe(labels, labels.scaling_plot, f"{sweep_dim} = {sizes_text}")
    return finish(svg, "sweep", labels.scaling, alt)


def _log_axes(
    svg: Svg,
    plot: _LogPlot,
    x_ticks: Sequence[int],
    y_ticks: Sequence[tuple[float, str]],
    titles: tuple[str, str],
) -> None:
    """Grid, frame, ticks at the measured sizes and at round durations, and axis titles."""
    box = plot.box
    svg.segments(
        [(plot.x(size), box.y, plot.x(size), box.bottom) for size in x_ticks]
        + [(box.x, plot.y(value), box.right, plot.y(value)) for value, _ in y_ticks],
        stroke=GRID_COLOUR,
    )
    svg.rect(box.x, box.y, box.width, box.height, stroke=AXIS_COLOUR)

    svg.segments((plot.x(size), box.bottom, plot.x(size), box.bottom + TICK) for size in x_ticks)
    label_y = box.bottom + TICK + GAP + 0.8 * TICK_SIZE
    shown, last_edge = [], -math.inf
    for size in x_ticks:
        x, text = plot.x(size), str(size)
        half = text_width(text, TICK_SIZE) / 2
        if x - half >= last_edge + 4.0:  # sizes too close to label both: the first one wins
            shown.append((x, label_y, text))
            last_edge = x + half
    svg.labels(shown, size=TICK_SIZE, anchor="middle", css="fc-xticks")
    svg.segments((box.x - TICK, plot.y(value), box.x, plot.y(value)) for value, _ in y_ticks)
    label_x = box.x - TICK - GAP
    items = ((label_x, plot.y(value) + 0.35 * TICK_SIZE, text) for value, text in y_ticks)
    svg.labels(items, size=TICK_SIZE, anchor="end", css="fc-yticks")

    y_title, x_title = titles
    title_y = box.bottom + TICK + GAP + TICK_SIZE + 4.0 + 0.8 * LABEL_SIZE
    fitted = fit_text(x_title, LABEL_SIZE, box.width)
    svg.text(box.x + box.width / 2, title_y, fitted, size=LABEL_SIZE, anchor="middle")
    fitted = fit_text(y_title, LABEL_SIZE, box.height)
    middle = box.y + box.height / 2
    svg.text(
        PAD + 0.8 * LABEL_SIZE, middle, fitted, size=LABEL_SIZE, anchor="middle", vertical=True
    )


def _legend(svg: Svg, plot: Box, labels: Labels) -> None:
    """The key in the plot's upper left corner: median time, then the O(n²) guide."""
    entries = (labels.median_time, labels.legend_guide)
    sample, line = 22.0, TICK_SIZE + 5.0
    room = plot.width - 2 * 8.0 - sample - 16.0
    texts = [fit_text(text, TICK_SIZE, room) for text in entries]
    width = sample + 16.0 + max(text_width(text, TICK_SIZE) for text in texts)
    box = Box(plot.x + 8.0, plot.y + 8.0, width, line * len(texts) + 6.0)
    start, end = box.x + 5.0, box.x + 5.0 + sample
    middles = [box.y + 3.0 + line * (index + 0.5) for index in range(len(texts))]
    with svg.group("fc-legend"):
        svg.rect(box.x, box.y, box.width, box.height, fill="#ffffff", stroke="#bdbdbd")
        svg.polyline([(start, middles[0]), (end, middles[0])], stroke=LINE_COLOUR)
        svg.circle((start + end) / 2, middles[0], 3.5, fill=LINE_COLOUR)
        svg.polyline([(start, middles[1]), (end, middles[1])], stroke=GUIDE_COLOUR, dash="6 4")
        items = ((end + 6.0, y + 0.35 * TICK_SIZE, t) for y, t in zip(middles, texts, strict=True))
        svg.labels(items, size=TICK_SIZE, anchor="start", css="fc-legend-labels")
