"""Small, reproducible SVG figures of what a check computed: heatmaps, |Δ| and scaling.

Conventions for ``CheckResult.arrays`` (the engine fills them):

``weights``
    attention weights ``(b, n, m)`` or, multi-head, ``(b, h, n, m)``;
``output``
    a positional-encoding matrix ``(pos, dim)`` (only a 2-D ``output`` is drawn);
``hidden``
    feed-forward activations ``(b, n, d_ff)``;
``NAME:oracle``
    the oracle's values of one of those three, where the code's differ from them (drawn side
    by side) or have another shape (drawn alone); ``NAME`` itself is the code's values;
``delta`` and ``delta_worst``
    ``|actual - expected|`` of the worst mismatching output (any rank) and its worst index.

Every value heatmap says whose values it shows, the code's or the oracle's. A result cached
before ``NAME:oracle`` existed has ``NAME`` alone: the code's values when their shape was the
oracle's, else the oracle's, which its verdict tells apart. A NaN or an infinity is drawn
hatched, outside the colour scale (made from the finite values), with a key of its own.

Every figure is drawn by hand with :mod:`.svg`: about a millisecond each, text set by the
browser (so words follow the page's language), identical bytes for identical input.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ..model import (
    VALUE_HEATMAPS,
    Array,
    CheckResult,
    SweepPoint,
    Verdict,
    format_seconds,
    largest_index,
)
from .labels import Labels
from .picture import SMALLEST_TEXT, Figure
from .svg import (
    AXIS_COLOUR,
    COLORMAPS,
    Svg,
    colorize,
    compact,
    fit_text,
    integer_ticks,
    nice_ticks,
    png,
    rgb,
    sample,
    text_width,
    upscale,
)

# Type sizes and spacing, in CSS pixels. A white figure with dark text reads the same on
# Material's light and slate palettes (the stylesheet adds a thin border on slate).
_TICK_SIZE = SMALLEST_TEXT  # a page keeps this readable: it shrinks a figure only so far
_LABEL_SIZE = 12.0
_TITLE_SIZE = 13.0
_TICK = 4.0  # tick mark length
_GAP = 2.0  # between a tick mark and its label
_PAD = 8.0  # figure edge
_TITLE_LINE = _TITLE_SIZE + 7.0
_CBAR_WIDTH = 12.0
_PANEL_GAP = 12.0  # right of and below each heatmap panel
_MOST_TICKS = 6

_HEAD_COLUMNS = 4
_GRID_WIDTH = 600
_GRID_ROW = 180  # one row of multi-head panels
_WEIGHTS_SIZE = (420, 320)
_MATRIX_SIZE = (600, 300)
_PAIR_WIDTH = 720  # a matrix of the code's beside the oracle's
_DELTA_SIZE = (480, 340)
_SWEEP_SIZE = (480, 320)

_MARKER_COLOUR = "#00e5ff"  # cyan: far from every colour of magma, so the worst cell stands out
# NaN and ±inf: light and dark grey stripes, in neither colormap (nor mistaken for the marker)
_HATCH = ("#bdbdbd", "#616161")
_KEY_SIZE = 12.0  # the hatched square of the NaN/Inf key, under the colorbar
_ORACLE = ":oracle"  # NAME:oracle holds the oracle's values of heatmap NAME
_LINE_COLOUR = "#1565c0"
_GUIDE_COLOUR = "#757575"
_GRID_COLOUR = "#e0e0e0"
_LIMIT = 1e307  # colour scales stay finite even for values near the float64 maximum


@dataclass(frozen=True)
class _Box:
    x: float
    y: float
    width: float
    height: float

    @property
    def right(self) -> float:
        return self.x + self.width

    @property
    def bottom(self) -> float:
        return self.y + self.height


@dataclass(frozen=True)
class _Scale:
    """How values become colours: a colormap over ``[lo, hi]`` (NaN and ±inf are hatched)."""

    cmap: str
    lo: float
    hi: float


@dataclass(frozen=True)
class _Side:
    """The values one value heatmap draws, and whose they are (the code's or the oracle's)."""

    values: Array
    whose: str


def draw_figures(
    result: CheckResult,
    heatmaps: tuple[str, ...] | None,
    labels: Labels,
    *,
    sweep_dim: str = "n",
) -> list[Figure]:
    """The figures for one result, in display order.

    ``heatmaps`` picks among :data:`VALUE_HEATMAPS` (``None``: every one with data; ``()``:
    none). The |Δ| heatmap and the scaling plot are diagnostics and appear whenever the
    result carries their data.
    """
    wanted = VALUE_HEATMAPS if heatmaps is None else heatmaps
    unknown = [name for name in wanted if name not in VALUE_HEATMAPS]
    if unknown:
        raise ValueError(f"unknown heatmap {unknown[0]!r}; choose from {', '.join(VALUE_HEATMAPS)}")
    arrays = result.arrays
    figures: list[Figure | None] = []
    if "weights" in wanted and _sides(result, "weights", labels):
        figures.append(_weights_figure(result, labels))
    if "output" in wanted and _sides(result, "output", labels):
        figures.append(_encoding_figure(result, labels))
    if "hidden" in wanted and _sides(result, "hidden", labels):
        figures.append(_hidden_figure(result, labels))
    if "delta" in arrays:
        figures.append(_delta_figure(result, labels))
    if result.sweep:
        figures.append(_sweep_figure(result.sweep, labels, sweep_dim))
    return [figure for figure in figures if figure is not None]


def _finish(svg: Svg, name: str, title: str, alt: str) -> Figure:
    data = svg.finish(alt)
    return Figure(name=name, title=title, alt=alt, data=data, width=svg.width, height=svg.height)


def _dims(result: CheckResult, name: str, rank: int, default: Sequence[str]) -> tuple[str, ...]:
    """The oracle's dim names for array ``name`` when the result knows them."""
    for shape in result.shapes:
        if shape.name == name and len(shape.dims) == rank:
            return shape.dims
    for verdict in result.verdicts:
        if verdict.name == name and len(verdict.dims) == rank:
            return verdict.dims
    return tuple(default)[-rank:] if rank <= len(default) else tuple(f"d{i}" for i in range(rank))


