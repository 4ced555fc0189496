"""Results -> HTML cards, SVG figures and report pages. Pure: no TensorFlow, no MkDocs."""

from __future__ import annotations

from pathlib import Path

from formula_check.model import VALUE_HEATMAPS, strip_ansi
from formula_check.render.card import ImageUrl, render_card, status_class
from formula_check.render.figure import Figure, figures_for
from formula_check.render.labels import OUTCOME_KEYS, Labels, labels_for, outcome_key
from formula_check.render.report import report_body, report_json, report_markdown

STYLESHEET = Path(__file__).parent / "assets" / "formula-check.css"
"""The card's stylesheet; a site adds it with ``extra_css`` (the MkDocs plugin copies it)."""

__all__ = [
    "OUTCOME_KEYS",
    "STYLESHEET",
    "VALUE_HEATMAPS",
    "Figure",
    "ImageUrl",
    "Labels",
    "figures_for",
    "labels_for",
    "outcome_key",
    "render_card",
    "report_body",
    "report_json",
    "report_markdown",
    "status_class",
    "strip_ansi",
]
