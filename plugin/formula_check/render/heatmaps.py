"""Small, reproducible PNG figures of what a check computed: heatmaps, |Δ| and scaling.

Conventions for ``CheckResult.arrays`` (the engine fills them):

``weights``
    attention weights ``(b, n, m)`` or, multi-head, ``(b, h, n, m)``;
``output``
    a positional-encoding matrix ``(pos, dim)`` (only a 2-D ``output`` is drawn);
``hidden``
    feed-forward activations ``(b, n, d_ff)``;
``delta`` and ``delta_worst``
    ``|actual - expected|`` of the worst mismatching output (any rank) and its worst index.
"""

from __future__ import annotations

import io
import math
from collections.abc import Callable, Sequence
from typing import Any

import matplotlib
import matplotlib.style
import numpy as np
from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure as MplFigure
from matplotlib.image import AxesImage
from matplotlib.ticker import MaxNLocator, NullLocator

from ..model import Array, CheckResult, SweepPoint, Verdict
from .figure import VALUE_HEATMAPS, Figure
from .labels import Labels

_DPI = 100
_MAX_WIDTH_IN = 6.0
_HEAD_COLUMNS = 4
# A white figure with dark text reads the same on Material's light and slate palettes;
# a transparent one would put black tick labels on a near-black page (the stylesheet adds a
# thin border so the white edge looks deliberate on slate). Image text stays ASCII/DejaVu
# because the bundled font has no CJK glyphs: localized words go in captions and alt text.
_STYLE: dict[str, Any] = {
    "figure.facecolor": "white",
    "savefig.facecolor": "white",
    "axes.facecolor": "white",
    "text.color": "#212121",
    "axes.labelcolor": "#212121",
    "axes.edgecolor": "#616161",
    "xtick.color": "#212121",
    "ytick.color": "#212121",
    "font.family": "DejaVu Sans",
    "font.size": 8,
    "axes.titlesize": 9,
    "image.interpolation": "nearest",
}

Draw = Callable[[MplFigure], None]

_MARKER_COLOUR = "#00e5ff"  # cyan: far from every colour of magma, so the worst cell stands out


