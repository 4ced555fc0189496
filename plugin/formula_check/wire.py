"""The framing of every message between the build and its check processes, also used for
the files of the result and figure caches.

A message is ``MAGIC, version, header length, payload length, header (JSON), array bytes``.
Arrays travel as raw little-endian buffers described in the header (dtype restricted to
numbers and bools), so nothing made by user code is ever unpickled by the parent. What the
header of each message holds is typed in :mod:`.`; this module only frames.

:data:`VERSION` names the layout of the headers as well as the framing: it changes whenever
a message gains, loses or renames a field. A message of another version is refused with a
:class:`ProtocolError` that names both versions, never half understood (a worker left over
from an older checker, a cache file written by one).
"""

from __future__ import annotations

import hashlib
import json
import math
import struct
import sys
from collections.abc import Iterator, Mapping
from typing import IO, Any

from formula_check.lazy import numpy as np  # imported on first use
from formula_check.model import Array

MAGIC = b"FCK1"
VERSION = 8
"""1: headers read as free-form dicts. 2: typed messages (:mod:`.`). 3: a check
request's ``attribute_outputs`` and ``preset_weights``, a reply's ``preset_root`` and
``created_variables``, lists and tuples among ``init`` values. 4: call arguments that are
lists or tuples of arguments (``items``); a check request's and a reply's ``artifact`` (an
exported SavedModel, ``.keras`` or ``.tflite`` file checked instead of code). 5: a reply's
``outside_files``, ``listed_folders`` and ``unseen_reads`` (what the cache keys it on); its
``unmoved_weights`` and ``first_call`` (a layer's first call, judged too). 6: a reply's
``graph_outputs`` and ``graph_error`` (what the code returned as a ``tf.function`` graph).
7: a reply's ``other_keys`` (calls that returned a dict with other keys than the main one).
8: a reply's ``graph_regimes_failed`` (the graph judged on every regime); a request's
``unreadable`` (the folders a check may not read). The version is in
every cache key: a result judged by the rules before is not served."""
_PREFIX = struct.Struct("<4sHQQ")  # magic, version, header bytes, payload bytes
_ALLOWED_KINDS = frozenset("biuf")  # bool, signed, unsigned, float
MAX_DIMENSIONS = 64
"""The most dimensions an array of a message may have: NumPy 2 makes no more (NumPy 1, 32).
A message is read by the NumPy that wrote it: the worker is of the same environment, and a
cache entry's key holds NumPy's version (:func:`formula_check.store.cache.numerics_versions`)."""
PREFIX_SIZE = _PREFIX.size
"""Bytes of a message before its header: enough for :func:`message_length`."""


class ProtocolError(Exception):
    """A message is truncated, from another version, describes a forbidden array, or has a
    header that does not fit its type."""


MALFORMED = (
    ProtocolError,
    KeyError,
    TypeError,
    ValueError,
    AttributeError,
    OverflowError,
    RecursionError,  # a header nested deeper than the JSON reader goes
)
"""What reading a message whose header does not hold the fields or types its reader wrote
raises. The caches take an entry that raises one for no entry: sealed files are only damaged
so by someone who writes the cache, who could write any verdict
(:mod:`formula_check.store.sealed_files`), and this keeps such an entry from stopping a build."""


ALIGNMENT = 64
"""Where the arrays of a message start: the payload at a multiple of this from the message's
first byte (the header padded with spaces, which JSON ignores), each array at a multiple of
this within it. A message read into a buffer of its own gives arrays aligned as NumPy and
TensorFlow's kernels want them, read in place rather than copied out (:func:`decode`)."""

Buffer = bytes | bytearray | memoryview
"""A part of an encoded message, to be written as it is (:func:`encode_parts`)."""


def encode(header: Mapping[str, Any], arrays: Mapping[str, Array] | None = None) -> bytes:
    """Serialise ``header`` (JSON-able) and named numeric ``arrays`` into one message."""
    return b"".join(encode_parts(header, arrays))


