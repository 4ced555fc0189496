"""Look oracles up by name; load users' own oracles from ``package.module:attr``."""

from __future__ import annotations

import collections
import copy
import dataclasses
import functools
import gc
import hashlib
import importlib
import re
import sys
import threading
import types
import weakref
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from formula_check import wire
from formula_check.errors import OracleError
from formula_check.lazy import numpy as np  # imported on first use
from formula_check.oracles import catalog, own_process
from formula_check.oracles.base import Compute, Oracle
from formula_check.snippets import file_digest

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
written to it (:func:`..store.cache.cacheable`)."""

_WRAPPED: weakref.WeakKeyDictionary[Compute, Compute] = weakref.WeakKeyDictionary()
"""Each ``compute`` made by :func:`_reading_only`, and the one it wraps. Known by identity: a
user's own decorator around one (``functools.wraps`` copies its attributes) is no wrapper."""


def _original(compute: Compute) -> Compute:
    return _WRAPPED.get(compute, compute)


def _own(oracle: Oracle) -> Oracle:
    """An oracle of one's own as the checker runs it: ``compute`` given copies of its own of
    the arrays (read-only) and parameters on each call, and a ``source`` that is never
    ``"builtin"``. A builtin's float32 casts of the inputs are shared by its rounding draws,
    and its results are cached under the package's version; one of one's own gets casts of
    its own, and its cache key names its code and every other field (its ``params``, sizes,
    tolerances), or it is not cached at all (:data:`UNKEYED`)."""
    ours = oracle.compute in _WRAPPED  # one register() returned, perhaps with fields changed
    compute = oracle.compute if ours else _reading_only(oracle.compute)
    given = "" if oracle.builtin else oracle.source  # a source of the user's (load_oracle's)
    if ours:  # what _own added to it before is made again below
        given = "" if given.startswith(UNKEYED) else _OURS.sub("", given)
    code = _code_source(_original(compute))  # always: a given source need not follow the code
    fields = {
        field.name: getattr(oracle, field.name)
        for field in dataclasses.fields(oracle)
        if field.name not in {"compute", "source", "name"}  # the name is in the key apart
    }
    data = _stable(fields)
    if code.startswith(UNKEYED) or data is None:
        source = " ".join(filter(None, (UNKEYED, given, code.removeprefix(UNKEYED))))
    else:
        source = " ".join(filter(None, (given, f"{code}+{_digest(data)}")))
    return dataclasses.replace(oracle, compute=compute, source=source)


_OURS = re.compile(r"(?:\A| )\S+@[0-9a-f]{16}\+[0-9a-f]{16}\Z")
"""How an oracle's ``source`` made by :func:`_own` ends: its code's name and digest, then the
digest of its other fields."""
_FIXED = (type(None), type(...), bool, int, float, complex, str, bytes)
_DEEPEST = 24
"""How deep :func:`_stable` follows containers, closures and code before it gives up."""


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogateescape")).hexdigest()[:16]


def _stable(value: object, depth: int = 0) -> str | None:
    """A text that names ``value`` alike in every process (no address, no hash order), or
    None when there is none: an object the checker cannot see into, or a function it cannot
    name (:func:`_code_source`). Each kind is named by its entry of :data:`_NAMED_BY`, which
    names what it holds one level deeper."""
    if depth > _DEEPEST:
        return None
    if type(value) in _FIXED:
        return repr(value)
    naming = next((naming for kind, naming in _NAMED_BY if kind(value)), None)
    return None if naming is None else naming(value, depth + 1)


def _array_text(array: np.ndarray, depth: int) -> str | None:
    """By dtype, shape and bytes, where those say it all (:func:`_named`)."""
    return f"array({wire.fingerprint({'': array}).hex()})" if _named(array) else None


def _scalar_text(scalar: np.generic, depth: int) -> str | None:
    """A NumPy scalar by its dtype and value; none for a record's (its item leaves out its
    field names)."""
    return None if scalar.dtype.names else f"{scalar.dtype.str}({scalar.item()!r})"


def _sequence_text(sequence: list[object] | tuple[object, ...], depth: int) -> str | None:
    kind, items = _kind(sequence), [_stable(item, depth) for item in sequence]
    return None if kind is None or None in items else f"{kind}({', '.join(items)})"  # type: ignore[arg-type]


def _set_text(items: set[object] | frozenset[object], depth: int) -> str | None:
    named = [_stable(item, depth) for item in items]
    return None if None in named else f"set({', '.join(sorted(named))})"  # type: ignore[arg-type]


