"""Look oracles up by name; load users' own oracles from ``package.module:attr``."""

from __future__ import annotations

import copy
import dataclasses
import functools
import hashlib
import importlib
import sys
import threading
import types
import weakref
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import OracleError
from ..snippets import file_digest
from . import catalog
from .base import Compute, Oracle

_REGISTRY: dict[str, Oracle] = {}
_BUILTINS_LOADED = False
_LOCK = threading.Lock()


def register(oracle: Oracle, *, replace: bool = False) -> Oracle:
    """Add ``oracle`` to the catalog under its name; return what was registered.

    An oracle of one's own is registered as a copy of it (see :func:`_own`): its ``compute``
    gets read-only arrays and parameters of its own, and it is never taken for a builtin. Use
    the returned oracle."""
    if not isinstance(oracle, Oracle):
        raise OracleError(f"{oracle!r} is not a formula_check.oracles.Oracle")
    if not any(oracle is builtin for builtin in catalog.BUILTINS):
        _ensure_builtins()  # first, whenever an oracle of one's own comes: a name is theirs
        oracle = _own(oracle)
    existing = _REGISTRY.get(oracle.name)
    if existing is not None and not replace and not _same(existing, oracle):
        raise OracleError(f"an oracle named {oracle.name!r} is already registered")
    _REGISTRY[oracle.name] = oracle
    return oracle


def _same(existing: Oracle, oracle: Oracle) -> bool:
    """Whether registering ``oracle`` again changes nothing (the one already registered, or
    the same oracle of one's own, copied again). Fields that cannot be compared (arrays in
    ``params``) make it another oracle: it then needs ``replace``."""
    if existing is oracle:
        return True
    if existing.source != oracle.source or _original(existing.compute) is not _original(
        oracle.compute
    ):
        return False
    try:
        return bool(dataclasses.replace(existing, compute=oracle.compute) == oracle)
    except (ValueError, TypeError):
        return False


UNKEYED = "unkeyed:"
"""How the ``source`` of an oracle of one's own begins when nothing stable names what its
``compute`` computes (see :func:`_code_source`): its checks are never read from the cache or
written to it (:func:`..cache.cacheable`)."""

_WRAPPED: weakref.WeakKeyDictionary[Compute, Compute] = weakref.WeakKeyDictionary()
"""Each ``compute`` made by :func:`_reading_only`, and the one it wraps. Known by identity: a
user's own decorator around one (``functools.wraps`` copies its attributes) is no wrapper."""


def _original(compute: Compute) -> Compute:
    return _WRAPPED.get(compute, compute)


def _own(oracle: Oracle) -> Oracle:
    """An oracle of one's own as the checker runs it: ``compute`` given read-only arrays and
    a copy of the parameters on each call, and a ``source`` that is never ``"builtin"``. A
    builtin's float32 casts of the inputs are shared by its rounding draws, and its results
    are cached under the package's version; one of one's own gets casts of its own, and its
    cache key names the file its ``compute`` is defined in (or it is not cached at all)."""
    compute = oracle.compute if oracle.compute in _WRAPPED else _reading_only(oracle.compute)
    source = oracle.source if oracle.source != "builtin" else _code_source(_original(compute))
    return dataclasses.replace(oracle, compute=compute, source=source)


_FIXED = (type(None), bool, int, float, complex, str, bytes)


def _fixed(value: object) -> bool:
    """Whether ``value``'s ``repr`` says all of it (a number, a string, a tuple of them)."""
    if isinstance(value, tuple):
        return all(_fixed(item) for item in value)
    return type(value) in _FIXED


