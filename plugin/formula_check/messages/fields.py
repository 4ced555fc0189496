"""Reading a message's JSON header: each field once, its type checked, its default filled.

Shared by the codecs of :mod:`.requests` and :mod:`.replies`; a field of the wrong type is a
:class:`~..wire.ProtocolError` naming the message and the field.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from formula_check.model import Scalar, frozen_map
from formula_check.wire import ProtocolError

Item = Scalar | None
Value = Item | list[Item] | tuple[Item, ...]
"""A value a message carries as it is (a size, a flag, a name, None), or a list or tuple of
those (a constructor's ``axis=[-1]``, ``kernel_size=(3, 3)``): a tuple travels as
``{"tuple": [...]}``, so that it arrives a tuple."""


def encode_value(value: Value) -> Any:
    """``value`` as JSON (see :data:`Value`)."""
    return {"tuple": list(value)} if isinstance(value, tuple) else value


def encode_values(values: Mapping[str, Value]) -> dict[str, Any]:
    """Values by name, as JSON."""
    return {key: encode_value(value) for key, value in values.items()}


def _item(value: Any, where: str) -> Item:
    if value is not None and not isinstance(value, (str, int, float)):
        raise ProtocolError(f"{where} is {type(value).__name__}")
    return value


_MISSING: Any = object()


class Fields:
    """The fields of one JSON object of a header (``what`` names it in errors).

    A field that is absent or null reads as its default."""

    def __init__(self, data: Any, what: str) -> None:
        if not isinstance(data, Mapping):
            raise ProtocolError(f"{what} is not an object")
        self.data: Mapping[str, Any] = data
        self.what = what

    def __contains__(self, key: str) -> bool:
        return key in self.data

    def optional(self, key: str) -> Any:
        """The raw value, None if absent."""
        return self.data.get(key)

    def required(self, key: str) -> Any:
        """The raw value; an error if absent."""
        if self.optional(key) is None:
            raise ProtocolError(f"{self.what} has no {key!r}")
        return self.data[key]

    def _typed(self, key: str, kinds: type | tuple[type, ...], default: Any) -> Any:
        value = self.optional(key)
        if value is None:
            if default is _MISSING:
                raise ProtocolError(f"{self.what} has no {key!r}")
            return default
        if not isinstance(value, kinds) or (isinstance(value, bool) and bool not in _all(kinds)):
            raise ProtocolError(f"{self.what}: {key!r} is {type(value).__name__}")
        return value

    def text(self, key: str, default: str = "") -> str:
        """A string."""
        return str(self._typed(key, str, default))

    def flag(self, key: str, default: bool = _MISSING) -> bool:
        """A boolean."""
        return bool(self._typed(key, bool, default))

    def integer(self, key: str, default: int = _MISSING) -> int:
        """A whole number."""
        return int(self._typed(key, int, default))

    def number(self, key: str, default: float = _MISSING) -> float:
        """A number, as a float."""
        return float(self._typed(key, (int, float), default))

    def optional_number(self, key: str) -> float | None:
        """A number, or None if absent."""
        return None if self.optional(key) is None else self.number(key)

    def value(self, key: str) -> Value:
        """A scalar (string, number, boolean) or None, or a list or tuple of them."""
        value = self.optional(key)
        where = f"{self.what}: {key!r}"
        if isinstance(value, list):
            return [_item(item, f"{where} item") for item in value]
        if (
            isinstance(value, Mapping)
            and set(value) == {"tuple"}
            and isinstance(value["tuple"], list)
        ):
            return tuple(_item(item, f"{where} item") for item in value["tuple"])
        return _item(value, where)

    def mapping(self, key: str) -> Mapping[str, Any]:
        """A JSON object (empty if absent)."""
        return Fields(self._typed(key, Mapping, {}), f"{self.what}'s {key}").data

    def items(self, key: str) -> Sequence[Any]:
        """A JSON array (empty if absent)."""
        return list(self._typed(key, list, []))

    def texts(self, key: str) -> tuple[str, ...]:
        """An array of strings."""
        items = self.items(key)
        if not all(isinstance(item, str) for item in items):
            raise ProtocolError(f"{self.what}: {key!r} holds other things than strings")
        return tuple(items)

    def values(self, key: str) -> Mapping[str, Value]:
        """An object of scalars, by name."""
        inner = Fields(self.mapping(key), f"{self.what}'s {key}")
        return frozen_map({str(name): inner.value(name) for name in inner.data})

    def texts_by_name(self) -> Mapping[str, str]:
        """The whole object, each of its values a string."""
        return frozen_map({str(name): self.text(name) for name in self.data})


def _all(kinds: type | tuple[type, ...]) -> tuple[type, ...]:
    return kinds if isinstance(kinds, tuple) else (kinds,)
