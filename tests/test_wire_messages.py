"""The typed messages between the build and a worker: each survives its trip through JSON
unchanged, and a header that does not fit its type is refused with a ProtocolError naming
the field, never half read."""

from __future__ import annotations

import json
import struct
from typing import Any

import pytest

from formula_check import wire
from formula_check.messages import (
    Cancel,
    CheckEnded,
    CheckReply,
    CheckRequest,
    Hello,
    RunningOn,
    Shutdown,
    SnippetFailed,
    TimingResult,
    decode_answer,
    decode_request,
)
from formula_check.planning.plan import plan_check
from formula_check.runtime.control import WaitAnswer, ZygoteHello
from implementations import SDPA
from support import spec_for


def through_json(header: dict[str, Any]) -> dict[str, Any]:
    decoded, _ = wire.decode(wire.encode(header))
    return decoded


def test_a_planned_request_survives_the_wire() -> None:
    spec = spec_for("attention", SDPA, mask="causal", timing=True, sweep=(4, 8))
    request = plan_check(spec, "/project").request.with_time_limit(12.5)
    assert request.timing is not None and request.regimes
    back = decode_request(through_json(request.encode()))
    assert back == request
    assert back.encode() == request.encode()


def test_a_request_s_new_fields_and_init_values_survive_the_wire() -> None:
    """Outputs kept on an attribute, a preset's weights to be found under a sub-layer, and
    constructor values that are lists, tuples, booleans or None arrive as they left."""
    spec = spec_for(
        "multihead",
        "class Wrapper:\n    pass\n",
        preset="keras-mha",
        returns=("output", "weights=last_attn_scores"),
        init={"widths": ["d_model", 4], "axes": (-1,), "center": False, "name": None},
    )
    request = plan_check(spec, "/project").request
    assert request.attribute_outputs == {"weights": "last_attn_scores"}
    assert "W_q" in request.preset_weights
    back = decode_request(through_json(request.encode()))
    assert back == request
    assert back.init["widths"] == [12, 4] and back.init["axes"] == (-1,)
    assert back.init["center"] is False and back.init["name"] is None


def test_control_requests_are_told_apart() -> None:
    assert decode_request(Cancel().encode()) == Cancel()
    assert decode_request(Shutdown().encode()) == Shutdown()
    with pytest.raises(wire.ProtocolError, match="unknown request 'dance'"):
        decode_request({"op": "dance"})


@pytest.mark.parametrize(
    "answer",
    [
        CheckReply(
            kind="layer",
            outputs=2,
            output_dtypes=("float32", "bfloat16"),
            output_keys=("output", "weights"),
            timings=(
                TimingResult("check", (0.1, 0.2, 0.3), 0.5, (0.01, 0.02, 0.03)),
                TimingResult("sweep n=4", (0.1, 0.1, 0.1)),
                TimingResult("timing", (0.2, 0.2, 0.2), 0.4, graph_error="TypeError: no"),
            ),
            unused_weights=("b_o",),
            unmapped_weights=(("dense/kernel", (4, 8)),),
            regimes_skipped=(("large logits", "a layer is built for the check's sizes"),),
            snippet_seconds=0.25,
            stdout="hi\n",
            local_files=("helpers.py",),
            written_files=("docs/out.txt",),
            preset_root="block.mha",
            created_variables=(("dense/kernel:0", (6, 9)),),
            unmoved_weights=(("b_1", "b1: a property without a setter"),),
            first_call=True,
            other_keys=(("r0/", ("output",)), ("first/", None)),
            graph_outputs=2,
            graph_regimes_failed=(("large values", "InvalidArgumentError: too large"),),
        ),
        CheckReply(kind="function"),
        CheckReply(kind="function", graph_error="AttributeError: no attribute 'numpy'"),
        SnippetFailed("ValueError", "bad", "call", 3, "x.py", "Traceback...", "out", ("a.py",)),
        SnippetFailed(type="InternalError", message="a bug of ours"),
        CheckEnded("timeout", "", 1.5, ("docs/x",)),
        CheckEnded("crash", "the check's process was killed by SIGKILL", 0.1),
        CheckEnded("cancelled"),
        RunningOn(),
    ],
)
def test_every_answer_survives_the_wire(answer: Any) -> None:
    assert decode_answer(through_json(answer.encode())) == answer


def test_a_hello_survives_the_wire_and_says_what_checks_run_on() -> None:
    hello = Hello(True, "", "2.21.0", "3.10.0", "CPU: x", 1, True, "/tmp/fc")
    back = Hello.decode(through_json(hello.encode()))
    assert back == hello
    assert back.environment.tf_version == "2.21.0" and back.environment.threads == 1
    missing = Hello.decode(through_json(Hello(False, "No module named 'tensorflow'").encode()))
    assert not missing.ok and missing.error == "No module named 'tensorflow'"


@pytest.mark.parametrize(
    ("header", "said"),
    [
        ({"ok": True, "kind": "layer", "outputs": "2"}, "'outputs' is str"),
        ({"ok": True, "kind": "layer", "outputs": True}, "'outputs' is bool"),
        ({"ok": True, "kind": "layer", "graph_outputs": "2"}, "'graph_outputs' is str"),
        ({"ok": True, "kind": "layer", "unused_weights": [1]}, "other things than strings"),
        ({"ok": True, "kind": "layer", "timings": [{"label": "x"}]}, "has no 'eager'"),
        ({"ok": False, "line": 2.5}, "'line' is float"),
        ({"op": "timeout", "written_files": "docs/x"}, "'written_files' is str"),
    ],
)
def test_a_reply_that_does_not_fit_its_type_is_refused(header: dict[str, Any], said: str) -> None:
    with pytest.raises(wire.ProtocolError, match=said):
        decode_answer(header)


def test_a_request_without_its_calls_is_refused() -> None:
    header = plan_check(spec_for("softmax", SDPA), ".").request.encode()
    del header["layer_call"]
    with pytest.raises(wire.ProtocolError, match="a check request has no 'layer_call'"):
        decode_request(header)


def test_defaults_are_filled_once_on_decoding() -> None:
    failed = decode_answer({"ok": False})
    assert failed == SnippetFailed(type="Error")
    assert decode_answer({"ok": True, "kind": "function"}) == CheckReply(kind="function")
    minimal = {"op": "check", "root": ".", "function_call": {}, "layer_call": {}}
    request = CheckRequest.decode(minimal)
    assert (request.kind, request.perturb, request.seed, request.timing) == ("auto", True, 0, None)


def test_a_message_of_the_first_protocol_version_is_refused() -> None:
    message = bytearray(wire.encode({"ok": True}))
    struct.pack_into("<H", message, 4, 1)
    with pytest.raises(
        wire.ProtocolError, match=f"protocol version 1, this checker speaks {wire.VERSION}"
    ):
        wire.decode(bytes(message))


def test_the_zygote_hello_names_its_version() -> None:
    line = json.loads(json.dumps(ZygoteHello(True).encode()))
    assert ZygoteHello.decode(line) == ZygoteHello(True)
    with pytest.raises(wire.ProtocolError, match="the zygote speaks version 1"):
        ZygoteHello.decode({**line, "version": 1})
    assert WaitAnswer.decode(WaitAnswer(running=True).encode()).running
    assert WaitAnswer.decode(WaitAnswer(status=-9).encode()) == WaitAnswer(status=-9)
    assert WaitAnswer.decode({"status": True}) == WaitAnswer(status=None)