def _code_source(function: Compute) -> str:
    """``module.function@digest``: the digest of the file a plain function is defined in,
    with the values it closes over and its defaults, when their ``repr`` says all of them.
    Anything else (a function defined where there is no file, such as a notebook's cell, whose
    globals may change in another cell; a ``functools.partial``; an object with ``__call__``;
    a closure over an object) is :data:`UNKEYED`: what it computes cannot be named, so no
    result of it is ever taken from the cache."""
    module_name = str(getattr(function, "__module__", None) or "?")
    name = f"{module_name}.{getattr(function, '__qualname__', type(function).__name__)}"
    module = sys.modules.get(module_name)
    where = getattr(module, "__file__", None)
    if not isinstance(function, types.FunctionType) or not where:
        return f"{UNKEYED}{name}"
    cells = tuple(cell.cell_contents for cell in function.__closure__ or ())
    held = (cells, function.__defaults__, tuple(sorted((function.__kwdefaults__ or {}).items())))
    if not _fixed(held):
        return f"{UNKEYED}{name}"
    digest = hashlib.sha256(f"{file_digest(Path(where))}\n{held!r}".encode()).hexdigest()
    return f"{name}@{digest[:16]}"


def _ensure_builtins() -> None:
    global _BUILTINS_LOADED  # noqa: PLW0603  (the builtins are registered once, on first use)
    if _BUILTINS_LOADED:
        return
    with _LOCK:  # engine threads may ask for oracles at the same moment
        if not _BUILTINS_LOADED:
            for oracle in catalog.BUILTINS:
                register(oracle)
            _BUILTINS_LOADED = True


def all_oracles() -> list[Oracle]:
    """Every registered oracle, builtins first, in registration order."""
    _ensure_builtins()
    return list(_REGISTRY.values())


def get_oracle(name: str) -> Oracle:
    """The oracle called ``name``, or an error listing the known ones."""
    _ensure_builtins()
    try:
        return _REGISTRY[name]
    except KeyError:
        known = ", ".join(sorted(_REGISTRY))
        raise OracleError(f"unknown oracle {name!r}; known oracles: {known}") from None


def load_oracle(reference: str, project_root: Path | None = None) -> Oracle:
    """Import ``package.module:attr`` (an :class:`Oracle`) and register it.

    The project root is put on ``sys.path`` first so a docs project's own modules import.
    Oracles are plain NumPy, so importing them in the calling process is safe.
    """
    module_name, sep, attr = reference.partition(":")
    if not sep or not module_name or not attr:
        raise OracleError(f"oracle reference {reference!r} must look like 'package.module:name'")
    if project_root is not None and str(project_root) not in sys.path:
        sys.path.insert(0, str(project_root))
    try:
        module = importlib.import_module(module_name)
    except Exception as exc:  # an import error of the user's module, whatever its kind
        raise OracleError(f"cannot import oracle module {module_name!r}: {exc}") from exc
    try:
        oracle = getattr(module, attr)
    except AttributeError:
        raise OracleError(f"module {module_name!r} has no attribute {attr!r}") from None
    if not isinstance(oracle, Oracle):
        raise OracleError(f"{reference} is a {type(oracle).__name__}, not an Oracle")
    _ensure_builtins()
    source = getattr(module, "__file__", None)
    digest = file_digest(Path(source)) if source else "unknown"
    own = dataclasses.replace(oracle, source=f"{reference}@{digest[:16]}")
    return register(own, replace=True)


def _reading_only(compute: Compute) -> Compute:
    """``compute``, handed read-only views of its arrays and a copy of its parameters of its
    own on each call. The checker calls an oracle many times on the same planned arrays and
    parameters (the code's expected values, the formula's, each float32 draw of the
    tolerance): an oracle of one's own that wrote into its inputs (``x *= 2``) or took a
    parameter out (``params.pop("scale")``) would change what every later call computes
    from, and could make wrong code agree with it. Writing into an array raises instead, and
    the block says so; a parameter taken out is taken out of that call's copy only."""

    @functools.wraps(compute)
    def reading(arrays: Mapping[str, Any], params: Mapping[str, Any]) -> Mapping[str, Any]:
        own = {name: _read_only(value) for name, value in arrays.items()}
        return compute(own, copy.deepcopy(dict(params)))

    _WRAPPED[reading] = compute
    return reading


def _read_only(value: Any) -> Any:
    if not isinstance(value, np.ndarray):
        return value
    view = value.view()
    view.flags.writeable = False
    return view
