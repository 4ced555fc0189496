"""What a check's process, the warm worker and the zygote do to copy and touch less memory
must change nothing a check or the build can see: messages arrive whole and the same, their
arrays writable and each its own; what a check imported is found as before; and no process a
worker forks inherits the buffer it reads messages into."""

from __future__ import annotations

import faulthandler
import io
import json
import os
import signal
import struct
import subprocess
import sys
import types
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from formula_check import wire
from formula_check.execution import snippet_module
from formula_check.messages import CheckReply
from formula_check.runtime import isolation
from formula_check.runtime.read_buffer import Unshared
from test_worker_cpu import Trickle

ARRAYS = {
    "flag": np.array([True, False, True]),
    "x": np.arange(12, dtype=np.float32).reshape(3, 4),
    "n": np.array(7, dtype=np.int64),
    "empty": np.zeros((0, 3), dtype=np.float64),
    "w": np.linspace(-1, 1, 10, dtype=np.float64),
    "strided": np.arange(20, dtype=np.int32)[::3],
    "big_endian": np.arange(5, dtype=">f8"),
}


def same(got: dict[str, Any], sent: dict[str, Any]) -> None:
    assert list(got) == list(sent)
    for name, array in sent.items():
        assert got[name].shape == np.asarray(array).shape, name
        assert got[name].dtype.kind == np.asarray(array).dtype.kind, name
        np.testing.assert_array_equal(got[name], array, err_msg=name)


def test_a_message_written_in_parts_is_the_message() -> None:
    header = {"kind": "layer", "note": "parts"}
    parts = wire.encode_parts(header, ARRAYS)
    whole = b"".join(bytes(memoryview(part).cast("B")) for part in parts)
    assert whole == wire.encode(header, ARRAYS)
    back_header, back = wire.decode(whole)
    assert back_header == header
    same(back, ARRAYS)


def test_every_array_starts_aligned_in_the_message() -> None:
    message = wire.encode({}, ARRAYS)
    head_len = int.from_bytes(message[6:14], "little")
    payload_at = wire.PREFIX_SIZE + head_len
    assert payload_at % wire.ALIGNMENT == 0
    decoded = bytearray(message)
    _, arrays = wire.decode(decoded)
    base = np.frombuffer(decoded, np.uint8).ctypes.data
    for name, array in arrays.items():
        if array.size:
            offset = array.ctypes.data - base
            assert offset >= payload_at, name
            assert (offset - payload_at) % wire.ALIGNMENT == 0, name


def test_arrays_of_a_writable_message_are_its_own_bytes_each_writable() -> None:
    message = bytearray(wire.encode({}, ARRAYS))
    _, arrays = wire.decode(message)
    view = np.frombuffer(message, np.uint8)
    for name in ("x", "w", "flag", "n"):
        assert np.shares_memory(arrays[name], view), name
        assert arrays[name].flags.writeable, name
    arrays["x"][0, 0] = 99.0  # its own bytes: no other array changes
    same(
        {k: v for k, v in arrays.items() if k != "x"}, {k: v for k, v in ARRAYS.items() if k != "x"}
    )
    assert arrays["x"][0, 0] == 99.0
    assert arrays["big_endian"].dtype == np.dtype("=f8")  # swapped: a copy, native order


def test_arrays_of_a_read_only_message_are_copies_the_caller_owns() -> None:
    message = wire.encode({}, ARRAYS)
    _, arrays = wire.decode(message)
    for name, array in arrays.items():
        assert array.flags.writeable, name
        assert array.base is None or not isinstance(array.base, bytes), name
    arrays["w"] += 1.0
    np.testing.assert_array_equal(arrays["w"], ARRAYS["w"] + 1.0)


class ReadOnly:
    """A stream with ``read`` alone."""

    def __init__(self, data: bytes) -> None:
        self.stream = io.BytesIO(data)

    def read(self, size: int = -1) -> bytes:
        return self.stream.read(min(size, 5) if size > 0 else size)


