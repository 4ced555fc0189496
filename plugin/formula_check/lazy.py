"""NumPy imported where it is first used, not where it is named.

A build whose every check is in the cache reads pages, looks up results and writes cards: it
computes nothing, and NumPy's import (60 to 90 ms) would be a third of what the plugin adds to
MkDocs. The modules such a build imports (the oracle catalog, for the names, dimensions and
versions of the oracles) name NumPy through :data:`numpy`, which imports it on the first
attribute asked of it.

The standard library's ``importlib.util.LazyLoader`` does the same for a module in
``sys.modules``, but on Python before 3.12 two threads touching such a module at once may see
it half loaded, and a build reads the cache in one thread while pages render in another.
Here every attribute is fetched from the real module, which a plain ``import`` (under the
import system's own lock) has finished loading. A module writes ``from .lazy import numpy as
np``; type checkers see NumPy itself under that name.
"""

from __future__ import annotations

import importlib
from types import ModuleType
from typing import TYPE_CHECKING, Any


class OnFirstUse(ModuleType):
    """Stands for the module ``name``: each attribute is the real module's, imported on the
    first one asked for, and kept on this object once asked for (as fast to reach after that
    as an attribute of the module itself)."""

    def __getattr__(self, attribute: str) -> Any:
        value = getattr(importlib.import_module(self.__name__), attribute)
        setattr(self, attribute, value)  # found directly from now on (a module's never change)
        return value

    def __dir__(self) -> list[str]:
        return dir(importlib.import_module(self.__name__))


if TYPE_CHECKING:
    import numpy as numpy  # noqa: PLC0414  (the "as" re-exports it to type checkers)
else:
    numpy = OnFirstUse("numpy")
    """NumPy, imported when a computation first needs it."""