def encode_parts(
    header: Mapping[str, Any], arrays: Mapping[str, Array] | None = None
) -> list[Buffer]:
    """:func:`encode`'s message as the parts it is made of, in order: the prefix and header,
    then each array's own bytes (a view of it, not a copy) and the padding between them.
    Written one after the other, they are the message; nothing is copied to make it."""
    described: list[dict[str, Any]] = []
    parts: list[Buffer] = []
    offset = 0
    for name, value in (arrays or {}).items():
        array = np.asarray(value, order="C")  # ascontiguousarray would make 0-d arrays 1-d
        if array.dtype.kind not in _ALLOWED_KINDS:
            raise ProtocolError(f"array {name!r} has unsupported dtype {array.dtype}")
        little = array.astype(array.dtype.newbyteorder("<"), copy=False)
        data = little.reshape(-1).view(np.uint8).data
        if offset % ALIGNMENT:
            pad = -offset % ALIGNMENT
            parts.append(bytes(pad))
            offset += pad
        described.append(
            {
                "name": name,
                "dtype": array.dtype.str.lstrip("<>|="),
                "shape": list(array.shape),
                "offset": offset,
                "size": len(data),
            }
        )
        parts.append(data)
        offset += len(data)
    head = json.dumps({"header": header, "arrays": described}, separators=(",", ":")).encode()
    head += b" " * (-(_PREFIX.size + len(head)) % ALIGNMENT)
    return [_PREFIX.pack(MAGIC, VERSION, len(head), offset) + head, *parts]


def decode(message: Buffer) -> tuple[dict[str, Any], dict[str, Array]]:
    """Parse a whole message produced by :func:`encode`. The arrays of a message in a
    writable buffer (a ``bytearray``, as :func:`read_message` reads one into) are views of
    it, not copies: each its own bytes of it, writable, and keeping the buffer alive. Those
    of a message in ``bytes`` are copies, writable as any array the caller owns."""
    header, items, payload = _split(message)
    return header, _arrays(items, payload, copy=payload.readonly)


def decode_stored(message: Buffer) -> tuple[dict[str, Any], Mapping[str, Array]]:
    """:func:`decode` for a stored message (a cache file): the same arrays, each made when it
    is first asked for (:class:`StoredArrays`). A build whose results all come from the cache
    reads their arrays only to draw a figure no earlier build drew."""
    header, items, payload = _split(message)
    if not all(_plain_code(item) for item in items):  # a dtype this module does not name
        return header, _arrays(items, payload, copy=payload.readonly)
    return header, StoredArrays(items, payload)


def _split(message: Buffer) -> tuple[dict[str, Any], list[dict[str, Any]], memoryview]:
    """A whole message's header, what it says of each array, and the bytes they lie in."""
    view = memoryview(message).cast("B")
    head_len, payload_len = _check_prefix(bytes(view[: _PREFIX.size]))
    expected = _PREFIX.size + head_len + payload_len
    if len(view) != expected:
        raise ProtocolError(f"message is {len(view)} bytes, expected {expected}")
    header, items = _parse(bytes(view[_PREFIX.size : _PREFIX.size + head_len]))
    payload = view[_PREFIX.size + head_len :]
    for item in items:  # every array fits where the header says it lies
        _shape(item, _span(item, len(payload))[1])
    return header, items, payload


_CODES = frozenset(f"{kind}{size}" for kind in "iu" for size in (1, 2, 4, 8)) | {
    "b1",
    "f2",
    "f4",
    "f8",
}
"""The dtypes :func:`encode` writes for NumPy's bool, integer and float arrays, by code."""


def _described(item: Mapping[str, Any]) -> bool:
    """Whether ``item`` names its array and gives its offset, size and shape in integers:
    read further, nothing of it raises anything but a :class:`ProtocolError`."""
    numbers = [item.get("offset"), item.get("size")]
    shape = item.get("shape")
    return (
        isinstance(item.get("name"), str)
        and isinstance(shape, list)
        and all(isinstance(n, int) for n in [*numbers, *shape])
    )


def _plain_code(item: Mapping[str, Any]) -> bool:
    code = item.get("dtype")
    return isinstance(code, str) and code in _CODES


