"""A stored message's arrays, read lazily (``wire.decode_stored``): each is the array
``wire.decode`` makes, and a figure's key (``wire.fingerprint``) is the same whether it is
taken from NumPy arrays or from stored bytes never decoded, so a cached build finds the
figures a cold one drew. A damaged message is refused when it is read, not when a figure
needs its arrays."""

from __future__ import annotations

import io
import json
import struct
import subprocess
import sys

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from formula_check import wire

DTYPES = ["bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64"]
DTYPES += ["float16", "float32", "float64"]

arrays = hnp.arrays(
    dtype=st.sampled_from(DTYPES).map(np.dtype),
    shape=hnp.array_shapes(min_dims=0, max_dims=3, min_side=0, max_side=4),
)


@settings(max_examples=150, deadline=None)
@given(st.dictionaries(st.sampled_from(["a", "b", "delta", "data/0"]), arrays, max_size=4))
def test_stored_arrays_are_the_decoded_ones_and_share_their_fingerprint(
    named: dict[str, np.ndarray],
) -> None:
    message = wire.encode({"x": 1}, named)
    header, eager = wire.decode(message)
    stored_header, stored = wire.decode_stored(message)
    assert stored_header == header == {"x": 1}
    assert isinstance(stored, wire.StoredArrays)
    assert list(stored) == list(eager) and len(stored) == len(eager)
    assert wire.fingerprint(stored) == wire.fingerprint(eager) == wire.fingerprint(named)
    for name, array in named.items():
        assert stored.data(name) == array.astype(array.dtype.newbyteorder("<")).tobytes()
        assert stored[name].dtype == array.dtype and stored[name].shape == array.shape
        np.testing.assert_array_equal(stored[name], array)


def test_a_fingerprint_follows_every_name_dtype_shape_and_bit() -> None:
    base = {"x": np.arange(6, dtype=np.float32).reshape(2, 3)}
    others = [
        {"y": base["x"]},
        {"x": base["x"].astype(np.float64)},
        {"x": base["x"].reshape(3, 2)},
        {"x": base["x"].reshape(6)},
        {"x": np.nextafter(base["x"], np.float32(9))},
        {**base, "z": np.zeros(0, np.float32)},
    ]
    seen = {wire.fingerprint(base)}
    for other in others:
        found = wire.fingerprint(other)
        assert found not in seen, other
        seen.add(found)
    stored = wire.decode_stored(wire.encode({}, base))[1]
    assert wire.fingerprint(stored) == wire.fingerprint(base)


def test_a_non_contiguous_or_big_endian_array_has_the_fingerprint_of_its_values() -> None:
    values = np.arange(12, dtype=np.float32).reshape(3, 4)
    expected = wire.fingerprint({"v": values.T.copy()})
    assert wire.fingerprint({"v": values.T}) == expected
    assert wire.fingerprint({"v": values.T.astype(">f4")}) == expected
    stored = wire.decode_stored(wire.encode({}, {"v": values.T}))[1]
    assert wire.fingerprint(stored) == expected


def _message(items: list[dict[str, object]], payload: bytes) -> bytes:
    head = json.dumps({"header": {}, "arrays": items}).encode()
    return struct.pack("<4sHQQ", wire.MAGIC, wire.VERSION, len(head), len(payload)) + head + payload