def _describe(labels: Labels, *parts: str) -> str:
    return labels.separator.join(part for part in parts if part)


def _sides(result: CheckResult, name: str, labels: Labels) -> list[_Side]:
    """The values heatmap ``name`` draws: the code's, the oracle's, or both (code first)."""
    arrays = result.arrays
    oracle = arrays.get(name + _ORACLE)
    sides = []
    if name in arrays:
        # the code's, unless a result cached before NAME:oracle existed says otherwise
        code = oracle is not None or _code_shaped(result, name)
        whose = labels.code_side if code else labels.oracle_side
        sides.append(_Side(np.asarray(arrays[name], dtype=np.float64), whose))
    if oracle is not None:
        sides.append(_Side(np.asarray(oracle, dtype=np.float64), labels.oracle_side))
    return sides


def _code_shaped(result: CheckResult, name: str) -> bool:
    """Was the code's ``name`` compared, with the oracle's shape? (Then, in a result cached
    before ``NAME:oracle`` existed, ``NAME`` holds the code's values, else the oracle's.)"""
    verdict = next((v for v in result.verdicts if v.name == name), None)
    return verdict is not None and verdict.actual_shape == verdict.expected_shape


def _whose(labels: Labels, sides: Sequence[_Side]) -> str:
    """``code``, ``oracle`` or, side by side, ``code, oracle``."""
    return labels.separator.join(side.whose for side in sides)


# Heatmaps ----------------------------------------------------------------------------------


def _value_range(values: Array, *, lo: float | None = None) -> tuple[float, float]:
    """The colour scale's ends: finite values only, never empty (a constant map gets a unit)."""
    finite = values[np.isfinite(values)]
    low = float(finite.min()) if finite.size else 0.0
    high = float(finite.max()) if finite.size else 1.0
    low = min(max(low if lo is None else lo, -_LIMIT), _LIMIT)
    high = min(max(high, -_LIMIT), _LIMIT)
    # A span too thin to divide (a constant map, denormals) gets a width the ticks can use.
    if not high - low > max(abs(low), abs(high), 1e-300) * 1e-9:
        high = low + (abs(low) or 1.0)
    return low, high


def _colorbar_ticks(scale: _Scale) -> list[tuple[float, str]]:
    values = nice_ticks(scale.lo, scale.hi, _MOST_TICKS)
    return list(zip(values, compact(values), strict=True))


