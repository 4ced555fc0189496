"""The layer's weights: found, moved off their initial values, read back by the weight map.

No TensorFlow here: a variable is anything with ``assign`` and ``numpy`` (TensorFlow's, or
Keras 3's own); a weight kept as a value (a NumPy array, a ``tf.constant``, a list or tuple of
numbers) is moved through a holder with the same two methods, and a constant is remade by the
function the caller gives.
"""

from __future__ import annotations

import numbers
import re
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from formula_check.execution.snippet_failure import phase

TensorLike = Callable[[Any, Any], Any]
"""Makes a value of the kind of its second argument (a ``tf.constant``, say) holding the
NumPy array that is its first: how a weight that cannot change in place is moved."""

Found = tuple[list[tuple[str, Any, bool]], list[tuple[str, str]]]
"""The weights to move (a name to show, something with ``numpy``, ``assign`` and ``shape``,
whether the weight map reaches it), and the mapped weights that cannot be moved, each with
why."""


def variables(layer: Any, mapping: Mapping[str, str], tensor_like: TensorLike | None) -> Found:
    """The layer's weights to move, and the mapped ones that cannot be. Its trainable weights
    count: Keras tracks its own; a ``tf.Module`` lists its ``trainable_variables``; a plain
    ``tf.Variable`` kept in an attribute is tracked by neither in Keras 3, so the attributes
    (and lists of them) are searched too. So does every weight the map reaches, whatever holds
    it: a frozen layer's or any other non-trainable variable, a NumPy array, a list or tuple
    of numbers, a ``tf.constant`` (``tensor_like`` remakes one; None: none is moved). Keras
    biases start at zero, and so does ``[0.0] * d_ff``, so a term whose weight is never moved
    could be left out unseen. Scalars are left out (a mapped scalar is a parameter of the
    formula, not a weight), and so are weights that hold no floating-point numbers."""
    named: dict[int, tuple[str, Any]] = {}
    unmoved: list[tuple[str, str]] = []

    def add(name: str, value: Any) -> None:  # a tf.Variable or a Keras 3 Variable
        if _is_variable(value) and getattr(value, "trainable", False) and _is_weight(value):
            named.setdefault(id(value), (name, value))

    attributes = vars(layer) if hasattr(layer, "__dict__") else {}
    # public names first: Keras also keeps each weight in private lists of its own
    for attribute, value in sorted(attributes.items(), key=lambda item: item[0].startswith("_")):
        for index, item in enumerate(value if isinstance(value, (list, tuple)) else [value]):
            add(f"{attribute}[{index}]" if isinstance(value, (list, tuple)) else attribute, item)
    tracked = getattr(layer, "trainable_weights", None)
    for variable in tracked if tracked is not None else getattr(layer, "trainable_variables", ()):
        add(str(getattr(variable, "path", None) or variable.name), variable)
    reached: set[int] = set()
    for name, path in mapping.items():
        try:
            value = _follow(layer, path)
        except (AttributeError, ValueError, IndexError, TypeError):
            continue  # reading the weights says what is wrong with the path
        if not _is_weight(value):
            continue
        reached.add(id(value))
        if id(value) in named:
            continue
        holder, why = _holder(layer, path, value, tensor_like)
        if holder is None:
            unmoved.append((name, f"{path}: {why}"))
            continue
        named[id(value)] = (name, holder)
    found = [(name, value, key in reached) for key, (name, value) in named.items()]
    return found, unmoved


def _is_variable(value: Any) -> bool:
    return hasattr(value, "assign") and hasattr(value, "numpy")


def _is_weight(value: Any) -> bool:
    """An array of floating-point numbers, at least a vector: integer indices, masks and
    strings are no weights, and a scalar is a parameter. A list or tuple of numbers that the
    weight map names is a weight too (``[0.0] * d_ff``, moved as floats)."""
    if isinstance(value, (list, tuple)):
        return _numbers(value)
    shape = getattr(value, "shape", None)
    dtype = getattr(value, "dtype", None)
    if shape is None or dtype is None or not len(shape):
        return False
    return "float" in str(getattr(dtype, "name", dtype))  # tf.DType, NumPy's, or Keras' string