@pytest.mark.parametrize(
    ("item", "why"),
    [
        ({"name": "a", "dtype": "f4", "shape": [3], "offset": 0, "size": 8}, "is not"),
        ({"name": "a", "dtype": "f4", "shape": [2], "offset": 4, "size": 8}, "runs past"),
        ({"name": "a", "dtype": "f4", "shape": [-2], "offset": 0, "size": 8}, "is not"),
        ({"name": "a", "dtype": "O", "shape": [1], "offset": 0, "size": 8}, "dtype"),
        ({"name": "a", "dtype": "c8", "shape": [1], "offset": 0, "size": 8}, "forbidden"),
        ({"name": "a", "dtype": ["f4"], "shape": [2], "offset": 0, "size": 8}, "no dtype"),
        ({"name": "a", "dtype": {"f": 4}, "shape": [2], "offset": 0, "size": 8}, "no dtype"),
        (
            {
                "name": "a",
                "dtype": "u1",
                "shape": [1] * wire.MAX_DIMENSIONS + [8],
                "offset": 0,
                "size": 8,
            },
            "cannot",
        ),
        (
            {"name": "a", "dtype": "f4", "shape": [0, 2**62, 2**62], "offset": 0, "size": 0},
            "cannot",
        ),
        ({"name": "a", "dtype": "f4", "shape": [0, 10**30], "offset": 0, "size": 0}, "cannot"),
        ({"name": "a", "dtype": "f4", "shape": [2], "size": 8}, "not described"),
        ({"name": "a", "dtype": "f4", "shape": [2.0], "offset": 0, "size": 8}, "not described"),
        ({"name": "a", "dtype": "f4", "shape": 2, "offset": 0, "size": 8}, "not described"),
        ({"name": 3, "dtype": "f4", "shape": [2], "offset": 0, "size": 8}, "not described"),
        ({"name": "a", "dtype": "f4", "shape": [2], "offset": "0", "size": 8}, "not described"),
    ],
)
def test_a_damaged_stored_message_is_refused_when_read(item: dict[str, object], why: str) -> None:
    """As a ProtocolError (which the caches and the worker's reader catch) from each reader,
    and when the message is read: never when a figure first asks for the array."""
    message = _message([item], bytes(8))
    for read in (wire.decode_stored, wire.decode, lambda m: wire.read_message(io.BytesIO(m))):
        with pytest.raises(wire.ProtocolError, match=why):
            read(message)


def _deepest() -> int:
    """The most dimensions this NumPy makes (64 from NumPy 2 on, 32 before)."""
    for n in (64, 32):
        try:
            np.empty((1,) * n)
        except ValueError:
            continue
        return n
    raise AssertionError("NumPy makes fewer than 32 dimensions")


def test_the_deepest_array_numpy_makes_is_read_back_by_every_reader() -> None:
    """A result array NumPy made is never refused by the wire it travels on (a 33-dimension one
    once was, by a limit of 32 while NumPy 2 makes 64)."""
    x = np.arange(2, dtype=np.float32).reshape((1,) * (_deepest() - 1) + (2,))
    message = wire.encode({}, {"x": x})
    np.testing.assert_array_equal(wire.decode(message)[1]["x"], x)
    np.testing.assert_array_equal(wire.read_message(io.BytesIO(message))[1]["x"], x)
    stored = wire.decode_stored(message)[1]
    np.testing.assert_array_equal(stored["x"], x)
    assert wire.fingerprint(stored) == wire.fingerprint({"x": x})


def test_a_dtype_encode_does_not_write_is_decoded_at_once() -> None:
    """``f16`` (a long double) is a NumPy dtype, but not one the lazy path names: the message
    is decoded as :func:`wire.decode` decodes it."""
    if np.dtype("f16").kind != "f":  # pragma: no cover - every platform CI runs on has it
        pytest.skip("no 16-byte float here")
    item = {"name": "a", "dtype": "f16", "shape": [1], "offset": 0, "size": 16}
    _, found = wire.decode_stored(_message([item], bytes(16)))
    assert not isinstance(found, wire.StoredArrays)
    assert found["a"].dtype == np.dtype("f16")


def test_reading_a_stored_message_and_its_fingerprint_imports_no_numpy() -> None:
    message = wire.encode({}, {"w": np.ones((2, 3), np.float32), "keep": np.ones(4, bool)})
    code = (
        "import sys; from formula_check import wire; "
        f"_, a = wire.decode_stored({message!r}); wire.fingerprint(a); a.data('w'); "
        "sys.exit('numpy' in sys.modules)"
    )
    assert subprocess.run([sys.executable, "-c", code], check=False).returncode == 0