@pytest.mark.parametrize("kind", ["pieces", "read-only", "buffered"])
def test_a_message_read_from_a_stream_arrives_whole_arrays_writable(kind: str) -> None:
    data = wire.encode({"n": 1}, ARRAYS) + wire.encode({"n": 2})
    stream: Any = {
        "pieces": Trickle(data, 3),
        "read-only": ReadOnly(data),
        "buffered": io.BufferedReader(Trickle(data, 1 << 20)),
    }[kind]
    header, arrays = wire.read_message(stream)
    assert header == {"n": 1}
    same(arrays, ARRAYS)
    assert all(array.flags.writeable for array in arrays.values())
    # each read into an array of its own: keeping one keeps no other, nor the message
    listed = list(arrays.values())
    for index, array in enumerate(listed):
        assert not any(np.shares_memory(array, other) for other in listed[index + 1 :])
        assert array.base is None or array.base.nbytes == array.nbytes
    assert wire.read_message(stream) == ({"n": 2}, {})
    with pytest.raises(EOFError):
        wire.read_message(stream)


def forged(item: dict[str, Any], payload: bytes) -> bytearray:
    """A message whose header describes ``item`` over ``payload``, as no encoder writes it."""
    head = json.dumps({"header": {}, "arrays": [item]}).encode()
    prefix = struct.pack("<4sHQQ", wire.MAGIC, wire.VERSION, len(head), len(payload))
    return bytearray(prefix + head + payload)


def test_a_message_cut_short_or_lying_about_its_arrays_is_refused() -> None:
    whole = wire.encode({"n": 1}, {"x": np.ones(40)})
    with pytest.raises(wire.ProtocolError, match="before the end of a message"):
        wire.read_message(io.BytesIO(whole[:-3]))
    with pytest.raises(wire.ProtocolError, match="before the end of a message"):
        wire.read_message(ReadOnly(whole[:-3]))
    honest = {"name": "x", "dtype": "f8", "shape": [4], "offset": 0, "size": 32}
    assert wire.decode(forged(honest, bytes(32)))[1]["x"].tolist() == [0.0] * 4
    for lie in ({"offset": -8}, {"size": -8}, {"size": 40}, {"offset": 8}):
        with pytest.raises(wire.ProtocolError, match="runs past the end"):
            wire.decode(forged({**honest, **lie}, bytes(32)))
    with pytest.raises(wire.ProtocolError, match="forbidden dtype"):
        wire.decode(forged({**honest, "dtype": "O"}, bytes(32)))


def laid_out(items: list[dict[str, Any]], payload: bytes) -> bytes:
    head = json.dumps({"header": {"n": 5}, "arrays": items}).encode()
    return struct.pack("<4sHQQ", wire.MAGIC, wire.VERSION, len(head), len(payload)) + head + payload


def test_arrays_laid_out_in_any_order_are_read_the_same_from_a_stream() -> None:
    """Arrays are encoded one after the other; a message that lays them out otherwise (the second
    first, one read twice) is read whole and its arrays copied out, the same as decoded."""
    a, b = np.arange(4, dtype="<f4"), np.arange(3, dtype="<i8") - 9
    items = [
        {"name": "a", "dtype": "f4", "shape": [4], "offset": 24, "size": 16},
        {"name": "b", "dtype": "i8", "shape": [3], "offset": 0, "size": 24},
        {"name": "again", "dtype": "f4", "shape": [2, 2], "offset": 24, "size": 16},
    ]
    message = laid_out(items, b.tobytes() + a.tobytes())
    for header, arrays in (wire.read_message(io.BytesIO(message)), wire.decode(message)):
        assert header == {"n": 5}
        same(arrays, {"a": a, "b": b, "again": a.reshape(2, 2)})
        arrays["a"][0] = 7.0
        assert arrays["again"][0, 0] == 0.0  # its own copy