def _holder(
    layer: Any, path: str, value: Any, tensor_like: TensorLike | None
) -> tuple[Any | None, str]:
    """Something that moves the weight at ``path``, or None and why it cannot be moved."""
    if _is_variable(value):
        return value, ""
    if isinstance(value, list) or (isinstance(value, np.ndarray) and value.flags.writeable):
        return _InPlace(value), ""  # every reference to the list or array sees the move
    if isinstance(value, np.ndarray):
        remake: TensorLike | None = _read_only
    elif isinstance(value, tuple):
        remake = _tuple_of
    else:
        remake = tensor_like if hasattr(value, "numpy") else None
    if remake is None:
        return None, f"{_kind_of(value)} cannot be remade with moved values here"
    place = _place(layer, path)
    if isinstance(place, str):
        return None, place
    holder = _Replaced(place, value, remake)
    try:  # the same numbers, in a value of its own: whether its place takes one (a property
        holder.assign(holder.numpy())  # without a setter, a tuple does not)
    except (AttributeError, TypeError, IndexError, ValueError) as exc:
        said = f"{type(exc).__name__}: {exc}"[:160]
        return None, f"its holder cannot be given a moved value ({said})"
    return holder, ""


def _numbers(value: list[Any] | tuple[Any, ...]) -> bool:
    """A non-empty list or tuple of real numbers, or of such lists (rows of a matrix)."""
    return bool(value) and all(
        _numbers(item)
        if isinstance(item, (list, tuple))
        else isinstance(item, numbers.Real) and not isinstance(item, (bool, np.bool_))
        for item in value
    )


def _as_array(value: Any) -> Any:
    """The numbers ``value`` holds, as floating-point numbers: a list of Python ints (a bias
    of ``[0] * d_ff``) moves to floats, as a float32 computation reads it."""
    array = np.array(value.numpy() if hasattr(value, "numpy") else value)
    return array if array.dtype.kind == "f" else array.astype(np.float64)


def _tuple_of(array: Any, like: Any) -> tuple[Any, ...]:
    """A tuple of Python floats (rows as tuples) holding ``array``."""
    return tuple(_tuple_of(row, like) if np.ndim(row) else float(row) for row in array)


def _read_only(array: Any, like: Any) -> Any:
    """A read-only NumPy array of ``like``'s dtype holding ``array``."""
    made = np.array(array, dtype=like.dtype)
    made.flags.writeable = False
    return made


def _place(layer: Any, path: str) -> tuple[Any, str | int] | str:
    """The object holding the last step of ``path`` and the attribute name or index there;
    else why there is none."""
    parts = path.split(".")
    match = _STEP.fullmatch(parts[-1])
    if match is None:
        return "not a path"
    try:
        owner = _follow(layer, ".".join(parts[:-1])) if len(parts) > 1 else layer
        indexes = re.findall(r"-?\d+", match.group(2))
        if not indexes:
            return owner, match.group(1)
        owner = _step(owner, match.group(1))
        for index in indexes[:-1]:
            owner = owner[int(index)]
    except (AttributeError, TypeError, IndexError, ValueError) as exc:
        return f"its holder cannot be reached ({type(exc).__name__}: {exc})"
    return owner, int(indexes[-1])


def held_as_value(holder: Any) -> bool:
    """Whether ``holder`` moves a weight kept as a value (an array, a constant), which a graph
    traced before the move keeps as it was; a variable is read whenever a graph runs."""
    return isinstance(holder, (_InPlace, _Replaced))


class _InPlace:
    """A NumPy array or a list of numbers the layer keeps: moved by writing into it."""

    def __init__(self, held: Any) -> None:
        self.held = held
        self.shape = tuple(np.shape(held))

    def numpy(self) -> Any:
        return _as_array(self.held)  # a copy

    def assign(self, value: Any) -> None:
        if isinstance(self.held, list):
            self.held[:] = np.asarray(value).tolist()
        else:
            self.held[...] = value


class _Replaced:
    """A weight that cannot change in place (a ``tf.constant``, a read-only array): moved by
    putting a value of the same kind in its place."""

    def __init__(self, place: tuple[Any, str | int], value: Any, remake: TensorLike) -> None:
        self.owner, self.place = place
        self.value = value
        self.remake = remake
        self.shape = tuple(np.shape(value))

    def numpy(self) -> Any:
        return _as_array(self.value)

    def assign(self, value: Any) -> None:
        made = self.remake(np.asarray(value), self.value)
        if isinstance(self.place, str):
            setattr(self.owner, self.place, made)
        else:
            self.owner[self.place] = made
        self.value = made


