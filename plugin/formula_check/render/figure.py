"""What a drawn picture is, without the drawing: importing this never loads matplotlib.

matplotlib costs about a second to import; a build whose figures all come from the cache, or
a CLI run that draws nothing, should not pay it. :func:`figures_for` loads the drawing code on
the first picture actually drawn.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..model import CheckResult
    from .labels import Labels

VALUE_HEATMAPS = ("weights", "output", "hidden")
"""Heatmaps a block may ask for; ``delta`` and the scaling plot appear whenever there is data."""


@dataclass(frozen=True)
class Figure:
    """One rendered picture: ``name`` is stable (file names), ``title`` and ``alt`` localized."""

    name: str
    title: str
    alt: str
    png: bytes
    width: int
    height: int


def figures_for(
    result: CheckResult,
    heatmaps: tuple[str, ...] | None,
    labels: Labels,
    *,
    sweep_dim: str = "n",
) -> list[Figure]:
    """The figures for one result (see :func:`formula_check.render.heatmaps.figures_for`)."""
    from . import heatmaps as drawing  # matplotlib loads here, on the first picture drawn

    return drawing.figures_for(result, heatmaps, labels, sweep_dim=sweep_dim)
