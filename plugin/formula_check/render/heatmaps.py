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

from formula_check.model import VALUE_HEATMAPS, Array
from formula_check.render.colour_scale import (
    Scale,
    colorbar,
    colorbar_width,
    hatched,
    key_width,
    nonfinite_key,
    value_range,
)
from formula_check.render.labels import Labels
from formula_check.render.layout import (
    DELTA_SIZE,
    GAP,
    GRID_ROW,
    GRID_WIDTH,
    HATCH,
    HEAD_COLUMNS,
    KEY_SIZE,
    LABEL_SIZE,
    MARKER_COLOUR,
    MATRIX_SIZE,
    MOST_TICKS,
    ORACLE,
    PAD,
    PAIR_WIDTH,
    PANEL_GAP,
    TICK,
    TICK_SIZE,
    TITLE_LINE,
    TITLE_SIZE,
    WEIGHTS_SIZE,
    Box,
    describe,
    finish,
)
from formula_check.render.picture import Figure
from formula_check.render.scaling_plot import sweep_figure
from formula_check.render.svg import (
    AXIS_COLOUR,
    Svg,
    colorize,
    fit_text,
    integer_ticks,
    png,
    sample,
    text_width,
    upscale,
)
from formula_check.results import CheckResult, Verdict, largest_index


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
        figures.append(sweep_figure(result.sweep, labels, sweep_dim))
    return [figure for figure in figures if figure is not None]


def _dims(result: CheckResult, name: str, rank: int, default: Sequence[str]) -> tuple[str, ...]:
    """The oracle's dim names for array ``name`` when the result knows them."""
    for shape in result.shapes:
        if shape.name == name and len(shape.dims) == rank:
            return shape.dims
    for verdict in result.verdicts:
        if verdict.name == name and len(verdict.dims) == rank:
            return verdict.dims
    return tuple(default)[-rank:] if rank <= len(default) else tuple(f"d{i}" for i in range(rank))


def _sides(result: CheckResult, name: str, labels: Labels) -> list[_Side]:
    """The values heatmap ``name`` draws: the code's, the oracle's, or both (code first)."""
    arrays = result.arrays
    oracle = arrays.get(name + ORACLE)
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


def _plot_area(outer: Box, rows: int, dims: tuple[str, str], *, titled: bool) -> Box:
    """The cells' rectangle inside a panel, leaving room for title, ticks and axis titles."""
    top = TITLE_LINE if titled else 0.0
    ticks = text_width(str(max(rows - 1, 0)), TICK_SIZE)
    left = TICK + GAP + ticks + (4.0 + LABEL_SIZE if dims[0] else 0.0)
    bottom = TICK + GAP + TICK_SIZE + (4.0 + LABEL_SIZE if dims[1] else 0.0) + 2.0
    return Box(outer.x + left, outer.y + top, outer.width - left, outer.height - top - bottom)