def perturb(variables: list[Any], seed: int) -> None:
    """Move every weight off its initial value, so zero biases and unit gains are exercised."""
    for variable, value in zip(variables, moved_values(variables, seed), strict=True):
        variable.assign(value)


def moved_values(weights: list[Any], seed: int) -> list[Any]:
    """The values :func:`perturb` moves ``weights`` to (arrays, or anything with ``numpy``),
    in order: a caller may assign some before others (a graph traced in between)."""
    rng = np.random.default_rng(seed + 7919)
    values = []
    for weight in weights:
        current = np.asarray(weight.numpy() if hasattr(weight, "numpy") else weight)
        noise = rng.standard_normal(current.shape).astype(current.dtype)
        noise *= 0.1  # in place, as 0.1 * noise and current + noise: the same bits, in
        noise += current  # one array instead of three
        values.append(noise)
    return values


def read_weights(layer: Any, mapping: Mapping[str, str]) -> tuple[dict[str, Any], list[str]]:
    """The mapped weights' values, and the names of those the code never built (never used)."""
    values: dict[str, Any] = {}
    unused: list[str] = []
    for name, path in mapping.items():
        with phase(f"reading weight {name}={path}"):
            try:
                value = _follow(layer, path)
            except (AttributeError, ValueError):
                if not _unbuilt_on_path(layer, path):
                    raise
                unused.append(name)  # a sub-layer never called has no weights to show
                continue
            if value is None:
                raise ValueError(f"{path} is None ({_why_none(layer, path)})")
            # a copy: an array the layer keeps is moved in place after the first call
            array = np.array(value.numpy() if hasattr(value, "numpy") else value)
            if array.dtype.kind not in "biuf":
                raise TypeError(
                    f"weights: {name}={path} is {_kind_of(value)}, not a weight (numbers); "
                    "name a variable of the layer, such as inner.kernel"
                )
            values[name] = array
    return values, unused


_SWITCHED_OFF = {"bias": "use_bias=False", "beta": "center=False", "gamma": "scale=False"}
"""The Keras constructor argument that leaves a layer without the weight of that name."""


def _why_none(layer: Any, path: str) -> str:
    """Why the weight at ``path`` is None, in the words of the layer that holds it: a Dense
    built with ``use_bias=False`` has no bias, a LayerNormalization built with
    ``center=False`` no beta (and with ``scale=False`` no gamma)."""
    owner_path, _, attribute = path.rpartition(".")
    switch = _SWITCHED_OFF.get(attribute)
    if switch is None:
        return "the layer was built without it"
    if attribute == "bias":
        return f"a layer built with {switch} has no bias"
    try:
        owner = _follow(layer, owner_path) if owner_path else layer
    except (AttributeError, ValueError, IndexError, TypeError):
        return "the layer was built without it"
    return f"a {type(owner).__name__} built with {switch} has no {attribute}"


def _kind_of(value: Any) -> str:
    """What a value is, in a few words, without trusting its ``str``."""
    kind = type(value).__name__
    if isinstance(value, str):
        return f"the text {value[:40]!r}"
    return f"a {kind}" if kind[:1].lower() not in "aeiou" else f"an {kind}"


def _unbuilt_on_path(obj: Any, path: str) -> bool:
    """Does the path pass through a Keras layer that was never built (so never called)?"""
    parts = path.split(".")
    for depth in range(len(parts)):
        try:
            current = _follow(obj, ".".join(parts[:depth])) if depth else obj
        except (AttributeError, ValueError, IndexError, TypeError):
            return False
        if getattr(current, "built", True) is False:
            return True
    return False


_STEP = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)((?:\[-?\d+\])*)")


CALL_ORDER = "_formula_check_call_order"
"""The attribute in which a model a builder made keeps its layers in the order the builder
first called them (Keras' ``model.layers`` follows the model's graph instead)."""


class _LayersOfClass(list[Any]):
    """A model's layers of one class, which a path must pick one of (``Dense[1]``)."""