def _colorbar(svg: Svg, x: float, top: float, bottom: float, scale: _Scale) -> None:
    """A vertical bar of the colormap from ``lo`` (bottom) to ``hi`` (top), ticks at right."""
    height = bottom - top
    svg.rect(x, top, _CBAR_WIDTH, height, fill=svg.gradient(COLORMAPS[scale.cmap]))
    svg.rect(x, top, _CBAR_WIDTH, height, stroke=AXIS_COLOUR)
    ticks = [
        (bottom - (value - scale.lo) / (scale.hi - scale.lo) * height, text)
        for value, text in _colorbar_ticks(scale)
    ]
    right = x + _CBAR_WIDTH
    svg.segments((right, y, right + _TICK, y) for y, _ in ticks)
    label_x = right + _TICK + _GAP
    svg.labels(
        ((label_x, y + 0.35 * _TICK_SIZE, text) for y, text in ticks),
        size=_TICK_SIZE,
        anchor="start",
        css="fc-colorbar",
    )


def _colorbar_width(scale: _Scale) -> float:
    widest = max(text_width(text, _TICK_SIZE) for _, text in _colorbar_ticks(scale))
    return _CBAR_WIDTH + _TICK + _GAP + widest


def _hatched(pixels: Array, missing: Array) -> Array:
    """``pixels`` with the ``missing`` ones in diagonal stripes, two pixels of each grey."""
    rows, cols = np.indices(missing.shape)
    dark = (rows + cols) // 2 % 2 == 1
    striped: Array = pixels.copy()
    striped[missing & ~dark] = rgb(_HATCH[0])
    striped[missing & dark] = rgb(_HATCH[1])
    return striped


def _nonfinite_key(svg: Svg, x: float, y: float, text: str) -> None:
    """The key of the hatched cells: a striped square (as drawn in the grid) and ``text``."""
    size = _KEY_SIZE
    stripes = [
        (x + start, y + size - (c - start), x + end, y + size - (c - end))
        for c in np.arange(2.0, 2 * size, 4.0)
        for start, end in [(max(0.0, c - size), min(c, size))]
    ]
    with svg.group("fc-nonfinite-key"):
        svg.rect(x, y, size, size, fill=_HATCH[0])
        svg.segments(stripes, stroke=_HATCH[1], width=1.4, crisp=False)
        svg.rect(x, y, size, size, stroke=AXIS_COLOUR)
        svg.text(x + size + _GAP + 2.0, y + size - 2.0, text, size=_TICK_SIZE)


def _key_width(text: str) -> float:
    return _KEY_SIZE + _GAP + 2.0 + text_width(text, _TICK_SIZE)


def _plot_area(outer: _Box, rows: int, dims: tuple[str, str], *, titled: bool) -> _Box:
    """The cells' rectangle inside a panel, leaving room for title, ticks and axis titles."""
    top = _TITLE_LINE if titled else 0.0
    ticks = text_width(str(max(rows - 1, 0)), _TICK_SIZE)
    left = _TICK + _GAP + ticks + (4.0 + _LABEL_SIZE if dims[0] else 0.0)
    bottom = _TICK + _GAP + _TICK_SIZE + (4.0 + _LABEL_SIZE if dims[1] else 0.0) + 2.0
    return _Box(outer.x + left, outer.y + top, outer.width - left, outer.height - top - bottom)