def _heatmap(
    svg: Svg, plot: Box, plane: Array, scale: Scale, dims: tuple[str, str], title: str
) -> None:
    """One grid of cells with its frame, integer ticks at cell centres and axis titles."""
    rows, cols = plane.shape
    cell = (plot.width / cols, plot.height / rows)
    taken_rows, down = sample(rows, plot.height)
    taken_cols, across = sample(cols, plot.width)
    values = plane[np.ix_(taken_rows, taken_cols)]
    pixels = upscale(colorize(values, scale.cmap, scale.lo, scale.hi, HATCH[0]), across, down)
    missing = upscale(~np.isfinite(values), across, down)
    svg.image(plot.x, plot.y, plot.width, plot.height, png(hatched(pixels, missing)))
    svg.rect(plot.x, plot.y, plot.width, plot.height, stroke=AXIS_COLOUR)
    if title:
        fitted = fit_text(title, TITLE_SIZE, plot.width + 2 * PANEL_GAP)
        svg.text(plot.x + plot.width / 2, plot.y - 7.0, fitted, size=TITLE_SIZE, anchor="middle")

    room = text_width(str(max(cols - 1, 0)), TICK_SIZE) + 6.0
    columns = integer_ticks(cols, min(MOST_TICKS, int(plot.width // room)))
    xs = [(plot.x + (col + 0.5) * cell[0], str(col)) for col in columns]
    svg.segments((x, plot.bottom, x, plot.bottom + TICK) for x, _ in xs)
    label_y = plot.bottom + TICK + GAP + 0.8 * TICK_SIZE
    svg.labels(
        ((x, label_y, text) for x, text in xs), size=TICK_SIZE, anchor="middle", css="fc-xticks"
    )

    rows_ticked = integer_ticks(rows, min(MOST_TICKS, int(plot.height // (TICK_SIZE + 3.0))))
    ys = [(plot.y + (row + 0.5) * cell[1], str(row)) for row in rows_ticked]
    svg.segments((plot.x - TICK, y, plot.x, y) for y, _ in ys)
    label_x = plot.x - TICK - GAP
    items = ((label_x, y + 0.35 * TICK_SIZE, text) for y, text in ys)
    svg.labels(items, size=TICK_SIZE, anchor="end", css="fc-yticks")

    if dims[1]:
        y = plot.bottom + TICK + GAP + TICK_SIZE + 4.0 + 0.8 * LABEL_SIZE
        name = fit_text(dims[1], LABEL_SIZE, plot.width)
        svg.text(plot.x + plot.width / 2, y, name, size=LABEL_SIZE, anchor="middle")
    if dims[0]:
        widest = max(text_width(text, TICK_SIZE) for _, text in ys)
        x = label_x - widest - 4.0 - 0.2 * LABEL_SIZE
        name = fit_text(dims[0], LABEL_SIZE, plot.height)
        middle = plot.y + plot.height / 2
        svg.text(x, middle, name, size=LABEL_SIZE, anchor="middle", vertical=True)


def _heatmaps(
    svg: Svg,
    planes: Sequence[Array],
    titles: Sequence[str],
    dims: tuple[str, str],
    scale: Scale,
    labels: Labels,
    *,
    columns: int = 1,
) -> list[Box]:
    """Panels in a grid of ``columns`` sharing one colorbar at the right (with the NaN/Inf
    key under it when a cell is not finite); their plot boxes."""
    rows = math.ceil(len(planes) / columns)
    nonfinite = any(not np.isfinite(plane).all() for plane in planes)
    bar = colorbar_width(scale)
    if nonfinite:
        bar = max(bar, key_width(labels.nonfinite_cells))
    column_width = (svg.width - 2 * PAD - bar) / columns
    row_height = (svg.height - 2 * PAD + PANEL_GAP) / rows
    boxes = []
    for index, (plane, title) in enumerate(zip(planes, titles, strict=True)):
        row, col = divmod(index, columns)
        outer = Box(
            PAD + col * column_width,
            PAD + row * row_height,
            column_width - PANEL_GAP,
            row_height - PANEL_GAP,
        )
        plot = _plot_area(outer, plane.shape[0], dims, titled=any(titles))
        with svg.group("fc-panel"):
            _heatmap(svg, plot, plane, scale, dims, title)
        boxes.append(plot)
    x, top, bottom = svg.width - PAD - bar, min(b.y for b in boxes), max(b.bottom for b in boxes)
    if nonfinite:
        bottom -= KEY_SIZE + TITLE_LINE
        nonfinite_key(svg, x, bottom + TITLE_LINE, labels.nonfinite_cells)
    colorbar(svg, x, top, bottom, scale)
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
    scale = Scale("viridis", *value_range(np.stack(per_side), lo=0.0))
    title = labels.side_title.format(name=labels.attention_weights, side=_whose(labels, sides))
    if weights.ndim == 4:
        places = [labels.head_title.format(index=index + 1) for index in range(heads)]
    else:
        places = [labels.attention_weights if len(sides) > 1 else ""]
    planes, titles = _side_by_side(sides, per_side, places, labels)
    columns = min(len(planes), HEAD_COLUMNS if weights.ndim == 4 else 2)
    if len(planes) > 1:
        grid_rows = math.ceil(len(planes) / columns)
        svg = Svg(GRID_WIDTH, grid_rows * GRID_ROW + int(2 * PAD - PANEL_GAP))
    else:
        svg = Svg(*WEIGHTS_SIZE)
    _heatmaps(svg, planes, titles, (dims[-2], dims[-1]), scale, labels, columns=columns)

    head_text = labels.heads.format(count=heads) if weights.ndim == 4 else ""
    alt = describe(labels, title, labels.batch.format(index=0), head_text, f"{rows}×{cols}")
    return finish(svg, "weights", title, alt)


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
    width, height = MATRIX_SIZE
    svg = Svg(width if len(matrices) == 1 else PAIR_WIDTH, height)
    scale = Scale("viridis", *value_range(np.stack(matrices)))
    planes, titles = _side_by_side(sides, [[m] for m in matrices], [heading], labels)
    titles = titles if len(matrices) > 1 else [""]
    _heatmaps(svg, planes, titles, dims, scale, labels, columns=len(matrices))
    title = labels.side_title.format(name=heading, side=_whose(labels, sides))
    alt = describe(labels, title, batch, _size_text(matrices[0], dims))
    return finish(svg, name, title, alt)


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

    svg = Svg(*DELTA_SIZE)
    scale = Scale("magma", *value_range(plane))
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
        stroke=MARKER_COLOUR,
        width=2.0,
    )

    name = verdict.name if verdict else "delta"
    alt = describe(
        labels,
        f"{labels.abs_difference}: {name}",
        fixed,
        labels.worst.format(index=where),
        f"{plane.shape[0]}×{plane.shape[1]}",
    )
    return finish(svg, "delta", labels.where_they_differ, alt)
