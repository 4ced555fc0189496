"""What a drawn picture is, without the drawing: importing this stays cheap.

A build whose figures all come from the cache, or a CLI run that draws nothing, should not
load the drawing code; :func:`figures_for` imports it on the first picture actually drawn.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..model import CheckResult
    from .labels import Labels

VALUE_HEATMAPS = ("weights", "output", "hidden")
"""Heatmaps a block may ask for; ``delta`` and the scaling plot appear whenever there is data.
Each is drawn from the code's values (``NAME`` in the result's arrays), the oracle's
(``NAME:oracle``), or both side by side, and its title says whose."""


_SUFFIXES = {"image/svg+xml": ".svg", "image/png": ".png"}


@dataclass(frozen=True)
class Figure:
    """One rendered picture: ``name`` is stable (file names), ``title`` and ``alt`` localized.

    ``data`` is the whole file; ``width`` and ``height`` are its size in CSS pixels (for an
    SVG, its ``width`` and ``height`` attributes).
    """

    name: str
    title: str
    alt: str
    data: bytes
    width: int
    height: int
    media_type: str = "image/svg+xml"

    def __post_init__(self) -> None:
        if self.media_type not in _SUFFIXES:
            raise ValueError(f"unsupported figure media type {self.media_type!r}")

    @property
    def suffix(self) -> str:
        """The file extension for :attr:`media_type`: ``.svg`` or ``.png``."""
        return _SUFFIXES[self.media_type]


def figures_for(
    result: CheckResult,
    heatmaps: tuple[str, ...] | None,
    labels: Labels,
    *,
    sweep_dim: str = "n",
) -> list[Figure]:
    """The figures for one result (see :func:`formula_check.render.heatmaps.figures_for`)."""
    from . import heatmaps as drawing  # the drawing code loads on the first picture

    return drawing.figures_for(result, heatmaps, labels, sweep_dim=sweep_dim)