@pytest.mark.parametrize(
    "lie",
    [{"shape": [5]}, {"shape": [-4]}, {"dtype": "U1"}, {"dtype": "no such"}, {"size": 12}],
)
def test_an_array_whose_shape_dtype_and_size_disagree_is_refused(lie: dict[str, Any]) -> None:
    item = {"name": "a", "dtype": "f4", "shape": [4], "offset": 0, "size": 16, **lie}
    message = laid_out([item], bytes(16))
    with pytest.raises(wire.ProtocolError):
        wire.read_message(io.BytesIO(message))
    with pytest.raises(wire.ProtocolError):
        wire.decode(bytearray(message))


def test_a_room_keeps_what_was_read_as_it_grows() -> None:
    room = Unshared()
    assert room.mapped == 0
    first = room.room(16)
    first[:] = bytes(range(16))
    grown = room.room(room.mapped + 10, keep=16)
    assert bytes(grown[:16]) == bytes(range(16))
    assert room.mapped >= len(grown)
    again = room.room(8)  # the same pages, lent again: what the last message left
    assert bytes(again) == bytes(range(8))
    with pytest.raises(ValueError, match="no room"):
        room.room(4, keep=5)
    with pytest.raises(ValueError, match="no room"):
        room.room(-1)


def test_no_forked_process_inherits_the_room() -> None:
    """A check's process, forked while the warm worker holds a message in its room, has no
    such memory: reading it there is a fault, not the message."""
    if not sys.platform.startswith("linux"):
        pytest.skip("MADV_DONTFORK is Linux's")
    room = Unshared()
    view = room.room(4096)
    view[:6] = b"secret"
    pid = os.fork()
    if pid == 0:  # pragma: no cover  (the child: judged by how it ended)
        faulthandler.disable()  # no report of the fault to the test's output
        os.close(2)
        try:
            os._exit(0 if bytes(view[:6]) == b"secret" else 3)
        finally:
            os._exit(4)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == -signal.SIGSEGV
    assert bytes(view[:6]) == b"secret"  # the worker's own is untouched


def answer_of(data: bytes, room: Unshared) -> tuple[Any, str]:
    """What the warm worker reads from a check's process that wrote ``data``."""
    answers_out, answers_in = os.pipe()
    notes_out, notes_in = os.pipe()
    os.set_blocking(notes_out, False)
    pid = os.fork()
    if pid == 0:  # pragma: no cover  (the writer)
        os.close(answers_out)
        with os.fdopen(answers_in, "wb") as stream:
            stream.write(data)
        os._exit(0)
    os.close(answers_in)
    os.close(notes_in)
    process = isolation._Process(pid, -1, answers_out, notes_out)
    try:
        return isolation._read_answer(process, 30, None, room)
    finally:
        os.waitpid(pid, 0)
        process.close()


