"""A builder (``kind="builder"``): a function written in Keras' functional style, which
creates its layers every time it is called on tensors and returns what they make of them.

Called on real arrays it would create fresh layers, with fresh weights, on every call: no
weight map could reach them. So it is called once, on symbolic ``keras.Input`` tensors shaped
like the block's arrays (less their batch axis), those inside a list or tuple argument
included, and what it returns becomes the outputs of a ``keras.Model``; that model is then
checked as a layer is, its weights read by path on the model (``layers[1].query_dense.kernel``,
or ``MultiHeadAttention[0].query_dense.kernel``). Keras orders ``model.layers`` by the
model's graph, not by the order the code calls them, so the layers are also kept in the order
of their first call, which a class rank (``Dense[1]``) counts in.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

import tensorflow as tf

from formula_check.execution.layer_weights import CALL_ORDER
from formula_check.execution.snippet_failure import said

Slot = tuple[int | str, ...]
"""Where a tensor argument sits in the builder's call: its position or keyword, then its
index in each list or tuple it is inside (``(1, 0)``: the first item of the second argument)."""


class BuiltBlock:
    """The model a builder made, called as the builder was: each tensor it is given goes to
    the model's input made for that argument; any other argument was fixed when it was built
    (the same value every call of the check passes)."""

    def __init__(self, model: Any, slots: Sequence[Slot]) -> None:
        self.model = model
        self.slots = tuple(slots)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        tensors = [_at(args, kwargs, slot) for slot in self.slots]
        return self.model(tensors[0] if len(tensors) == 1 else tensors)


def build(
    entry: Any,
    args: Sequence[Any],
    kwargs: Mapping[str, Any],
    construct: Callable[[Any], Any],
) -> BuiltBlock:
    """``entry`` called once on symbolic inputs in place of the tensors among ``args`` and
    ``kwargs`` (the other values as they are), by ``construct`` (which adds the ``init=``
    keywords and says where each came from), and wrapped in a ``keras.Model``."""
    if not callable(entry) or isinstance(entry, type):
        raise TypeError(
            f'kind="builder": {_name(entry)} is {_what(entry)}, not a function that makes '
            'layers on the tensors it is given; a class is a layer (kind="layer")'
        )
    symbolic_args = [_symbolic(value, (index,)) for index, value in enumerate(args)]
    symbolic_kwargs = {key: _symbolic(value, (key,)) for key, value in kwargs.items()}
    slots = [slot for index, value in enumerate(args) for slot in _slots(value, (index,))]
    slots += [slot for key, value in kwargs.items() for slot in _slots(value, (key,))]
    inputs = [_at(symbolic_args, symbolic_kwargs, slot) for slot in slots]
    if not inputs:
        raise TypeError(
            f'kind="builder": the call gives {_name(entry)} no tensor to build on; a builder '
            "is called on the block's inputs (call= names them)"
        )
    bound = functools.partial(entry, *symbolic_args, **symbolic_kwargs)
    bound.__qualname__ = _name(entry)  # type: ignore[attr-defined]  # errors name the entry
    try:
        with _calls_recorded() as called:
            outputs = construct(bound)
    except TypeError:
        raise  # construct's own, which names the keywords given
    except Exception as exc:  # the builder's own error, said with what it was called on
        raise TypeError(
            f"{said(exc)} ({type(exc).__name__}, raised while {_name(entry)}() was called "
            f'once on symbolic Keras inputs {_shapes(slots, inputs)}: kind="builder" needs '
            "code that builds Keras layers on the tensors it is given)"
        ).with_traceback(exc.__traceback__) from None
    _check_outputs(entry, outputs)
    model = tf.keras.Model(inputs[0] if len(inputs) == 1 else inputs, outputs)
    layers = list(model.layers)
    in_model = {id(layer) for layer in layers}
    order = [layer for layer in called if id(layer) in in_model]  # sub-layers left out
    ordered = {id(layer) for layer in order}
    order += [layer for layer in layers if id(layer) not in ordered]  # its input layers
    # past Keras' __setattr__, which would track the tuple as more of the model's layers
    object.__setattr__(model, CALL_ORDER, tuple(order))
    return BuiltBlock(model, slots)


@contextlib.contextmanager
def _calls_recorded() -> Iterator[list[Any]]:
    """Every Keras layer called while it lasts, once each, in the order of its first call
    (a layer's own sub-layers after it). ``Layer.__call__`` is wrapped only meanwhile: the
    check process runs one check, but what it imports after the build sees Keras' own."""
    layer_class = tf.keras.layers.Layer
    original = layer_class.__call__
    called: list[Any] = []
    seen: set[int] = set()

    @functools.wraps(original)
    def recording(self: Any, *args: Any, **kwargs: Any) -> Any:
        if id(self) not in seen:
            seen.add(id(self))
            called.append(self)
        return original(self, *args, **kwargs)

    layer_class.__call__ = recording
    try:
        yield called
    finally:
        layer_class.__call__ = original


def _symbolic(value: Any, slot: Slot) -> Any:
    """A ``keras.Input`` like ``value`` less its batch axis, for a tensor with one, and so
    for each such tensor in a list or tuple; any other value as it is."""
    if isinstance(value, (list, tuple)):
        items = [_symbolic(item, (*slot, index)) for index, item in enumerate(value)]
        return items if isinstance(value, list) else tuple(items)
    if not (tf.is_tensor(value) and value.ndim):
        return value
    shape = tuple(value.shape[1:])
    return tf.keras.Input(shape=shape, dtype=value.dtype.name, name=_input_name(slot))


def _input_name(slot: Slot) -> str:
    """``arg0``, ``arg1_0``, ``memory_1``: unique among the model's inputs."""
    first, *indexes = slot
    return "_".join([f"arg{first}" if isinstance(first, int) else first, *map(str, indexes)])


def _slots(value: Any, slot: Slot) -> list[Slot]:
    """Where the tensors with a batch axis are in ``value``: ``slot`` itself, or within it."""
    if isinstance(value, (list, tuple)):
        return [inner for i, item in enumerate(value) for inner in _slots(item, (*slot, i))]
    return [slot] if tf.is_tensor(value) and value.ndim else []


def _at(args: Sequence[Any], kwargs: Mapping[str, Any], slot: Slot) -> Any:
    """The value at ``slot`` of a call with ``args`` and ``kwargs``."""
    first, *indexes = slot
    value = args[first] if isinstance(first, int) else kwargs[first]
    for index in indexes:
        value = value[index]
    return value


def _check_outputs(entry: Any, outputs: Any) -> None:
    """What a builder returns must be what its layers made: Keras tensors."""
    leaves = tf.nest.flatten(outputs)
    wrong = [leaf for leaf in leaves if not tf.keras.backend.is_keras_tensor(leaf)]
    if wrong or not leaves:
        got = _what(wrong[0]) if wrong else "nothing"
        raise TypeError(
            f'kind="builder": {_name(entry)}() returned {got}, not the Keras tensors its '
            "layers make of its inputs; a function that computes on arrays is "
            'kind="function", one that returns a layer kind="factory"'
        )


def _shapes(slots: Sequence[Slot], inputs: Sequence[Any]) -> str:
    """``(x: (None, 5, 12) float32; argument 2[0]: ...)``: each symbolic input, by the
    argument it stands for."""
    parts = [
        f"{_argument(slot)}: {tuple(symbolic.shape)} {symbolic.dtype}"
        for slot, symbolic in zip(slots, inputs, strict=True)
    ]
    return "(" + "; ".join(parts) + ")"


def _argument(slot: Slot) -> str:
    """``argument 2[0]``, or ``memory[1]``: a slot as its caller would write it."""
    first, *indexes = slot
    named = first if isinstance(first, str) else f"argument {first + 1}"
    return named + "".join(f"[{index}]" for index in indexes)


def _name(entry: Any) -> str:
    return str(getattr(entry, "__qualname__", None) or type(entry).__name__)


def _what(value: Any) -> str:
    """A value, in a few words, without trusting its ``str``."""
    kind = "class" if isinstance(value, type) else type(value).__name__
    return f"an {kind}" if kind[:1].lower() in "aeiou" else f"a {kind}"
