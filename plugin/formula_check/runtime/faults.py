"""The answer to a request the worker itself failed on: a bug of the checker's, said as such.

Shared by the worker's loop (:mod:`.child`) and each check's process (:mod:`.isolation`).
"""

from __future__ import annotations

import os

from formula_check.messages import SnippetFailed
from formula_check.paths import scrubbed


def internal_error(exc: Exception) -> SnippetFailed:
    """The answer to a request the worker itself failed on (a bug of the checker). Its
    message goes on a card, which is published: no folder of this machine in it."""
    said = scrubbed(f"{type(exc).__name__}: {exc}", os.getcwd())
    return SnippetFailed(
        type="InternalError",
        message=(
            f"formula-check could not run this block ({said}); this is a bug in "
            "formula-check, not in the code under test: please report it"
        ),
    )