class StoredArrays(Mapping[str, Array]):
    """The arrays of a stored message by name, each made a NumPy array (as :func:`decode`
    makes it) the first time it is asked for. :func:`fingerprint` needs none of them made."""

    def __init__(self, items: list[dict[str, Any]], payload: memoryview) -> None:
        self._items = {item["name"]: item for item in items}
        self._payload = payload
        self._made: dict[str, Array] = {}

    def __getitem__(self, name: str) -> Array:
        made = self._made.get(name)
        if made is None:
            item = self._items[name]
            made = _arrays([item], self._payload, copy=self._payload.readonly)[name]
            self._made[name] = made
        return made

    def __iter__(self) -> Iterator[str]:
        return iter(self._items)

    def __len__(self) -> int:
        return len(self._items)

    def data(self, name: str) -> bytes:
        """The stored bytes of the array ``name`` (little-endian), without making it."""
        return bytes(self.fingerprint(name)[2])

    def fingerprint(self, name: str) -> tuple[str, tuple[int, ...], memoryview]:
        """What :func:`fingerprint` reads of the array ``name``, from its stored bytes."""
        item = self._items[name]
        start, size = _span(item, len(self._payload))
        shape = tuple(int(n) for n in item["shape"])
        return _order_code(item["dtype"]), shape, self._payload[start : start + size]


def _order_code(code: str) -> str:
    """NumPy's ``dtype.str`` of a little-endian array of dtype ``code`` (``<f4``, ``|b1``)."""
    return ("|" if code[1:] == "1" else "<") + code  # one byte has no byte order


def fingerprint(arrays: Mapping[str, Array]) -> bytes:
    """A digest of named arrays by content: each one's name, dtype, shape and little-endian
    bytes. The same whether the arrays are NumPy's or stored ones not yet decoded."""
    digest = hashlib.sha256()
    for name in sorted(arrays):
        if isinstance(arrays, StoredArrays):
            order, shape, data = arrays.fingerprint(name)
        else:
            array = np.asarray(arrays[name], order="C")
            little = array.astype(array.dtype.newbyteorder("<"), copy=False)
            order, shape = little.dtype.str, tuple(little.shape)
            data = little.reshape(-1).view(np.uint8).data
        digest.update(f"{name}:{order}:{shape}".encode())
        digest.update(data)  # its bytes, hashed where they lie (no copy)
    return digest.digest()


def write_message(
    stream: IO[bytes], header: Mapping[str, Any], arrays: Mapping[str, Array] | None = None
) -> None:
    """Write one message and flush (its arrays written from where they are, not joined into
    a copy first)."""
    for part in encode_parts(header, arrays):
        stream.write(part)
    stream.flush()


def read_message(stream: IO[bytes]) -> tuple[dict[str, Any], dict[str, Array]]:
    """Read exactly one message; :class:`EOFError` if the stream closed before one began.
    Each array is read straight into an array of its own (no buffer of the whole message
    to copy them out of, nor to keep alive while one of them is)."""
    prefix = _read_exact(stream, _PREFIX.size, allow_eof=True)
    head_len, payload_len = _check_prefix(prefix)
    header, items = _parse(_read_exact(stream, head_len))
    spans = [_span(item, payload_len) for item in items]
    ends = [0] + [start + size for start, size in spans]
    if any(start < end for (start, _), end in zip(spans, ends, strict=False)):
        # Not laid out one after the other, as encode lays them out: read whole, copied out
        payload = bytearray(payload_len)
        _read_into(stream, memoryview(payload))
        return header, _arrays(items, memoryview(payload), copy=True)
    arrays: dict[str, Array] = {}
    at = 0
    for item, (start, size) in zip(items, spans, strict=True):
        _read_exact(stream, start - at)  # the padding before it
        array = np.empty(_shape(item, size), _dtype(item))
        if size:
            _read_into(stream, array.reshape(-1).view(np.uint8).data)
        arrays[item["name"]] = array.astype(array.dtype.newbyteorder("="), copy=False)
        at = start + size
    _read_exact(stream, payload_len - at)
    return header, arrays


def unfilled(size: int) -> memoryview:
    """A writable buffer of ``size`` bytes, not zeroed first (the read into it fills it, and
    touches each page once)."""
    return np.empty(size, np.uint8).data


def message_length(prefix: bytes) -> int:
    """The whole length of the message that begins with ``prefix`` (its first
    :data:`PREFIX_SIZE` bytes)."""
    head_len, payload_len = _check_prefix(prefix)
    return _PREFIX.size + head_len + payload_len


def _check_prefix(prefix: bytes) -> tuple[int, int]:
    if len(prefix) != _PREFIX.size:
        raise ProtocolError("truncated message prefix")
    magic, version, head_len, payload_len = _PREFIX.unpack(prefix)
    if magic != MAGIC:
        raise ProtocolError("not a formula-check message")
    if version != VERSION:
        raise ProtocolError(f"protocol version {version}, this checker speaks {VERSION}")
    return int(head_len), int(payload_len)


