"""The weights a restored SavedModel exposes to a weight map: each tracked child saved under a
private name given its public one (:func:`public_names`), and the attribute paths to its
variables listed (:func:`exposed`) for the error that says which weights there are.
"""

from __future__ import annotations

import contextlib
from typing import Any

import tensorflow as tf

MOST_OBJECTS = 10_000
"""How many restored objects a SavedModel's tree is walked through, at most."""


def public_names(obj: Any, seen: set[int] | None = None) -> None:
    """Give each restored object's tracked child saved under a private name (a Keras
    ``Dense`` saves its kernel as ``_kernel``) its public name too, so that the weight map's
    ``wq.kernel`` reads a SavedModel as it reads the layer it was exported from."""
    seen = set() if seen is None else seen
    if id(obj) in seen or _is_variable(obj) or len(seen) > MOST_OBJECTS:
        return
    seen.add(id(obj))
    children = list(vars(obj).items()) if hasattr(obj, "__dict__") else []
    for name, child in children:
        if name.startswith("_") and not name.startswith("__") and _is_tracked(child):
            public = name.lstrip("_")
            if public and not hasattr(obj, public):
                with contextlib.suppress(AttributeError, TypeError, ValueError):
                    setattr(obj, public, child)
        if _is_tracked(child) and not name.startswith("__"):
            for item in child if isinstance(child, (list, tuple)) else [child]:
                public_names(item, seen)


def _is_variable(value: Any) -> bool:
    return isinstance(value, tf.Variable)


def _is_tracked(value: Any) -> bool:
    """A child worth a path: a variable, a restored object, or a list of them."""
    if isinstance(value, (list, tuple)):
        return any(_is_tracked(item) for item in value)
    return _is_variable(value) or type(value).__name__ == "_UserObject"


def exposed(obj: Any, prefix: str = "", seen: set[int] | None = None) -> list[str]:
    """The attribute paths to the variables a restored object exposes (public names)."""
    seen = set() if seen is None else seen
    if id(obj) in seen or len(seen) > MOST_OBJECTS:
        return []
    seen.add(id(obj))
    found = []
    for name, child in sorted(vars(obj).items()) if hasattr(obj, "__dict__") else []:
        if name.startswith("_"):
            continue
        items = child if isinstance(child, (list, tuple)) else [child]
        for index, item in enumerate(items):
            step = f"{prefix}{name}" + (f"[{index}]" if isinstance(child, (list, tuple)) else "")
            if _is_variable(item):
                found.append(step)
            elif _is_tracked(item):
                found += exposed(item, step + ".", seen)
    return found