def _proxy_text(proxy: types.MappingProxyType[object, object], depth: int) -> str | None:
    """A read-only view, by the mapping it holds."""
    inner = gc.get_referents(proxy)
    held = _stable(inner[0], depth) if len(inner) == 1 else None
    return None if held is None else f"mappingproxy({held})"


def _mapping_text(mapping: Mapping[object, object], depth: int) -> str | None:
    """Sorted, as sets are: a dict made from a set has another order in each process. A
    defaultdict's factory is what a missing key reads."""
    kind = _kind(mapping)
    pairs = [(_stable(key, depth), _stable(item, depth)) for key, item in mapping.items()]
    factory = _stable(getattr(mapping, "default_factory", None), depth)
    if kind is None or factory is None or any(None in pair for pair in pairs):
        return None
    listed = ", ".join(sorted(f"{key}: {item}" for key, item in pairs))
    return f"{kind}{{{listed}}}" + ("" if factory == "None" else f"({factory})")


def _dataclass_text(value: Any, depth: int) -> str | None:
    fields = {field.name: getattr(value, field.name) for field in dataclasses.fields(value)}
    held = _stable(fields, depth)
    return None if held is None else f"{type(value).__module__}.{type(value).__qualname__}:{held}"


def _callable_text(function: object, depth: int) -> str | None:
    source = _code_source(function, depth)
    return None if source.startswith(UNKEYED) else source


_NAMED_BY: tuple[tuple[Callable[[object], bool], Callable[[Any, int], str | None]], ...] = (
    (lambda value: isinstance(value, np.ndarray), _array_text),
    (lambda value: isinstance(value, np.generic), _scalar_text),
    (lambda value: isinstance(value, list | tuple), _sequence_text),
    (lambda value: isinstance(value, set | frozenset), _set_text),
    (lambda value: isinstance(value, types.MappingProxyType), _proxy_text),
    (lambda value: isinstance(value, Mapping), _mapping_text),
    (
        lambda value: dataclasses.is_dataclass(value) and not isinstance(value, type),
        _dataclass_text,
    ),
    (callable, _callable_text),
)
"""Each kind :func:`_stable` sees into, first match first, and how it names one."""


_CONTAINERS = (collections.OrderedDict, collections.Counter, collections.defaultdict)
"""Containers besides list, tuple and dict whose items (and a defaultdict's factory) are all
that code reading them sees."""


def _kind(value: object) -> str | None:
    """A container's type as a key names it (a named tuple with its field names: two orders
    of them are two values), or None where its items do not say all that code reading it
    sees: a subclass's state or ``__missing__`` of its own, a ChainMap's layers."""
    kind = type(value)
    if kind in (list, tuple, dict):
        return kind.__name__
    name = f"{kind.__module__}.{kind.__qualname__}"
    if kind in _CONTAINERS:
        return name
    fields = getattr(kind, "_fields", None)
    if isinstance(value, tuple) and isinstance(fields, tuple) and not hasattr(value, "__dict__"):
        return f"{name}{fields!r}"
    return None


def _named(array: np.ndarray) -> bool:
    """Whether an array's dtype, shape and bytes name what it holds: a plain array (not a
    matrix or a masked one, which compute otherwise), of numbers, times or fixed-width text
    with no padding bytes (whose content is whatever the memory held: a long double's, an
    aligned record's), and no objects or record fields (whose names the bytes leave out)."""
    dtype = array.dtype
    if type(array) is not np.ndarray or dtype.names is not None or dtype.kind not in "biufcmMSU":
        return False
    return dtype.kind not in "fc" or dtype.itemsize <= (8 if dtype.kind == "f" else 16)


_FROM_FILES: weakref.WeakValueDictionary[int, Oracle] = weakref.WeakValueDictionary()
"""The oracles :func:`load_oracle` registered, by ``id``: each is named by its module's file
(a copy of one, ``dataclasses.replace``-d, is another object, and is not)."""


def loaded(oracle: Oracle) -> bool:
    """Whether ``oracle`` is one :func:`load_oracle` registered (the ``oracles`` option, under
    ``mkdocs serve`` imported again on every rebuild): its source names its module's file."""
    return _FROM_FILES.get(id(oracle)) is oracle