def _heatmap(
    svg: Svg, plot: _Box, plane: Array, scale: _Scale, dims: tuple[str, str], title: str
) -> None:
    """One grid of cells with its frame, integer ticks at cell centres and axis titles."""
    rows, cols = plane.shape
    cell = (plot.width / cols, plot.height / rows)
    taken_rows, down = sample(rows, plot.height)
    taken_cols, across = sample(cols, plot.width)
    values = plane[np.ix_(taken_rows, taken_cols)]
    pixels = upscale(colorize(values, scale.cmap, scale.lo, scale.hi, _HATCH[0]), across, down)
    missing = upscale(~np.isfinite(values), across, down)
    svg.image(plot.x, plot.y, plot.width, plot.height, png(_hatched(pixels, missing)))
    svg.rect(plot.x, plot.y, plot.width, plot.height, stroke=AXIS_COLOUR)
    if title:
        fitted = fit_text(title, _TITLE_SIZE, plot.width + 2 * _PANEL_GAP)
        svg.text(plot.x + plot.width / 2, plot.y - 7.0, fitted, size=_TITLE_SIZE, anchor="middle")

    room = text_width(str(max(cols - 1, 0)), _TICK_SIZE) + 6.0
    columns = integer_ticks(cols, min(_MOST_TICKS, int(plot.width // room)))
    xs = [(plot.x + (col + 0.5) * cell[0], str(col)) for col in columns]
    svg.segments((x, plot.bottom, x, plot.bottom + _TICK) for x, _ in xs)
    label_y = plot.bottom + _TICK + _GAP + 0.8 * _TICK_SIZE
    svg.labels(
        ((x, label_y, text) for x, text in xs), size=_TICK_SIZE, anchor="middle", css="fc-xticks"
    )

    rows_ticked = integer_ticks(rows, min(_MOST_TICKS, int(plot.height // (_TICK_SIZE + 3.0))))
    ys = [(plot.y + (row + 0.5) * cell[1], str(row)) for row in rows_ticked]
    svg.segments((plot.x - _TICK, y, plot.x, y) for y, _ in ys)
    label_x = plot.x - _TICK - _GAP
    items = ((label_x, y + 0.35 * _TICK_SIZE, text) for y, text in ys)
    svg.labels(items, size=_TICK_SIZE, anchor="end", css="fc-yticks")

    if dims[1]:
        y = plot.bottom + _TICK + _GAP + _TICK_SIZE + 4.0 + 0.8 * _LABEL_SIZE
        name = fit_text(dims[1], _LABEL_SIZE, plot.width)
        svg.text(plot.x + plot.width / 2, y, name, size=_LABEL_SIZE, anchor="middle")
    if dims[0]:
        widest = max(text_width(text, _TICK_SIZE) for _, text in ys)
        x = label_x - widest - 4.0 - 0.2 * _LABEL_SIZE
        name = fit_text(dims[0], _LABEL_SIZE, plot.height)
        middle = plot.y + plot.height / 2
        svg.text(x, middle, name, size=_LABEL_SIZE, anchor="middle", vertical=True)


def _heatmaps(
    svg: Svg,
    planes: Sequence[Array],
    titles: Sequence[str],
    dims: tuple[str, str],
    scale: _Scale,
    labels: Labels,
    *,
    columns: int = 1,
) -> list[_Box]:
    """Panels in a grid of ``columns`` sharing one colorbar at the right (with the NaN/Inf
    key under it when a cell is not finite); their plot boxes."""
    rows = math.ceil(len(planes) / columns)
    nonfinite = any(not np.isfinite(plane).all() for plane in planes)
    bar = _colorbar_width(scale)
    if nonfinite:
        bar = max(bar, _key_width(labels.nonfinite_cells))
    column_width = (svg.width - 2 * _PAD - bar) / columns
    row_height = (svg.height - 2 * _PAD + _PANEL_GAP) / rows
    boxes = []
    for index, (plane, title) in enumerate(zip(planes, titles, strict=True)):
        row, col = divmod(index, columns)
        outer = _Box(
            _PAD + col * column_width,
            _PAD + row * row_height,
            column_width - _PANEL_GAP,
            row_height - _PANEL_GAP,
        )
        plot = _plot_area(outer, plane.shape[0], dims, titled=any(titles))
        with svg.group("fc-panel"):
            _heatmap(svg, plot, plane, scale, dims, title)
        boxes.append(plot)
    x, top, bottom = svg.width - _PAD - bar, min(b.y for b in boxes), max(b.bottom for b in boxes)
    if nonfinite:
        bottom -= _KEY_SIZE + _TITLE_LINE
        _nonfinite_key(svg, x, bottom + _TITLE_LINE, labels.nonfinite_cells)
    _colorbar(svg, x, top, bottom, scale)
    return boxes


def _side_by_side(
    sides: Sequence[_Side], planes: Sequence[Sequence[Array]], titles: Sequence[str], labels: Labels
) -> tuple[list[Array], list[str]]:
    """The panels of every side in drawing order, each side's panel of one place next to the
    other's, with their titles (each naming its side when there are two)."""
    both = len(sides) > 1
    order = [(index, side) for index in range(len(titles)) for side in range(len(sides))]
    shown = [planes[side][index] for index, side in order]
    named = [
        labels.side_title.format(name=titles[index], side=sides[side].whose)
        if both
        else titles[index]
        for index, side in order
    ]
    return shown, named


def _weights_figure(result: CheckResult, labels: Labels) -> Figure | None:
    sides = _same_shape(_sides(result, "weights", labels), (3, 4))
    if not sides:
        return None
    weights = sides[0].values
    dims = _dims(result, "weights", weights.ndim, ("b", "h", "n", "m"))
    per_side = [
        side.values[0] if weights.ndim == 4 else side.values[0][np.newaxis] for side in sides
    ]
    heads, rows, cols = per_side[0].shape
    scale = _Scale("viridis", *_value_range(np.stack(per_side), lo=0.0))
    title = labels.side_title.format(name=labels.attention_weights, side=_whose(labels, sides))
    if weights.ndim == 4:
        places = [labels.head_title.format(index=index + 1) for index in range(heads)]
    else:
        places = [labels.attention_weights if len(sides) > 1 else ""]
    planes, titles = _side_by_side(sides, per_side, places, labels)
    columns = min(len(planes), _HEAD_COLUMNS if weights.ndim == 4 else 2)
    if len(planes) > 1:
        grid_rows = math.ceil(len(planes) / columns)
        svg = Svg(_GRID_WIDTH, grid_rows * _GRID_ROW + int(2 * _PAD - _PANEL_GAP))
    else:
        svg = Svg(*_WEIGHTS_SIZE)
    _heatmaps(svg, planes, titles, (dims[-2], dims[-1]), scale, labels, columns=columns)

    head_text = labels.heads.format(count=heads) if weights.ndim == 4 else ""
    alt = _describe(labels, title, labels.batch.format(index=0), head_text, f"{rows}×{cols}")
    return _finish(svg, "weights", title, alt)


def _matrix_figure(
    name: str,
    heading: str,
    matrices: Sequence[Array],
    sides: Sequence[_Side],
    dims: tuple[str, str],
    labels: Labels,
    batch: str = "",
) -> Figure:
    """One matrix of values, or the code's and the oracle's side by side on one scale."""
    width, height = _MATRIX_SIZE
    svg = Svg(width if len(matrices) == 1 else _PAIR_WIDTH, height)
    scale = _Scale("viridis", *_value_range(np.stack(matrices)))
    planes, titles = _side_by_side(sides, [[m] for m in matrices], [heading], labels)
    titles = titles if len(matrices) > 1 else [""]
    _heatmaps(svg, planes, titles, dims, scale, labels, columns=len(matrices))
    title = labels.side_title.format(name=heading, side=_whose(labels, sides))
    alt = _describe(labels, title, batch, _size_text(matrices[0], dims))
    return _finish(svg, name, title, alt)


def _size_text(matrix: Array, dims: tuple[str, str]) -> str:
    return f"{matrix.shape[0]}×{matrix.shape[1]} ({dims[0]} × {dims[1]})"


def _same_shape(sides: Sequence[_Side], ranks: tuple[int, ...]) -> list[_Side]:
    """The sides that can be drawn: of a rank in ``ranks``, not empty, of the first's shape."""
    usable = [side for side in sides if side.values.ndim in ranks and side.values.size]
    return [side for side in usable if side.values.shape == usable[0].values.shape]


def _encoding_figure(result: CheckResult, labels: Labels) -> Figure | None:
    sides = _same_shape(_sides(result, "output", labels), (2,))
    if not sides:
        return None  # an attention or FFN output is (b, n, d): not a picture worth drawing
    dims = _dims(result, "output", 2, ("position", "dim"))
    matrices = [side.values for side in sides]
    heading = labels.positional_encoding
    return _matrix_figure("output", heading, matrices, sides, (dims[0], dims[1]), labels)


def _hidden_figure(result: CheckResult, labels: Labels) -> Figure | None:
    sides = _same_shape(_sides(result, "hidden", labels), (2, 3))
    if not sides:
        return None
    rank = sides[0].values.ndim
    dims = _dims(result, "hidden", rank, ("b", "n", "d_ff"))
    matrices = [side.values[0] if rank == 3 else side.values for side in sides]
    batch = labels.batch.format(index=0) if rank == 3 else ""
    axes = (dims[-2], dims[-1])
    return _matrix_figure("hidden", labels.ffn_hidden, matrices, sides, axes, labels, batch)


def _delta_verdict(result: CheckResult, shape: tuple[int, ...]) -> Verdict | None:
    """The failing verdict ``delta`` belongs to: the worst one of the same shape."""
    failing = [v for v in result.verdicts if not v.ok and v.actual_shape == shape]
    return max(failing, key=lambda v: v.max_abs, default=None)


def _worst_index(result: CheckResult, delta: Array) -> tuple[int, ...]:
    if "delta_worst" not in result.arrays:
        # No index given: the largest finite |Δ| is the worst by definition.
        return largest_index(np.where(np.isfinite(delta), delta, -np.inf))
    worst = tuple(int(i) for i in np.asarray(result.arrays["delta_worst"]).ravel())
    if len(worst) != delta.ndim or any(
        not 0 <= i < n for i, n in zip(worst, delta.shape, strict=True)
    ):
        raise ValueError(f"delta_worst {worst} is not an index of delta with shape {delta.shape}")
    return worst


def _delta_figure(result: CheckResult, labels: Labels) -> Figure | None:
    delta = np.abs(np.asarray(result.arrays["delta"], dtype=np.float64))
    if delta.ndim == 0 or delta.size == 0:
        return None
    worst = _worst_index(result, delta)
    verdict = _delta_verdict(result, delta.shape)
    dims = verdict.dims if verdict and len(verdict.dims) == delta.ndim else ()
    dims = dims or tuple(f"d{i}" for i in range(delta.ndim))
    lead = worst[:-2]
    plane = delta[lead] if delta.ndim >= 2 else delta[np.newaxis]
    row, col = (worst[-2], worst[-1]) if delta.ndim >= 2 else (0, worst[0])
    axis_names = (dims[-2], dims[-1]) if delta.ndim >= 2 else ("", dims[0])
    where = ", ".join(str(i) for i in worst)
    fixed = ", ".join(f"{d}={i}" for d, i in zip(dims[:-2], lead, strict=True))

    svg = Svg(*_DELTA_SIZE)
    scale = _Scale("magma", *_value_range(plane))
    title = (
        labels.delta_title_at.format(fixed=fixed, index=where)
        if fixed
        else labels.delta_title.format(index=where)
    )
    (plot,) = _heatmaps(svg, [plane], [title], axis_names, scale, labels)
    cell_width, cell_height = plot.width / plane.shape[1], plot.height / plane.shape[0]
    radius = min(max(0.5 * min(cell_width, cell_height), 6.0), 12.0)
    svg.circle(
        plot.x + (col + 0.5) * cell_width,
        plot.y + (row + 0.5) * cell_height,
        radius,
        stroke=_MARKER_COLOUR,
        width=2.0,
    )

    name = verdict.name if verdict else "delta"
    alt = _describe(
        labels,
        f"{labels.abs_difference}: {name}",
        fixed,
        labels.worst.format(index=where),
        f"{plane.shape[0]}×{plane.shape[1]}",
    )
    return _finish(svg, "delta", labels.where_they_differ, alt)


# Scaling -----------------------------------------------------------------------------------


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

    box: _Box
    xs: tuple[float, float]
    ys: tuple[float, float]

    def x(self, value: float) -> float:
        span = self.xs[1] - self.xs[0]
        return self.box.x + (math.log10(value) - self.xs[0]) / span * self.box.width

    def y(self, value: float) -> float:
        span = self.ys[1] - self.ys[0]
        return self.box.bottom - (math.log10(value) - self.ys[0]) / span * self.box.height


def _sweep_figure(points: Sequence[SweepPoint], labels: Labels, sweep_dim: str) -> Figure | None:
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
    svg = Svg(*_SWEEP_SIZE)
    widest = max(text_width(text, _TICK_SIZE) for _, text in y_ticks)
    left = _PAD + _LABEL_SIZE + 4.0 + widest + _GAP + _TICK
    right = _PAD + text_width(str(x_ticks[-1]), _TICK_SIZE) / 2
    bottom = _PAD + _TICK + _GAP + _TICK_SIZE + 4.0 + _LABEL_SIZE + 2.0
    box = _Box(left, _PAD + 4.0, svg.width - left - right, svg.height - _PAD - 4.0 - bottom)
    plot = _LogPlot(box, _log_range(float(sizes[0]), float(sizes[-1])), ys)

    x_title = labels.sweep_axis.format(dim=sweep_dim)
    _log_axes(svg, plot, x_ticks, y_ticks, (labels.median_time, x_title))
    svg.polyline(
        [(plot.x(s), plot.y(g)) for s, g in zip(sizes, guide, strict=True)],
        stroke=_GUIDE_COLOUR,
        dash="6 4",
    )
    bars = []
    for size, low, high in zip(sizes, lower, upper, strict=True):
        x, bottom_end, top_end = plot.x(size), plot.y(low), plot.y(high)
        bars += [(x, bottom_end, x, top_end)]
        bars += [(x - 3.0, end, x + 3.0, end) for end in (bottom_end, top_end)]
    svg.segments(bars, stroke=_LINE_COLOUR, crisp=False)
    middle = [(plot.x(s), plot.y(m)) for s, m in zip(sizes, medians, strict=True)]
    svg.polyline(middle, stroke=_LINE_COLOUR)
    for x, y in middle:
        svg.circle(x, y, 3.5, fill=_LINE_COLOUR)
    _legend(svg, box, labels)

    sizes_text = ", ".join(str(p.size) for p in usable)
    alt = _describe(labels, labels.scaling_plot, f"{sweep_dim} = {sizes_text}")
    return _finish(svg, "sweep", labels.scaling, alt)


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
        stroke=_GRID_COLOUR,
    )
    svg.rect(box.x, box.y, box.width, box.height, stroke=AXIS_COLOUR)

    svg.segments((plot.x(size), box.bottom, plot.x(size), box.bottom + _TICK) for size in x_ticks)
    label_y = box.bottom + _TICK + _GAP + 0.8 * _TICK_SIZE
    shown, last_edge = [], -math.inf
    for size in x_ticks:
        x, text = plot.x(size), str(size)
        half = text_width(text, _TICK_SIZE) / 2
        if x - half >= last_edge + 4.0:  # sizes too close to label both: the first one wins
            shown.append((x, label_y, text))
            last_edge = x + half
    svg.labels(shown, size=_TICK_SIZE, anchor="middle", css="fc-xticks")
    svg.segments((box.x - _TICK, plot.y(value), box.x, plot.y(value)) for value, _ in y_ticks)
    label_x = box.x - _TICK - _GAP
    items = ((label_x, plot.y(value) + 0.35 * _TICK_SIZE, text) for value, text in y_ticks)
    svg.labels(items, size=_TICK_SIZE, anchor="end", css="fc-yticks")

    y_title, x_title = titles
    title_y = box.bottom + _TICK + _GAP + _TICK_SIZE + 4.0 + 0.8 * _LABEL_SIZE
    fitted = fit_text(x_title, _LABEL_SIZE, box.width)
    svg.text(box.x + box.width / 2, title_y, fitted, size=_LABEL_SIZE, anchor="middle")
    fitted = fit_text(y_title, _LABEL_SIZE, box.height)
    middle = box.y + box.height / 2
    svg.text(
        _PAD + 0.8 * _LABEL_SIZE, middle, fitted, size=_LABEL_SIZE, anchor="middle", vertical=True
    )


def _legend(svg: Svg, plot: _Box, labels: Labels) -> None:
    """The key in the plot's upper left corner: median time, then the O(n²) guide."""
    entries = (labels.median_time, labels.legend_guide)
    sample, line = 22.0, _TICK_SIZE + 5.0
    room = plot.width - 2 * 8.0 - sample - 16.0
    texts = [fit_text(text, _TICK_SIZE, room) for text in entries]
    width = sample + 16.0 + max(text_width(text, _TICK_SIZE) for text in texts)
    box = _Box(plot.x + 8.0, plot.y + 8.0, width, line * len(texts) + 6.0)
    start, end = box.x + 5.0, box.x + 5.0 + sample
    middles = [box.y + 3.0 + line * (index + 0.5) for index in range(len(texts))]
    with svg.group("fc-legend"):
        svg.rect(box.x, box.y, box.width, box.height, fill="#ffffff", stroke="#bdbdbd")
        svg.polyline([(start, middles[0]), (end, middles[0])], stroke=_LINE_COLOUR)
        svg.circle((start + end) / 2, middles[0], 3.5, fill=_LINE_COLOUR)
        svg.polyline([(start, middles[1]), (end, middles[1])], stroke=_GUIDE_COLOUR, dash="6 4")
        items = ((end + 6.0, y + 0.35 * _TICK_SIZE, t) for y, t in zip(middles, texts, strict=True))
        svg.labels(items, size=_TICK_SIZE, anchor="start", css="fc-legend-labels")
