"""The MkDocs face: ``plugins: [formula-check]``.

* :mod:`.plugin`: the hooks, glue between MkDocs' events and the session;
* :mod:`.site`: what goes into the site (extension, assets, figures, anchors, log lines);
* :mod:`.report`: the report page and its JSON;
* :mod:`.jupyter_pages`: the cards of the notebook pages mkdocs-jupyter renders;
* :mod:`.watching`: what ``mkdocs serve`` watches beyond the docs folder.

The settings schema is :mod:`formula_check.project.config`. The speed-ups of ``mkdocs serve`` that
reach into MkDocs' privates are not here: they are the optional ``formula-check-serve`` plugin
(``serve_speedups/`` in the repository).
"""

from __future__ import annotations

from formula_check.faces.mkdocs_plugin.plugin import FormulaCheckPlugin
from formula_check.faces.mkdocs_plugin.site import log, log_result
from formula_check.faces.mkdocs_plugin.watching import snippet_files

__all__ = ["FormulaCheckPlugin", "log", "log_result", "snippet_files"]

# Names the tests used before the face became a package.
_log_result = log_result
_snippet_files = snippet_files