def _code_text(code: types.CodeType, depth: int) -> str | None:
    """A code object's instructions, names and constants (nested code by its own text)."""
    if depth > _DEEPEST:
        return None
    constants = []
    for constant in code.co_consts:
        text = (
            _code_text(constant, depth + 1)
            if isinstance(constant, types.CodeType)
            else _stable(constant, depth + 1)
        )
        if text is None:
            return None
        constants.append(text)
    return f"{code.co_name}|{code.co_code.hex()}|{code.co_names}|{code.co_varnames}|{constants}"


def _code_source(function: object, depth: int = 0) -> str:
    """``module.function@digest`` for a plain function defined in a file: the digest of the
    file (its module-level names), of the function's own code, and of the values it closes
    over and its defaults. Anything else (a function defined where there is no file, such as
    a notebook's cell, whose globals another cell may change; a ``functools.partial``; an
    object with ``__call__``; a closure over an object the checker cannot see into) is
    :data:`UNKEYED`: what it computes cannot be named, so no result of it is cached."""
    module_name = str(getattr(function, "__module__", None) or "?")
    name = f"{module_name}.{getattr(function, '__qualname__', type(function).__name__)}"
    module = sys.modules.get(module_name)
    where = getattr(module, "__file__", None)
    if not isinstance(function, types.FunctionType) or not where:
        return f"{UNKEYED}{name}"
    cells = tuple(cell.cell_contents for cell in function.__closure__ or ())
    held = _stable((cells, function.__defaults__, function.__kwdefaults__ or {}), depth + 1)
    code = _code_text(function.__code__, depth + 1)
    if held is None or code is None:
        return f"{UNKEYED}{name}"
    return f"{name}@{_digest(f'{file_digest(Path(where))}|{code}|{held}')}"


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


def load_oracle(
    reference: str, project_root: Path | None = None, env: Sequence[str] = ()
) -> Oracle:
    """Register the :class:`Oracle` that ``package.module:attr`` names, imported and called in
    a process of its own (:mod:`.own_process`), never in this one: with the environment a
    check gets (the variables ``env`` names, none of the build's others), confined as a check
    is, its working folder the project root. Its ``source`` names the reference and the
    digest of its module's file (and its code, as :func:`register` names it)."""
    _reference_parts(reference)
    oracle = own_process.load(reference, (project_root or Path.cwd()).resolve(), env)
    _ensure_builtins()
    _REGISTRY[oracle.name] = oracle  # the module as it is now: an older load is replaced
    _FROM_FILES[id(oracle)] = oracle
    return oracle


def imported(reference: str, project_root: Path) -> Oracle:
    """In an oracle's own process (:mod:`..runtime.oracle_server`): import
    ``package.module:attr`` from ``project_root`` and give the :class:`Oracle` as the checker
    runs an oracle of one's own (:func:`_own`: read-only arrays, ``source`` named)."""
    module_name, attr = _reference_parts(reference)
    if str(project_root) not in sys.path:
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
    source = getattr(module, "__file__", None)
    digest = file_digest(Path(source)) if source else "unknown"
    return _own(dataclasses.replace(oracle, source=f"{reference}@{digest[:16]}"))


def _reference_parts(reference: str) -> tuple[str, str]:
    """``package.module`` and ``attr`` of ``package.module:attr``."""
    module_name, sep, attr = reference.partition(":")
    if not sep or not module_name or not attr:
        raise OracleError(f"oracle reference {reference!r} must look like 'package.module:name'")
    return module_name, attr


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
        results = compute(own, _own_copy(params))
        if not isinstance(results, Mapping):
            return results  # said where its outputs are read
        return {name: _own_copy(value) for name, value in results.items()}

    _WRAPPED[reading] = compute
    return reading


def _read_only(value: Any) -> Any:
    """A read-only copy of an array (other values as they are): a copy of its own, so that
    turning ``writeable`` back on, or writing through ``.base``, reaches no other call."""
    if not isinstance(value, np.ndarray):
        return value
    owned = np.array(value, copy=True)
    owned.flags.writeable = False
    return owned


def _own_copy(value: Any) -> Any:
    """A deep copy of ``value``, so that nothing a call changes in it reaches another call;
    where something in it cannot be copied (a module, a lock), the plain containers around
    it are copied and it is passed as it is."""
    try:
        return copy.deepcopy(value)
    except Exception:
        if type(value) is dict:
            return {key: _own_copy(item) for key, item in value.items()}
        if type(value) in {list, tuple}:
            return type(value)(_own_copy(item) for item in value)
        return value