def figures_for(
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
    if "weights" in wanted and "weights" in arrays:
        figures.append(_weights_figure(result, labels))
    if "output" in wanted and "output" in arrays:
        figures.append(_encoding_figure(result, labels))
    if "hidden" in wanted and "hidden" in arrays:
        figures.append(_hidden_figure(result, labels))
    if "delta" in arrays:
        figures.append(_delta_figure(result, labels))
    if result.sweep:
        figures.append(_sweep_figure(result.sweep, labels, sweep_dim))
    return [figure for figure in figures if figure is not None]


def _new_figure(width: float, height: float) -> MplFigure:
    figure = MplFigure(figsize=(min(width, _MAX_WIDTH_IN), height), dpi=_DPI, layout="constrained")
    FigureCanvasAgg(figure)  # no pyplot: no global figure registry, safe in a server
    return figure


def _finish(figure: MplFigure, name: str, title: str, alt: str) -> Figure:
    buffer = io.BytesIO()
    # "Software" carries the matplotlib version; dropping it keeps bytes equal across installs.
    figure.savefig(buffer, format="png", dpi=_DPI, metadata={"Software": None})
    png = buffer.getvalue()
    # The IHDR chunk always comes first: width and height are bytes 16-24.
    width = int.from_bytes(png[16:20], "big")
    height = int.from_bytes(png[20:24], "big")
    return Figure(name=name, title=title, alt=alt, png=png, width=width, height=height)


def _render(name: str, title: str, alt: str, draw: Draw, *, size: tuple[float, float]) -> Figure:
    # "default" first: a user's matplotlibrc (savefig.bbox, transparency...) must not leak in.
    with matplotlib.style.context(["default", _STYLE]):
        figure = _new_figure(*size)
        draw(figure)
        return _finish(figure, name, title, alt)


def _dims(result: CheckResult, name: str, rank: int, default: Sequence[str]) -> tuple[str, ...]:
    """The oracle's dim names for array ``name`` when the result knows them."""
    for shape in result.shapes:
        if shape.name == name and len(shape.dims) == rank:
            return shape.dims
    for verdict in result.verdicts:
        if verdict.name == name and len(verdict.dims) == rank:
            return verdict.dims
    return tuple(default)[-rank:] if rank <= len(default) else tuple(f"d{i}" for i in range(rank))


def _heatmap(axes: Axes, data: Array, cmap: Any, dims: tuple[str, str], **kw: Any) -> AxesImage:
    image = axes.imshow(data, cmap=cmap, aspect="auto", interpolation="nearest", **kw)
    axes.set_ylabel(dims[0])
    axes.set_xlabel(dims[1])
    axes.xaxis.set_major_locator(MaxNLocator(nbins=6, integer=True))
    axes.yaxis.set_major_locator(MaxNLocator(nbins=6, integer=True))
    return image


def _describe(labels: Labels, *parts: str) -> str:
    return labels.separator.join(part for part in parts if part)


def _weights_figure(result: CheckResult, labels: Labels) -> Figure | None:
    weights = np.asarray(result.arrays["weights"], dtype=np.float64)
    if weights.ndim not in (3, 4):
        return None
    dims = _dims(result, "weights", weights.ndim, ("b", "h", "n", "m"))
    planes = weights[0] if weights.ndim == 4 else weights[0][np.newaxis]
    heads, rows, cols = planes.shape
    grid_rows = math.ceil(heads / _HEAD_COLUMNS)
    grid_cols = min(heads, _HEAD_COLUMNS)
    vmax = float(np.nanmax(planes)) if planes.size else 1.0

    def draw(figure: MplFigure) -> None:
        grid = figure.subplots(grid_rows, grid_cols, squeeze=False)
        image = None
        for index, axes in enumerate(grid.flat):
            if index >= heads:
                axes.set_axis_off()
                continue
            image = _heatmap(
                axes, planes[index], "viridis", (dims[-2], dims[-1]), vmin=0.0, vmax=vmax
            )
            if weights.ndim == 4:
                axes.set_title(f"head {index + 1}")
        if image is not None:
            figure.colorbar(image, ax=grid.ravel().tolist(), shrink=0.9)

    head_text = labels.heads.format(count=heads) if weights.ndim == 4 else ""
    alt = _describe(
        labels,
        labels.attention_weights,
        labels.batch.format(index=0),
        head_text,
        f"{rows}×{cols}",
    )
    height = 0.6 + 1.9 * grid_rows if weights.ndim == 4 else 3.2
    width = _MAX_WIDTH_IN if grid_cols > 1 else 4.2
    return _render("weights", labels.attention_weights, alt, draw, size=(width, height))


def _matrix_figure(name: str, title: str, alt: str, matrix: Array, dims: tuple[str, str]) -> Figure:
    def draw(figure: MplFigure) -> None:
        axes = figure.subplots()
        image = _heatmap(axes, matrix, "viridis", dims)
        figure.colorbar(image, ax=axes, shrink=0.9)

    return _render(name, title, alt, draw, size=(_MAX_WIDTH_IN, 3.0))


def _size_text(matrix: Array, dims: tuple[str, str]) -> str:
    return f"{matrix.shape[0]}×{matrix.shape[1]} ({dims[0]} × {dims[1]})"


def _encoding_figure(result: CheckResult, labels: Labels) -> Figure | None:
    matrix = np.asarray(result.arrays["output"], dtype=np.float64)
    if matrix.ndim != 2:
        return None  # an attention or FFN output is (b, n, d): not a picture worth drawing
    dims = _dims(result, "output", 2, ("position", "dim"))
    axes = (dims[0], dims[1])
    alt = _describe(labels, labels.positional_encoding, _size_text(matrix, axes))
    return _matrix_figure("output", labels.positional_encoding, alt, matrix, axes)


def _hidden_figure(result: CheckResult, labels: Labels) -> Figure | None:
    hidden = np.asarray(result.arrays["hidden"], dtype=np.float64)
    if hidden.ndim not in (2, 3):
        return None
    dims = _dims(result, "hidden", hidden.ndim, ("b", "n", "d_ff"))
    matrix = hidden[0] if hidden.ndim == 3 else hidden
    batch = labels.batch.format(index=0) if hidden.ndim == 3 else ""
    axes = (dims[-2], dims[-1])
    alt = _describe(labels, labels.ffn_hidden, batch, _size_text(matrix, axes))
    return _matrix_figure("hidden", labels.ffn_hidden, alt, matrix, axes)


def _delta_verdict(result: CheckResult, shape: tuple[int, ...]) -> Verdict | None:
    """The failing verdict ``delta`` belongs to: the worst one of the same shape."""
    failing = [v for v in result.verdicts if not v.ok and v.actual_shape == shape]
    return max(failing, key=lambda v: v.max_abs, default=None)


def _worst_index(result: CheckResult, delta: Array) -> tuple[int, ...]:
    if "delta_worst" not in result.arrays:
        # No index given: the largest finite |Δ| is the worst by definition.
        finite = np.where(np.isfinite(delta), delta, -np.inf)
        return tuple(int(i) for i in np.unravel_index(int(np.argmax(finite)), delta.shape))
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

    def draw(figure: MplFigure) -> None:
        axes = figure.subplots()
        cmap = matplotlib.colormaps["magma"].with_extremes(bad=_MARKER_COLOUR)
        image = _heatmap(axes, np.ma.masked_invalid(plane), cmap, axis_names)
        axes.plot(
            col,
            row,
            marker="o",
            markersize=14,
            markerfacecolor="none",
            markeredgecolor=_MARKER_COLOUR,
            markeredgewidth=2.0,
        )
        axes.set_title(f"|Δ| at {fixed}; worst ({where})" if fixed else f"|Δ|; worst ({where})")
        figure.colorbar(image, ax=axes, shrink=0.9)

    name = verdict.name if verdict else "delta"
    alt = _describe(
        labels,
        f"{labels.abs_difference}: {name}",
        fixed,
        labels.worst.format(index=where),
        f"{plane.shape[0]}×{plane.shape[1]}",
    )
    return _render("delta", labels.where_they_differ, alt, draw, size=(4.8, 3.4))


def _sweep_figure(points: Sequence[SweepPoint], labels: Labels, sweep_dim: str) -> Figure | None:
    usable = sorted((p for p in points if p.size > 0 and p.median > 0), key=lambda p: p.size)
    if not usable:
        return None  # a log-log axis has nowhere to put a zero
    sizes = np.array([p.size for p in usable], dtype=np.float64)
    medians = np.array([p.median for p in usable], dtype=np.float64)
    spreads = np.array([p.spread for p in usable], dtype=np.float64)
    # A lower error bar reaching zero has no place on a log axis; stop it just above.
    lower = np.minimum(spreads, medians * 0.99)
    guide = medians[-1] * (sizes / sizes[-1]) ** 2

    def draw(figure: MplFigure) -> None:
        axes = figure.subplots()
        axes.errorbar(
            sizes,
            medians,
            yerr=np.vstack([lower, spreads]),
            marker="o",
            color="#1565c0",
            capsize=3,
            label="median time",
        )
        axes.plot(sizes, guide, linestyle="--", color="#757575", label="O(n²) guide")
        axes.set_xscale("log")
        axes.set_yscale("log")
        # Tick exactly the measured sizes: "2×10¹" says less than "16, 32, 64".
        axes.set_xticks(sizes, labels=[str(p.size) for p in usable])
        axes.xaxis.set_minor_locator(NullLocator())
        axes.set_xlabel(sweep_dim)
        axes.set_ylabel("median time (s)")
        axes.grid(True, which="both", color="#e0e0e0", linewidth=0.5)
        axes.legend(loc="upper left")

    sizes_text = ", ".join(str(p.size) for p in usable)
    alt = _describe(labels, labels.scaling_plot, f"{sweep_dim} = {sizes_text}")
    return _render("sweep", labels.scaling, alt, draw, size=(4.8, 3.2))
