"""Paths as cards and messages show them: never a folder of the build machine, since cards
are published. Shared by the worker (tracebacks) and the pool (what a crashed worker said)."""

from __future__ import annotations

import os
import re
import sysconfig
from pathlib import Path

PACKAGE = os.path.dirname(os.path.abspath(__file__))
"""This package's folder, as imported: the checker's own code, wherever a module of it lies."""
CHECKER = (PACKAGE + os.sep, str(Path(PACKAGE).resolve()) + os.sep)
"""This package's folder, as imported and as resolved."""
_STDLIB = sysconfig.get_paths()["stdlib"] + os.sep
_ABSOLUTE = re.compile(r"(?<![\w.~:/])/[\w.][^\s\"'<>:,;()]*/[^\s\"'<>:,;()]*")
"""An absolute path of a folder and more in a text; not a web address's
(``https://host/path``), an operator a message names (``//``, ``/=``), nor a TensorFlow
device (``/job:localhost/device:CPU:0``)."""


def shown_path(name: str, root: str) -> str:
    """A project file relative to the project, an installed module from its package, the
    standard library by module, this package from its own name; anything else by its name
    alone. A relative name (a page's ``<snippet docs/page.md:12>``) stays as it is."""
    if not os.path.isabs(name):
        return name
    if root and name.startswith(root + os.sep):
        return os.path.relpath(name, root)
    for marker in ("site-packages", "dist-packages"):
        _, found, rest = name.rpartition(os.sep + marker + os.sep)
        if found:
            return rest
    if name.startswith(_STDLIB):
        return os.path.relpath(name, _STDLIB)
    for checker in CHECKER:
        if name.startswith(checker):
            return os.path.join("formula_check", os.path.relpath(name, checker))
    return os.path.basename(name)


def scrubbed(text: str, root: str) -> str:
    """``text`` with every absolute path in it shown as :func:`shown_path` shows it."""
    return _ABSOLUTE.sub(lambda match: shown_path(match.group(0), root), text)


SCRATCH_PREFIX = "formula-check-worker-"
"""The name of a worker's private temporary folder begins with this (its hello names it)."""
