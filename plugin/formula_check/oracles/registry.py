"""Look oracles up by name; load users' own oracles from ``package.module:attr``."""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import importlib
import sys
import threading
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
    gets read-only arrays, and it is never taken for a builtin. Use the returned oracle."""
    if not isinstance(oracle, Oracle):
        raise OracleError(f"{oracle!r} is not a formula_check.oracles.Oracle")
    if not any(oracle is builtin for builtin in catalog.BUILTINS):
        _ensure_builtins()  # first, whenever an oracle of one's own comes: a name is theirs
        oracle = _own(oracle)
    existing = _REGISTRY.get(oracle.name)
    if existing is not None and not _same(existing, oracle) and not replace:
        raise OracleError(f"an oracle named {oracle.name!r} is already registered")
    _REGISTRY[oracle.name] = oracle
    return oracle


def _same(existing: Oracle, oracle: Oracle) -> bool:
    """Whether registering ``oracle`` again changes nothing (the one already registered, or
    the same oracle of one's own, copied again)."""
    return existing is oracle or (
        existing.source == oracle.source
        and getattr(existing.compute, _WRAPS, None) is getattr(oracle.compute, _WRAPS, False)
        and dataclasses.replace(existing, compute=oracle.compute) == oracle
    )


_WRAPS = "__formula_check_reads__"
"""On a ``compute`` wrapped by :func:`_reading_only`: the function it wraps."""


def _own(oracle: Oracle) -> Oracle:
    """An oracle of one's own as the checker runs it: ``compute`` given read-only arrays, and
    a ``source`` that is never ``"builtin"``. A builtin's float32 casts of the inputs are
    shared by its rounding draws, and its results are cached under the package's version;
    one of one's own gets casts of its own, and its cache key names the file (or the code)
    of its ``compute``, so an edit of it checks its blocks again."""
    compute = oracle.compute
    if getattr(compute, _WRAPS, None) is None:
        compute = _reading_only(compute)
    source = oracle.source if oracle.source != "builtin" else _code_source(compute)
    return dataclasses.replace(oracle, compute=compute, source=source)


def _code_source(compute: Compute) -> str:
    """``module.function@digest`` of the file ``compute`` was defined in, or of its code."""
    function = getattr(compute, _WRAPS, compute)
    module = sys.modules.get(getattr(function, "__module__", "") or "")
    where = getattr(module, "__file__", None)
    if where:
        digest = file_digest(Path(where))
    else:  # defined where there is no file (a notebook's cell, python -c)
        code = getattr(function, "__code__", None)
        text = repr((code.co_code, code.co_consts, code.co_names)) if code else repr(function)
        digest = hashlib.sha256(text.encode("utf-8", "surrogateescape")).hexdigest()
    name = getattr(function, "__qualname__", type(function).__name__)
    return f"{getattr(function, '__module__', '?')}.{name}@{digest[:16]}"


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
    """``compute``, handed read-only views of its arrays. The checker calls an oracle many
    times on the same planned arrays (the code's expected values, the formula's, each
    float32 draw of the tolerance): an oracle of one's own that wrote into its inputs
    (``x *= 2``) would change what every later call computes from, and could make wrong
    code agree with it. Writing into one raises instead, and the block says so."""

    @functools.wraps(compute)
    def reading(arrays: Mapping[str, Any], params: Mapping[str, Any]) -> Mapping[str, Any]:
        return compute({name: _read_only(value) for name, value in arrays.items()}, params)

    setattr(reading, _WRAPS, compute)
    return reading


def _read_only(value: Any) -> Any:
    if not isinstance(value, np.ndarray):
        return value
    view = value.view()
    view.flags.writeable = False
    return view
