"""State shared by every page of one build: engine, results, figures, the page being rendered.

Markdown makes a new extension instance per page (MkDocs does, Zensical does); the session is
what survives between them, so the TensorFlow workers start once and a block checked in the
MkDocs plugin's site-wide pre-pass is not checked again when its page renders.

The MkDocs plugin also lets pages render while their blocks are still being checked
(:meth:`FormulaSession.check_in_background`): a card whose result is not in yet is written as
a placeholder element, filled in by :meth:`FormulaSession.fill_placeholders` once the page's
HTML is complete. Markdown, templates and the TensorFlow import then use the machine at once.
"""

from __future__ import annotations

from formula_check.session.build import SUPERSEDED_GRACE, FormulaSession, Placeholder
from formula_check.session.engines import (
    SHARED_ENGINES,
    Checker,
    EngineMaker,
    Engines,
    checked_in_order,
    open_engine,
)
from formula_check.session.page import (
    DataUriImages,
    DirectoryImages,
    ImageSink,
    PageContext,
    is_failure,
)

__all__ = [
    "SHARED_ENGINES",
    "SUPERSEDED_GRACE",
    "Checker",
    "DataUriImages",
    "DirectoryImages",
    "EngineMaker",
    "Engines",
    "FormulaSession",
    "ImageSink",
    "PageContext",
    "Placeholder",
    "checked_in_order",
    "is_failure",
    "open_engine",
]
