"""The entry, ready to call: what it is taken for (a function, a layer class, a factory),
built with its keywords, and bound to the request's arrays and values."""

from __future__ import annotations

import contextlib
import inspect
import sys
from collections.abc import Mapping
from typing import Any

import tensorflow as tf

from formula_check.execution import builder
from formula_check.execution.snippet_failure import phase, said
from formula_check.messages import Argument, Call, CheckRequest, Value
from formula_check.model import Array

Sources = Mapping[str, Mapping[str, str]]
"""Where each constructor keyword came from: ``origin`` and what to say (``said``)."""


def resolve_kind(entry: Any, request: CheckRequest) -> str:
    """``function``, ``layer``, ``factory`` or ``builder``: the request's, or told from the
    entry (never ``builder``: a builder looks like any function, so the block says it)."""
    kind = request.kind
    if kind != "auto":
        return kind
    if inspect.isclass(entry):
        return "layer"
    if request.init:
        return "factory"
    with contextlib.suppress(TypeError, ValueError):
        params = inspect.signature(entry).parameters.values()
        required = [
            p
            for p in params
            if p.default is p.empty and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
        ]
        if not required:
            return "factory"
    return "function"


class Runner:
    """A zero-argument callable that runs the entry once on fixed arguments."""

    def __init__(self, target: Any, args: list[Any], kwargs: dict[str, Any], layer: Any) -> None:
        self.target = target
        self.args = args
        self.kwargs = kwargs
        self.layer = layer

    def __call__(self) -> Any:
        args = [_fresh(arg) for arg in self.args]
        kwargs = {key: _fresh(arg) for key, arg in self.kwargs.items()}
        return self.target(*args, **kwargs)


def _fresh(value: Any) -> Any:
    """A new copy of each list and tuple in ``value`` (the tensors shared): a state list the
    code writes into starts the same on every call, timed repeats and regimes included."""
    if isinstance(value, list):
        return [_fresh(item) for item in value]
    if isinstance(value, tuple):
        return tuple(_fresh(item) for item in value)
    return value


def bind(
    entry: Any,
    kind: str,
    call: Call,
    arrays: Mapping[str, Array],
    init: Mapping[str, Value],
    prefix: str = "",
    *,
    sources: Sources,
) -> Runner:
    """A runner of ``entry`` (constructed first unless a function, built into a model on
    symbolic inputs if a builder) on ``call``'s arguments."""
    args, kwargs = arguments(call, arrays, prefix)
    if kind == "function":
        return Runner(entry, args, kwargs, None)
    if kind == "builder":
        with phase("building its model on symbolic inputs"):
            block = builder.build(
                entry, args, kwargs, lambda bound: construct(bound, dict(init), sources)
            )
        return Runner(block, args, kwargs, block.model)
    with phase("construct"):
        layer = construct(entry, dict(init), sources)
    return Runner(layer, args, kwargs, layer)


def arguments(
    call: Call, arrays: Mapping[str, Array], prefix: str
) -> tuple[list[Any], dict[str, Any]]:
    """``call``'s positional and keyword arguments: an array under ``prefix`` if there is one
    (an input regime sends only its inputs, and shares the check's weights and mask), else
    the array itself, or the value."""
    args = [_value(arg, arrays, prefix) for arg in call.args]
    kwargs = {k: _value(arg, arrays, prefix) for k, arg in call.kwargs.items()}
    return args, kwargs


def _value(arg: Argument, arrays: Mapping[str, Array], prefix: str) -> Any:
    if arg.items is not None:  # a new list on every call: code may write into it
        items = [_value(item, arrays, prefix) for item in arg.items]
        return items if arg.sequence == "list" else tuple(items)
    if arg.array:
        name = prefix + arg.array
        return tf.constant(arrays[name] if name in arrays else arrays[arg.array])
    return arg.value


def construct(entry: Any, init: dict[str, Any], sources: Sources) -> Any:
    """``entry(**init)``, for a layer class or a factory. A keyword a preset supplies (its
    ``sources`` entry says so) is Keras' own, so an entry that does not take it is not given
    it (a factory has parameters of its own); a parameter the entry needs that nothing gives,
    and a TypeError out of the construction, are errors naming where each keyword came from:
    ``init=``, the preset, and the dim whose size it is."""
    taken = _keywords(entry)
    given = {
        key: value
        for key, value in init.items()
        if taken is None or key in taken or sources.get(key, {}).get("origin") != "preset"
    }
    left_out = [key for key in init if key not in given]
    told = _keywords_told(entry, given, left_out, sources)
    missing = _missing(entry, given)
    if missing:
        raise TypeError(
            f"{_entry_name(entry)}() needs {', '.join(missing)}, which no option gives: add "
            f'init="{missing[0]}=..." ({told})'
        )
    try:
        return entry(**given)
    except TypeError as exc:  # the same exception type, its frames kept: the snippet's line
        raise TypeError(f"{said(exc)} ({told})").with_traceback(exc.__traceback__) from None


def _keywords(entry: Any) -> frozenset[str] | None:
    """The keywords ``entry`` takes; None when it takes any (``**kwargs``) or cannot say."""
    try:
        parameters = inspect.signature(entry).parameters.values()
    except (TypeError, ValueError):
        return None
    if any(p.kind is p.VAR_KEYWORD for p in parameters):
        return None
    return frozenset(
        p.name for p in parameters if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)
    )


def _missing(entry: Any, given: dict[str, Any]) -> list[str]:
    """The parameters ``entry`` needs (no default) that ``given`` leaves out."""
    try:
        parameters = inspect.signature(entry).parameters.values()
    except (TypeError, ValueError):
        return []
    kinds = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
    return [
        p.name
        for p in parameters
        if p.kind in kinds and p.default is p.empty and p.name not in given
    ]


def _keywords_told(entry: Any, given: dict[str, Any], left_out: list[str], sources: Sources) -> str:
    """``keywords given: num_heads=4 (preset keras-mha; h from dims); ...``: each keyword
    with the option it came from, and the preset's that ``entry`` does not take."""

    def said(key: str) -> str:
        source = sources.get(key, {}).get("said")
        return f" ({source})" if source else ""

    parts = [f"{key}={value!r}{said(key)}" for key, value in given.items()]
    text = f"keywords given: {'; '.join(parts)}" if parts else "no keywords given (no init=)"
    if left_out:
        text += f"; not given, as {_entry_name(entry)}() does not take them: " + "; ".join(
            f"{key}{said(key)}" for key in left_out
        )
    return text


def _entry_name(entry: Any) -> str:
    return str(getattr(entry, "__qualname__", None) or type(entry).__name__)


def keywords_not_passed(layer: Any, call: Call) -> tuple[tuple[str, str], ...]:
    """``(("training", "Block.call()"),)`` when ``call`` passes ``training=`` to a Keras 3
    layer whose ``call()`` does not name it: Keras keeps it for its call context (the
    sub-layers see it) and hands it to no ``**kwargs`` (Keras 2 did), so the layer's own code
    never sees it."""
    method = getattr(layer, "call", None)
    keras = sys.modules.get("keras")
    major = str(getattr(keras, "__version__", "0")).split(".")[0]
    if "training" not in call.kwargs or method is None or not major.isdigit() or int(major) < 3:
        return ()
    if not isinstance(layer, keras.layers.Layer):  # type: ignore[union-attr]
        return ()
    try:
        parameters = inspect.signature(method).parameters
    except (TypeError, ValueError):
        return ()
    if "training" in parameters:
        return ()
    return (("training", f"{type(layer).__qualname__}.call()"),)
