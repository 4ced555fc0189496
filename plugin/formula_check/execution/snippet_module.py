"""The snippet's module, loaded for one check and unloaded after it: inline source compiled
under a name of its own, or a project module imported; and, after the check, every module
of the project it imported forgotten, so that the next check sees edits."""

from __future__ import annotations

import contextlib
import importlib
import inspect
import linecache
import os
import sys
import types
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from formula_check.execution.snippet_failure import phase
from formula_check.messages import CheckRequest

_MARK = "formula_check.execution.snippet_module:modules_marked"
"""The name of the empty module :func:`mark_modules` puts last in ``sys.modules``."""


@dataclass(frozen=True)
class Modules:
    """The names in ``sys.modules`` at one moment (before a check), to tell which the check
    added (:func:`modules_added`)."""

    names: frozenset[str]
    """Every name then; or, ``marked``, those when the warm worker placed its mark."""
    since_mark: frozenset[str] = frozenset()
    """With ``marked``: the names after the mark then (added since it was placed)."""
    marked: bool = False
    """Whether the mark (:func:`mark_modules`) was in place: the modules after it are new
    since, a handful, found without touching the thousands before it."""

    def __contains__(self, name: object) -> bool:
        return name in self.names or name in self.since_mark


@dataclass
class WorkerState:
    """State the worker keeps between checks."""

    root: Path
    counter: int = 0
    sources: dict[str, str] = field(default_factory=dict)
    """The file name each loaded snippet module was compiled under (its linecache entry)."""
    marked: Modules | None = None
    """The modules when the warm worker got ready to fork (:func:`mark_modules`)."""


def mark_modules(session: WorkerState) -> None:
    """In the warm worker, before it forks the checks' processes: its modules' names, once,
    and a mark after them in ``sys.modules`` (which keeps its order). A check's process then
    finds the modules a check added by looking at those after the mark, without making a set
    of every name itself: that would write to every name's reference count, and so copy each
    page that holds one from the warm worker into the check's process (thousands of names,
    a thousand pages or more)."""
    sys.modules.pop(_MARK, None)
    session.marked = Modules(frozenset(sys.modules), marked=True)
    sys.modules[_MARK] = types.ModuleType(_MARK)


def modules_now(session: WorkerState) -> Modules:
    """The modules now, before a check: the warm worker's names, and the few after its mark,
    where the mark is in place; else every name."""
    if session.marked is not None:
        since = _after_mark()
        if since is not None:
            return Modules(session.marked.names, frozenset(since), marked=True)
    return Modules(frozenset(sys.modules))


def modules_added(before: Modules) -> list[str]:
    """The names in ``sys.modules`` now that were not ``before``."""
    since = _after_mark() if before.marked else None
    if since is None:  # no mark, or it is gone (the check removed it): every name
        since = [name for name in list(sys.modules) if name != _MARK]
    return [name for name in since if name not in before]


def _after_mark() -> list[str] | None:
    """The names after the mark in ``sys.modules`` (which keeps the order names came in):
    what was imported, or put there again, since it was placed; None without a mark, or
    where the modules changed meanwhile (a thread of the check's importing)."""
    if _MARK not in sys.modules:
        return None
    names: list[str] = []
    try:
        for name in reversed(sys.modules):
            if name == _MARK:
                return names
            names.append(name)
    except RuntimeError:  # changed size during the walk
        return None
    return None


def load_entry(session: WorkerState, request: CheckRequest) -> Any:
    """The function or class the request checks, from its snippet."""
    if request.module:
        with phase("import"):
            module = importlib.import_module(request.module)
    else:
        module = _exec_source(session, request.source, request.filename)
    name = request.entry
    if name:
        with phase("entry"):
            if not hasattr(module, name):
                raise LookupError(f"the snippet defines no {name!r}")
            return getattr(module, name)
    return _last_definition(module)


def _exec_source(session: WorkerState, source: str, filename: str) -> types.ModuleType:
    name = f"formula_snippet_{session.counter}"
    module = types.ModuleType(name)
    sys.modules[name] = module
    # Readable by inspect, as a module file is: autograph converts the snippet's Python
    # control flow under tf.function (as it does for the user's own module), and
    # tracebacks quote its lines. Dropped with the module after the check. The module has
    # no ``__file__``: autograph, finding a module with the function's file name, would ask
    # linecache to reload that "file" and so drop this entry.
    linecache.cache[filename] = (len(source), None, source.splitlines(keepends=True), filename)
    session.sources[name] = filename
    with phase("load"):
        code = compile(source, filename, "exec")
        exec(code, module.__dict__)  # noqa: S102  (running the user's snippet is the point)
    return module


def _last_definition(module: types.ModuleType) -> Any:
    defined = [
        value
        for value in vars(module).values()
        if (inspect.isfunction(value) or inspect.isclass(value) or _traced(value))
        and getattr(_traced(value) or value, "__module__", None) == module.__name__
    ]
    if not defined:
        with phase("entry"):
            raise LookupError(
                "the snippet defines no function or class to check; to check one it only "
                'imports or names (MHA = tf.keras.layers.MultiHeadAttention), say entry="MHA"'
            )
    return defined[-1]


def _traced(value: Any) -> Any:
    """The Python function behind a ``@tf.function``, or ``None``: such an entry is as much
    the snippet's own definition as the function it wraps."""
    wrapped = getattr(value, "python_function", None)
    return wrapped if inspect.isfunction(wrapped) else None


_AUTOGRAPH_MODULE = "__autograph_generated_file"


def forget_local_modules(session: WorkerState, before: Modules) -> list[str]:
    """Report project files imported by this check, then unload them so edits are seen;
    drop the modules AutoGraph generated for it, and their temporary files."""
    root = str(session.root) + os.sep
    files = []
    for name in modules_added(before):
        path = getattr(sys.modules.get(name), "__file__", None) or ""
        if name.startswith(_AUTOGRAPH_MODULE):
            # The file AutoGraph wrote the converted code to (the code stays loaded). The
            # worker's folder goes when the worker does; this keeps a long-lived worker's
            # folder (under mkdocs serve) from growing with every check.
            with contextlib.suppress(OSError):
                os.unlink(path)
            del sys.modules[name]
            continue
        if name.startswith("formula_snippet_") or path.startswith(root):
            if path.startswith(root) and os.path.exists(path):
                files.append(os.path.relpath(path, session.root))
            linecache.cache.pop(session.sources.pop(name, ""), None)
            del sys.modules[name]
    return sorted(files)
