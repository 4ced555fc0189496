"""What every figure of a result shares: type sizes and spacing, in CSS pixels, the
colours, a box on screen, and how a drawing becomes a :class:`.picture.Figure`."""

from __future__ import annotations

from dataclasses import dataclass

from formula_check.render.labels import Labels
from formula_check.render.picture import SMALLEST_TEXT, Figure
from formula_check.render.svg import Svg

# Type sizes and spacing, in CSS pixels. A white figure with dark text reads the same on
# Material's light and slate palettes (the stylesheet adds a thin border on slate).
TICK_SIZE = SMALLEST_TEXT  # a page keeps this readable: it shrinks a figure only so far
LABEL_SIZE = 12.0
TITLE_SIZE = 13.0
TICK = 4.0  # tick mark length
GAP = 2.0  # between a tick mark and its label
PAD = 8.0  # figure edge
TITLE_LINE = TITLE_SIZE + 7.0
CBAR_WIDTH = 12.0
PANEL_GAP = 12.0  # right of and below each heatmap panel
MOST_TICKS = 6

HEAD_COLUMNS = 4
GRID_WIDTH = 600
GRID_ROW = 180  # one row of multi-head panels
WEIGHTS_SIZE = (420, 320)
MATRIX_SIZE = (600, 300)
PAIR_WIDTH = 720  # a matrix of the code's beside the oracle's
DELTA_SIZE = (480, 340)
SWEEP_SIZE = (480, 320)

MARKER_COLOUR = "#00e5ff"  # cyan: far from every colour of magma, so the worst cell stands out
# NaN and ±inf: light and dark grey stripes, in neither colormap (nor mistaken for the marker)
HATCH = ("#bdbdbd", "#616161")
KEY_SIZE = 12.0  # the hatched square of the NaN/Inf key, under the colorbar
ORACLE = ":oracle"  # NAME:oracle holds the oracle's values of heatmap NAME
LINE_COLOUR = "#1565c0"
GUIDE_COLOUR = "#757575"
GRID_COLOUR = "#e0e0e0"
LIMIT = 1e307  # colour scales stay finite even for values near the float64 maximum


@dataclass(frozen=True)
class Box:
    """A rectangle on screen: its top left corner and its size."""

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


def finish(svg: Svg, name: str, title: str, alt: str) -> Figure:
    """The drawing as a figure named ``name``, its text alternative ``alt``."""
    data = svg.finish(alt)
    return Figure(name=name, title=title, alt=alt, data=data, width=svg.width, height=svg.height)


def describe(labels: Labels, *parts: str) -> str:
    """A figure's text alternative from its parts, in the page's language."""
    return labels.separator.join(part for part in parts if part)