def _read_exact(stream: IO[bytes], size: int, *, allow_eof: bool = False) -> bytes:
    chunks: list[bytes] = []
    remaining = size
    while remaining:
        chunk = stream.read(remaining)
        if not chunk:
            if allow_eof and remaining == size:
                raise EOFError("stream closed")
            raise ProtocolError(f"stream closed {remaining} bytes before the end of a message")
        chunks.append(chunk)
        remaining -= len(chunk)
    return b"".join(chunks)


def _read_into(stream: IO[bytes], view: memoryview) -> None:
    """Fill ``view`` from ``stream`` (read straight into it where the stream can)."""
    readinto = getattr(stream, "readinto", None)
    got = 0
    while got < len(view):
        if readinto is not None:
            count = readinto(view[got:])
        else:
            chunk = stream.read(len(view) - got)
            count = len(chunk)
            view[got : got + count] = chunk
        if not count:
            missing = len(view) - got
            raise ProtocolError(f"stream closed {missing} bytes before the end of a message")
        got += count


def _parse(head: bytes) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """A message's header, and what it says of each array."""
    try:
        meta = json.loads(head)
    except ValueError as exc:
        raise ProtocolError(f"unreadable message header: {exc}") from exc
    header = meta.get("header") if isinstance(meta, dict) else None
    if not isinstance(header, dict):
        raise ProtocolError("message header is not an object")
    items = meta.get("arrays", [])
    if not isinstance(items, list) or not all(isinstance(item, dict) for item in items):
        raise ProtocolError("message arrays are not a list of objects")
    for item in items:
        if not _described(item):
            raise ProtocolError(f"array {item.get('name')!r} is not described as encode does")
        if _plain_code(item):  # one encode writes, named without asking NumPy
            continue
        dtype = _dtype(item)
        if dtype.kind not in _ALLOWED_KINDS:
            raise ProtocolError(f"array {item.get('name')!r} has forbidden dtype {dtype}")
    return header, items


def _dtype(item: Mapping[str, Any]) -> np.dtype[Any]:
    try:
        dtype: np.dtype[Any] = np.dtype(item["dtype"]).newbyteorder("<")
    except (KeyError, TypeError) as exc:
        raise ProtocolError(f"array {item.get('name')!r} has no dtype: {exc}") from exc
    return dtype


def _span(item: Mapping[str, Any], payload_len: int) -> tuple[int, int]:
    """Where the array ``item`` describes lies in a payload of ``payload_len`` bytes."""
    start, size = int(item["offset"]), int(item["size"])
    if start < 0 or size < 0 or start + size > payload_len:
        raise ProtocolError(f"array {item['name']!r} runs past the end of the message")
    return start, size


def _shape(item: Mapping[str, Any], size: int) -> tuple[int, ...]:
    """The shape ``item`` says its array has, if that fills ``size`` bytes."""
    shape = tuple(int(n) for n in item["shape"])
    itemsize = int(item["dtype"][1:]) if _plain_code(item) else _dtype(item).itemsize
    if any(n < 0 for n in shape) or math.prod(shape) * itemsize != size:
        raise ProtocolError(f"array {item['name']!r} of {size} bytes is not {shape}")
    # What NumPy could not make is refused here, not when the array is first asked for
    # (:class:`StoredArrays`): at most MAX_DIMENSIONS, and a size that fits
    # even with the zero-length dimensions left out.
    if len(shape) > MAX_DIMENSIONS or math.prod(max(n, 1) for n in shape) * itemsize > sys.maxsize:
        raise ProtocolError(f"array {item['name']!r} has a shape NumPy cannot make: {shape}")
    return shape


def _arrays(items: list[dict[str, Any]], payload: memoryview, *, copy: bool) -> dict[str, Array]:
    """The arrays ``items`` describe in ``payload``: views of it, or (``copy``) copies."""
    arrays: dict[str, Array] = {}
    for item in items:
        start, size = _span(item, len(payload))
        dtype = _dtype(item)
        flat = np.frombuffer(payload[start : start + size], dtype=dtype)
        array = flat.reshape(_shape(item, size))
        arrays[item["name"]] = array.astype(dtype.newbyteorder("="), copy=copy)
    return arrays