def _follow(obj: Any, path: str) -> Any:
    """Walk ``wq.kernel`` or ``ffn.layers[0].bias`` through attributes and indexes only; a
    model built with Keras' functional API keeps its layers by name, not in attributes, so
    a step it has no attribute for is its layer of that name (``get_layer``), else the list
    of its layers of that class (``Conv1D[1].kernel``), in the order a builder called them,
    or else the model's: Keras names a layer it creates by how many it created before in the
    process, never the same twice."""
    parts = path.split(".")
    for place, part in enumerate(parts):
        match = _STEP.fullmatch(part)
        if match is None:
            raise ValueError(f"bad weight path {path!r}")
        name, indexes = match.group(1), re.findall(r"-?\d+", match.group(2))
        owner, obj = obj, _step(obj, name)
        if isinstance(obj, _LayersOfClass) and not indexes:
            ranked = [
                ".".join([*parts[:place], f"{name}[{rank}]", *parts[place + 1 :]])
                for rank in (0, len(obj) - 1)
            ]
            raise AttributeError(_rank_needed(owner, name, len(obj), ranked))
        for index in indexes:
            obj = _index(obj, int(index), name)
    return obj


def _rank_needed(model: Any, name: str, count: int, ranked: list[str]) -> str:
    """A class named where one of its layers is meant: the path with the first rank, and
    with the last."""
    if count == 1:
        return f"{name} names the model's one {name} layer: write {ranked[0]}"
    order = (
        "in the order the builder calls them"
        if getattr(model, CALL_ORDER, None) is not None
        else "in the order of the model's layers"
    )
    return (
        f"{name} names the model's {count} {name} layers, counted {order}: write "
        f"{ranked[0]} for the first (to {ranked[1]} for the last)"
    )


def _index(obj: Any, index: int, name: str) -> Any:
    try:
        return obj[index]
    except IndexError:
        size = len(obj) if hasattr(obj, "__len__") else 0
        raise IndexError(f"{name} holds {size} items, so [{index}] is out of range") from None


def _step(obj: Any, name: str) -> Any:
    try:
        return getattr(obj, name)
    except AttributeError:
        get_layer = getattr(obj, "get_layer", None)
        if get_layer is None:
            raise
        try:
            return get_layer(name)
        except ValueError:
            pass
        called = getattr(obj, CALL_ORDER, None)  # a builder's model: in the order of its calls
        layers = called if called is not None else getattr(obj, "layers", ())
        of_class = _LayersOfClass(layer for layer in layers if type(layer).__name__ == name)
        if of_class:
            return of_class
        raise AttributeError(
            f"{type(obj).__name__} has no attribute and no layer named {name!r}, nor a layer "
            "of that class"
        ) from None


def follow(obj: Any, path: str) -> Any:
    """The value at ``path`` (an output the layer keeps on an attribute, say)."""
    return _follow(obj, path)


def preset_root(layer: Any, mapping: Mapping[str, str], preset: tuple[str, ...]) -> str:
    """Where the preset's weight paths (``preset`` names them) hold: ``""`` on the layer
    itself, else the path of the one sub-layer, among the layer's public attributes (and
    theirs, three deep), on which every one of them does. Several is an error that says what
    to write; none leaves the paths as written, for reading them to say what is missing."""
    paths = [mapping[name] for name in preset if name in mapping]
    if not paths or _holds(layer, paths):
        return ""
    found = [place for place, value in _sublayers(layer, "", 3) if _holds(value, paths)]
    if len(found) > 1:
        raise ValueError(
            f"the preset's weights ({paths[0]}, ...) are on {len(found)} sub-layers of the "
            f"layer ({', '.join(found)}): name the one the formula is about after the "
            f"preset's name, as in @{found[0]}"
        )
    # none: the paths stay as written, and reading them says what is wrong (or unbuilt)
    return found[0] if found else ""


def _holds(obj: Any, paths: list[str]) -> bool:
    try:
        return all(_follow(obj, path) is not None for path in paths)
    except (AttributeError, ValueError, IndexError, TypeError):
        return False


def _sublayers(obj: Any, prefix: str, depth: int) -> list[tuple[str, Any]]:
    """``(path, value)`` of the public attributes holding objects with attributes of their
    own (sub-layers), ``depth`` levels down; each object once, at its shortest path."""
    found: list[tuple[str, Any]] = []
    seen: set[int] = {id(obj)}
    level = [(prefix, obj)]
    for _ in range(depth):
        below = []
        for place, value in level:
            attributes = vars(value) if hasattr(value, "__dict__") else {}
            for name, item in attributes.items():
                if name.startswith("_") or id(item) in seen or not hasattr(item, "__dict__"):
                    continue
                seen.add(id(item))
                path = f"{place}.{name}" if place else name
                found.append((path, item))
                below.append((path, item))
        level = below
    return found