def test_answers_read_into_one_room_each_arrive_whole() -> None:
    room = Unshared()
    sizes = [10, 3 << 20, 100, (68 << 20) // 4]  # the last larger than the room's first map
    for index, size in enumerate(sizes):
        sent = {"out/0": np.arange(size, dtype=np.float32) + index}
        data = wire.encode(CheckReply(kind="function").encode(), sent)
        message, why = answer_of(data + b"trailing bytes never read", room)
        assert why == ""
        assert message is not None
        assert bytes(message) == data
        _, arrays = wire.decode(bytes(message))
        same(arrays, sent)


def test_an_answer_cut_short_is_no_answer() -> None:
    data = wire.encode(CheckReply(kind="function").encode(), {"o": np.ones(5000)})
    assert answer_of(data[:-1], Unshared()) == (None, "ended")
    assert answer_of(b"NOPE" + data[4:], Unshared()) == (None, "ended")


@pytest.fixture
def marked() -> Iterator[snippet_module.WorkerState]:
    """A worker state with its modules marked, as the warm worker's before it forks; the mark
    and the test's modules taken away after."""
    names = set(sys.modules)
    session = snippet_module.WorkerState(root=Path("."))
    snippet_module.mark_modules(session)
    yield session
    for name in set(sys.modules) - names:
        del sys.modules[name]


def module(name: str) -> types.ModuleType:
    made = types.ModuleType(name)
    sys.modules[name] = made
    return made


def test_the_modules_a_check_added_are_found_after_the_mark(
    marked: snippet_module.WorkerState,
) -> None:
    module("fc_test_before_the_check")  # after the mark, before the check: not the check's
    before = snippet_module.modules_now(marked)
    assert before.marked
    assert "fc_test_before_the_check" in before
    assert "os" in before
    module("fc_test_new_a")
    again = sys.modules.pop("json")  # an old module put back: not new
    sys.modules["json"] = again
    module("fc_test_new_b")
    del sys.modules["fc_test_before_the_check"]
    added = snippet_module.modules_added(before)
    assert sorted(added) == ["fc_test_new_a", "fc_test_new_b"]
    assert sorted(added) == sorted(set(sys.modules) - set_before(before) - {snippet_module._MARK})


def set_before(before: snippet_module.Modules) -> set[str]:
    return set(before.names) | set(before.since_mark)


def test_without_its_mark_every_name_is_looked_at_and_the_answer_is_the_same(
    marked: snippet_module.WorkerState,
) -> None:
    before = snippet_module.modules_now(marked)
    module("fc_test_new_c")
    del sys.modules[snippet_module._MARK]  # a check that removed it
    module("fc_test_new_d")
    assert sorted(snippet_module.modules_added(before)) == ["fc_test_new_c", "fc_test_new_d"]
    unmarked = snippet_module.modules_now(marked)  # no mark now: every name
    assert not unmarked.marked
    module("fc_test_new_e")
    assert snippet_module.modules_added(unmarked) == ["fc_test_new_e"]


def test_a_state_never_marked_looks_at_every_name() -> None:
    session = snippet_module.WorkerState(root=Path("."))
    before = snippet_module.modules_now(session)
    assert not before.marked
    assert set(before.names) == set(sys.modules)
    module("fc_test_unmarked")
    try:
        assert snippet_module.modules_added(before) == ["fc_test_unmarked"]
    finally:
        del sys.modules["fc_test_unmarked"]


@pytest.mark.tf
def test_the_zygote_freezes_what_it_imported_out_of_the_collector() -> None:
    code = (
        "import gc\n"
        "from formula_check.runtime import zygote\n"
        "before = gc.get_freeze_count()\n"
        "hello = zygote.import_tensorflow()\n"
        "print(hello.ok, before, gc.get_freeze_count() > 10000)\n"
    )
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"}
    done = subprocess.run(
        [sys.executable, "-c", code], check=False, capture_output=True, text=True, env=env
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["True", "0", "True"]


class Variable:
    """What :func:`.layer_weights.perturb` uses of a TensorFlow variable."""

    def __init__(self, value: np.ndarray[Any, Any]) -> None:
        self.value = value

    def numpy(self) -> np.ndarray[Any, Any]:
        return self.value.copy()

    def assign(self, value: np.ndarray[Any, Any]) -> None:
        self.value = np.array(value)


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
def test_weights_are_moved_by_the_same_bits_as_before(dtype: Any) -> None:
    """The perturbation made in one array in place is, bit for bit, ``current + 0.1 * noise``
    as it was made with three: a check's weights, and so its verdict, are those they were."""
    from formula_check.execution import layer_weights

    start = [
        np.random.default_rng(i).standard_normal(shape).astype(dtype)
        for i, shape in enumerate([(64, 32), (32,), ()])
    ]
    variables = [Variable(value.copy()) for value in start]
    layer_weights.perturb(variables, seed=11)
    rng = np.random.default_rng(11 + 7919)
    for variable, value in zip(variables, start, strict=True):
        expected = value + 0.1 * rng.standard_normal(value.shape).astype(value.dtype)
        assert variable.value.dtype == expected.dtype
        assert variable.value.tobytes() == expected.tobytes()
        assert not np.array_equal(variable.value, value)
