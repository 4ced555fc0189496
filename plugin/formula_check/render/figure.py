"""The figures of a result, without the drawing code: importing this stays cheap.

A build whose figures all come from the cache, or a CLI run that draws nothing, should not
load the drawing code; :func:`figures_for` imports it on the first picture actually drawn.
"""

from __future__ import annotations

from formula_check.render.labels import Labels
from formula_check.render.picture import Figure
from formula_check.results import CheckResult

__all__ = ["Figure", "figures_for"]


def figures_for(
    result: CheckResult,
    heatmaps: tuple[str, ...] | None,
    labels: Labels,
    *,
    sweep_dim: str = "n",
) -> list[Figure]:
    """The figures for one result (drawn by :func:`formula_check.render.heatmaps.draw_figures`)."""
    from formula_check.render import (
        heatmaps as drawing,  # the drawing code loads on the first picture
    )

    return drawing.draw_figures(result, heatmaps, labels, sweep_dim=sweep_dim)
