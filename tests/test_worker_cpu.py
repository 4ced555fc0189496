"""What the worker does to spend less CPU must change nothing a check can see: the warm-up
leaves Keras' names and every random generator as a fresh interpreter has them, and a request
or an answer of megabytes, read into one buffer and sent on as it came, arrives whole and
the same, or not at all."""

from __future__ import annotations

import io
import os
import struct
import subprocess
import sys
import tempfile
from typing import Any

import numpy as np
import pytest

from formula_check import wire
from formula_check.messages import Calls, CheckReply, CheckRequest, decode_answer
from formula_check.runtime import child, isolation
from support import run

# Run at the snippet's load, right after the check seeded every generator with its seed.
OBSERVED = """
import random

import keras
import numpy as np
import tensorflow as tf

print("names", tf.keras.layers.Dense(2).name, tf.keras.layers.MultiHeadAttention(2, 2).name,
      tf.keras.layers.LayerNormalization().name, tf.keras.Sequential().name,
      keras.backend.get_uid("dense"))
print("python", random.random())
print("numpy", np.random.random())
print("tensorflow", float(tf.random.uniform(())))
print("keras", float(keras.random.uniform(())))
"""

SEED = 2468


def python(code: str) -> str:
    """What ``code`` prints in a new interpreter."""
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2", "TF_ENABLE_ONEDNN_OPTS": "0"}
    done = subprocess.run(
        [sys.executable, "-c", code], check=False, capture_output=True, text=True, env=env
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def fresh_interpreter(code: str) -> str:
    """What ``code`` prints in a new interpreter that imported TensorFlow and seeded every
    generator as a check does, with no warm-up before."""
    return python(f"import tensorflow as tf\ntf.keras.utils.set_random_seed({SEED})\n" + code)


@pytest.mark.tf
def test_a_check_sees_keras_names_and_random_state_as_a_fresh_interpreter_does() -> None:
    """The warm-up builds Keras layers and draws random numbers in the warm worker: a check
    forked after it must still get ``dense``, not ``dense_4``, and the same numbers."""
    snippet = OBSERVED + "\n\ndef attention(q, k, v):\n    return q, q\n"
    result = run("attention", snippet, seed=SEED)
    expected = fresh_interpreter(OBSERVED)
    assert expected.startswith("names dense multi_head_attention layer_normalization sequential")
    assert result.stdout == expected


KEPT = """
import keras
import tensorflow as tf
from keras.src.backend.common import global_state
from formula_check.execution.warming import keras_state_kept

keras.utils.set_random_seed(7)
print(tf.keras.layers.Dense(1).name)
with keras_state_kept() as kept:
    keras.utils.set_random_seed(8)
    print(kept, tf.keras.layers.Dense(1).name, tf.keras.layers.Dense(1).name)
    keras.config.set_dtype_policy("mixed_float16")
print(tf.keras.layers.Dense(1).name, global_state.get_global_attribute("global_random_seed"))
print(keras.config.dtype_policy().name)
"""

# Run after KEPT, in the same interpreter (one TensorFlow import for both): it leaves Keras
# as it found it, or KEPT's last lines say otherwise.
ELSEWHERE = """
from pathlib import Path

from formula_check.messages import CheckReply
from formula_check.execution import warming
from formula_check.execution.snippet_module import WorkerState

ran = []
warming.warm_layers = lambda: ran.append("layers")
warming.check = lambda session, request, arrays: (
    ran.append(request.entry or request.source.split("def ")[1].split("(")[0])
    or (CheckReply(kind="function"), {})
)
print(warming.warm_up(WorkerState(Path("."))), ran)
del global_state.GLOBAL_SETTINGS_TRACKER
ran.clear()
print(warming.warm_up(WorkerState(Path("."))), ran)
"""


@pytest.mark.tf
def test_the_warm_up_keeps_keras_global_state_and_warms_no_layer_where_it_finds_none() -> None:
    """Inside, Keras counts names afresh; after, its own counts go on where they were; the
    seed the process set is the seed it has. Another Keras keeps its state elsewhere: the
    warm-up then builds no Keras layer (it could not put the names it counted back), and
    still runs its checks."""
    assert python(KEPT + ELSEWHERE).split("\n") == [
        "dense",
        "True dense dense_1",
        "dense_1 7",
        "float32",
        "True ['attention', 'positional_encoding', 'layers']",
        "True ['attention', 'positional_encoding']",
        "",
    ]


def message(size: int, name: str = "first") -> bytes:
    arrays = {"in/x": np.arange(size, dtype=np.float32).reshape(-1, 4)}
    return wire.encode(CheckRequest(root=".", calls=Calls(), entry=name).encode(), arrays)


class Trickle(io.RawIOBase):
    """A stream that gives at most ``step`` bytes a read, as a socket or a pipe may."""

    def __init__(self, data: bytes, step: int) -> None:
        self.data, self.step, self.at = data, step, 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        chunk = self.data[self.at : self.at + min(self.step, len(buffer))]
        buffer[: len(chunk)] = chunk
        self.at += len(chunk)
        return len(chunk)


@pytest.mark.parametrize("step", [1, 7, 1 << 20])
def test_a_request_is_read_whole_however_it_trickles_in(step: int) -> None:
    one, two = message(4000), message(8, "second")
    stream = Trickle(one + two, step) if step > 1 else Trickle(two, step)
    if step > 1:
        assert bytes(child.read_whole(stream)) == one
    assert bytes(child.read_whole(stream)) == two
    with pytest.raises(EOFError):
        child.read_whole(stream)


def test_a_request_cut_short_or_not_ours_is_a_protocol_error() -> None:
    whole = message(400)
    with pytest.raises(wire.ProtocolError):
        child.read_whole(io.BytesIO(whole[:-1]))
    with pytest.raises(wire.ProtocolError):
        child.read_whole(io.BytesIO(whole[: wire.PREFIX_SIZE - 1]))
    with pytest.raises(wire.ProtocolError):
        child.read_whole(io.BytesIO(b"NOPE" + whole[4:]))


def test_megabytes_go_to_the_check_and_back_the_same() -> None:
    """A request of megabytes is sent on as it came; the check's answer of megabytes comes
    back whole, in order, for each of several requests."""
    requests = io.BytesIO()
    sizes = [3 << 20, 16, 1 << 20]
    for index, size in enumerate(sizes):
        requests.write(message(size, f"check-{index}"))
    requests.seek(0)
    answers = io.BytesIO()

    def handle(request: CheckRequest, arrays: dict[str, Any]) -> tuple[CheckReply, dict]:
        return CheckReply(kind=request.entry), {"out/0": arrays["in/x"] * 2}

    def answer(request: CheckRequest, arrays: dict[str, Any], encoded: Any) -> Any:
        return checks.run(request, arrays, time_limit=60, encoded=encoded)

    with tempfile.TemporaryDirectory() as scratch:
        checks = isolation.CheckProcesses(handle, lambda: None, conversation=[], scratch=scratch)
        try:
            assert child.forward(requests, answers, answer, after=checks.tidy) == 0
        finally:
            checks.close()
    answers.seek(0)
    for index, size in enumerate(sizes):
        header, arrays = wire.read_message(answers)
        assert decode_answer(header) == CheckReply(kind=f"check-{index}")
        expected = np.arange(size, dtype=np.float32).reshape(-1, 4) * 2
        np.testing.assert_array_equal(arrays["out/0"], expected)
    assert answers.read() == b""


@pytest.mark.parametrize("length", [1 << 62, 2**64 - 1, (isolation.ANSWER_LIMIT_MIB << 20) + 1])
def test_an_answer_claiming_more_than_its_bound_is_no_answer(length: int) -> None:
    """A snippet may write anything to its process's answer pipe: a length past the bound an
    answer may have (none a buffer could hold, or one byte more than it) is never allocated,
    and the read ends at once, as a check that gave no answer; the worker lives on."""
    prefix = struct.pack("<4sHQQ", wire.MAGIC, wire.VERSION, 0, length - wire.PREFIX_SIZE)
    answers_out, answers_in = os.pipe()
    notes_out, notes_in = os.pipe()
    os.set_blocking(notes_out, False)
    os.write(answers_in, prefix)
    os.close(answers_in)
    process = isolation._Process(os.getpid(), -1, answers_out, notes_out)
    try:
        answer, why = isolation._read_answer(process, 10, None)
        assert answer is None and why.startswith("its answer (the values it returned, ")
        assert why.endswith(
            "MiB, more than the 256 MiB a check may send back; its process was stopped"
        )
    finally:
        for fd in (answers_out, notes_out, notes_in):
            os.close(fd)
