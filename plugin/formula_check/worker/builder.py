"""A builder (``kind="builder"``): a function written in Keras' functional style, which
creates its layers every time it is called on tensors and returns what they make of them.

Called on real arrays it would create fresh layers, with fresh weights, on every call: no
weight map could reach them. So it is called once, on symbolic ``keras.Input`` tensors shaped
like the block's arrays (less their batch axis), and what it returns becomes the outputs of a
``keras.Model``; that model is then checked as a layer is, its weights read by path on the
model (``layers[1].query_dense.kernel``, or ``MultiHeadAttention[0].query_dense.kernel``).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import tensorflow as tf

from .snippet_failure import said

Slot = int | str
"""Where a tensor argument sits in the builder's call: its position, or its keyword."""


class BuiltBlock:
    """The model a builder made, called as the builder was: each tensor it is given goes to
    the model's input made for that argument; any other argument was fixed when it was built
    (the same value every call of the check passes)."""

    def __init__(self, model: Any, slots: Sequence[Slot]) -> None:
        self.model = model
        self.slots = tuple(slots)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        tensors = [args[slot] if isinstance(slot, int) else kwargs[slot] for slot in self.slots]
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
    symbolic_args = [_symbolic(value, f"arg{index}") for index, value in enumerate(args)]
    symbolic_kwargs = {key: _symbolic(value, key) for key, value in kwargs.items()}
    slots: list[Slot] = [i for i, value in enumerate(args) if tf.is_tensor(value) and value.ndim]
    slots += [key for key, value in kwargs.items() if tf.is_tensor(value) and value.ndim]
    inputs = [symbolic_args[s] if isinstance(s, int) else symbolic_kwargs[s] for s in slots]
    if not inputs:
        raise TypeError(
            f'kind="builder": the call gives {_name(entry)} no tensor to build on; a builder '
            "is called on the block's inputs (call= names them)"
        )
    bound = functools.partial(entry, *symbolic_args, **symbolic_kwargs)
    bound.__qualname__ = _name(entry)  # type: ignore[attr-defined]  # errors name the entry
    try:
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
    return BuiltBlock(model, slots)


def _symbolic(value: Any, name: str) -> Any:
    """A ``keras.Input`` like ``value`` less its batch axis, for a tensor with one; any
    other value as it is."""
    if not (tf.is_tensor(value) and value.ndim):
        return value
    return tf.keras.Input(shape=tuple(value.shape[1:]), dtype=value.dtype.name, name=name)


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
    """``(x: (None, 5, 12) float32)``: each symbolic input, by the argument it stands for."""
    parts = [
        f"{slot if isinstance(slot, str) else f'argument {slot + 1}'}: "
        f"{tuple(symbolic.shape)} {symbolic.dtype}"
        for slot, symbolic in zip(slots, inputs, strict=True)
    ]
    return "(" + "; ".join(parts) + ")"


def _name(entry: Any) -> str:
    return str(getattr(entry, "__qualname__", None) or type(entry).__name__)


def _what(value: Any) -> str:
    """A value, in a few words, without trusting its ``str``."""
    kind = "class" if isinstance(value, type) else type(value).__name__
    return f"an {kind}" if kind[:1].lower() in "aeiou" else f"a {kind}"
