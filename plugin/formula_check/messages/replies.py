"""What a worker answers to a check request, typed: one codec for each answer.

:func:`decode_answer` tells them apart: ``op`` ``running on`` is :class:`RunningOn`, ``op``
``timeout``, ``cancelled`` or ``crash`` is :class:`CheckEnded`, else ``ok`` true is
:class:`CheckReply` and anything else :class:`SnippetFailed`. (The requests and the hello
are in :mod:`.requests`.)
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from formula_check.messages.fields import Fields
from formula_check.model import frozen_map
from formula_check.wire import ProtocolError


@dataclass(frozen=True)
class TimingResult:
    """One timed run: eager samples, then (if the code traced) the trace and graph samples."""

    label: str
    eager: tuple[float, ...]
    trace: float | None = None
    graph: tuple[float, ...] | None = None
    graph_error: str = ""
    """Why the code has no ``tf.function`` timing: it could not be traced."""

    def encode(self) -> dict[str, Any]:
        """The run's timing as JSON."""
        data: dict[str, Any] = {"label": self.label, "eager": list(self.eager)}
        if self.trace is not None:
            data["trace"] = self.trace
        if self.graph is not None:
            data["graph"] = list(self.graph)
        if self.graph_error:
            data["graph_error"] = self.graph_error
        return data

    @classmethod
    def decode(cls, data: Any) -> TimingResult:
        """The timing ``data`` describes."""
        fields = Fields(data, "a timing")
        graph = fields.optional("graph")
        fields.required("eager")  # every run is timed eagerly
        return cls(
            fields.text("label"),
            _seconds(fields, "eager"),
            fields.optional_number("trace"),
            None if graph is None else _seconds(fields, "graph"),
            fields.text("graph_error"),
        )


def _seconds(fields: Fields, key: str) -> tuple[float, ...]:
    items = fields.items(key)
    if not all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in items):
        raise ProtocolError(f"{fields.what}: {key!r} holds other things than numbers")
    return tuple(float(x) for x in items)


FLOAT16_WEIGHTS = "float32, weights in float16"
"""The dtype an artifact computes in when its weights are stored in float16 and turned back to
float32 to compute (TFLite's float16 conversion, on a CPU)."""
GRAPH = "graph/"
"""The prefix of the arrays the code returned as a traced ``tf.function`` graph."""
FIRST = "first/"
"""The prefix of the arrays of a layer's first call, made before its weights were moved."""
NOT_A_TENSOR = "not a tensor:"
"""How ``output_dtypes`` marks a returned value that is no array (``not a tensor: list``): it
travels as an empty array, so the values after it keep their places."""


@dataclass(frozen=True)
class CheckReply:
    """The code ran: its outputs (arrays ``out/I``, a regime's under its prefix) and the
    layer's weights (``w/NAME``) travel beside this header."""

    kind: str
    """What the entry was taken for: ``function``, ``layer`` or ``factory``."""
    outputs: int = 0
    output_dtypes: tuple[str, ...] = ()
    """Each returned value's dtype, or :data:`NOT_A_TENSOR` and its type."""
    output_keys: tuple[str, ...] | None = None
    """The keys of a returned dict, in order; None when the code returned no dict."""
    timings: tuple[TimingResult, ...] = ()
    unused_weights: tuple[str, ...] = ()
    """Mapped weights of a sub-layer the code never called."""
    unmapped_weights: tuple[tuple[str, tuple[int | None, ...]], ...] = ()
    """Trainable weights the weight map does not reach: name and shape."""
    regimes_skipped: tuple[tuple[str, str], ...] = ()
    """Input regimes the code could not run: name and why."""
    snippet_seconds: float = 0.0
    stdout: str = ""
    local_files: tuple[str, ...] = ()
    written_files: tuple[str, ...] = ()
    outside_files: tuple[str, ...] = ()
    """Files outside the project it read (absolute): see :mod:`..execution.outside_reads`."""
    listed_folders: tuple[str, ...] = ()
    """Folders it listed: relative to the project inside it, else absolute."""
    unseen_reads: tuple[str, ...] = ()
    """Why what it read could not be followed (it ran a program...): not cached."""
    preset_root: str = ""
    """The sub-layer under which the preset's weights were found (empty: the layer itself)."""
    created_variables: tuple[tuple[str, tuple[int | None, ...]], ...] = ()
    """Trainable variables a function made while it ran: name and shape."""
    phase_seconds: tuple[tuple[str, float], ...] = ()
    """Where the check's time in the worker went, phase by phase, in order."""
    unmoved_weights: tuple[tuple[str, str], ...] = ()
    """Mapped weights that could not be moved before the call judged: name, and where and
    why."""
    first_call: bool = False
    """The weights were moved after the first call: what it returned and kept, and the
    weights it ran with, travel under :data:`FIRST`, to be judged too."""
    other_keys: tuple[tuple[str, tuple[str, ...] | None], ...] = ()
    """The calls besides the main one (a regime's prefix, or :data:`FIRST`) that returned a
    dict with other keys than the main call's, or a dict where it did not (None: no dict)."""
    graph_outputs: int | None = None
    """How many values the code returned when called as a traced ``tf.function`` graph (their
    arrays ``graph/out/I``); None when it was not called so: an exported artifact, or code
    that does not run as a graph (``graph_error`` says why)."""
    graph_error: str = ""
    """Why the code did not run as a graph: what tracing or calling it raised."""
    graph_regimes_failed: tuple[tuple[str, str], ...] = ()
    """Input regimes on which the graph raised, though the code ran eagerly there: name and
    what it raised (each a failed verdict). The graph's arrays on the others travel under
    :data:`GRAPH` and the regime's prefix."""
    keywords_not_passed: tuple[tuple[str, str], ...] = ()
    """Keywords of the call that the framework kept from the layer's ``call()``, each with the
    method it never reached (``training`` to a Keras 3 layer that takes only ``**kwargs``)."""
    artifact: Mapping[str, str] = field(default_factory=frozen_map)
    """What an exported artifact turned out to be (empty for code): its ``format``, ``path``,
    ``signature``, compute ``dtype``, and for int8 the quantization the interpreter reports
    (see :mod:`..execution.artifacts`)."""

    def encode(self) -> dict[str, Any]:
        """The reply's header."""
        header: dict[str, Any] = {
            "ok": True,
            "kind": self.kind,
            "outputs": self.outputs,
            "timings": [timing.encode() for timing in self.timings],
            "unused_weights": list(self.unused_weights),
            "unmapped_weights": [[name, list(shape)] for name, shape in self.unmapped_weights],
            "snippet_seconds": self.snippet_seconds,
            "regimes_skipped": [list(pair) for pair in self.regimes_skipped],
            "output_dtypes": list(self.output_dtypes),
            "preset_root": self.preset_root,
            "created_variables": [[name, list(shape)] for name, shape in self.created_variables],
            "keywords_not_passed": [list(pair) for pair in self.keywords_not_passed],
            "phase_seconds": [[name, seconds] for name, seconds in self.phase_seconds],
            "unmoved_weights": [list(pair) for pair in self.unmoved_weights],
            "first_call": self.first_call,
            "other_keys": [[prefix, keys] for prefix, keys in self.other_keys],
            "artifact": dict(self.artifact),
            "graph_error": self.graph_error,
            "graph_regimes_failed": [list(pair) for pair in self.graph_regimes_failed],
        }
        if self.output_keys is not None:
            header["output_keys"] = list(self.output_keys)
        if self.graph_outputs is not None:
            header["graph_outputs"] = self.graph_outputs
        return {**header, **_said(self)}

    @classmethod
    def decode(cls, header: Mapping[str, Any]) -> CheckReply:
        """The reply ``header`` describes."""
        fields = Fields(header, "a check reply")
        keys = fields.optional("output_keys")
        graph = fields.optional("graph_outputs")
        return cls(
            kind=fields.text("kind"),
            outputs=fields.integer("outputs", 0),
            output_dtypes=fields.texts("output_dtypes"),
            output_keys=None if keys is None else fields.texts("output_keys"),
            timings=tuple(TimingResult.decode(t) for t in fields.items("timings")),
            unused_weights=fields.texts("unused_weights"),
            unmapped_weights=tuple(_shaped(item) for item in fields.items("unmapped_weights")),
            regimes_skipped=tuple(_skipped(item) for item in fields.items("regimes_skipped")),
            snippet_seconds=fields.number("snippet_seconds", 0.0),
            stdout=fields.text("stdout"),
            **_read(fields),
            preset_root=fields.text("preset_root"),
            created_variables=tuple(_shaped(item) for item in fields.items("created_variables")),
            keywords_not_passed=tuple(
                _skipped(item) for item in fields.items("keywords_not_passed")
            ),
            phase_seconds=tuple(_phase(item) for item in fields.items("phase_seconds")),
            unmoved_weights=tuple(_skipped(item) for item in fields.items("unmoved_weights")),
            first_call=fields.flag("first_call", False),
            other_keys=tuple(_keyed(item) for item in fields.items("other_keys")),
            artifact=Fields(fields.mapping("artifact"), "an artifact").texts_by_name(),
            graph_outputs=None if graph is None else fields.integer("graph_outputs", 0),
            graph_error=fields.text("graph_error"),
            graph_regimes_failed=tuple(
                _skipped(item) for item in fields.items("graph_regimes_failed")
            ),
        )


def _shaped(item: Any) -> tuple[str, tuple[int | None, ...]]:
    if not (isinstance(item, list) and len(item) == 2 and isinstance(item[1], list)):
        raise ProtocolError("an unmapped weight is not [name, shape]")
    shape = item[1]
    if not all(d is None or (isinstance(d, int) and not isinstance(d, bool)) for d in shape):
        raise ProtocolError("an unmapped weight's shape holds other things than sizes")
    return str(item[0]), tuple(shape)


def _keyed(item: Any) -> tuple[str, tuple[str, ...] | None]:
    """``[prefix, keys]``, the keys a list of texts or None."""
    if not (isinstance(item, list) and len(item) == 2 and isinstance(item[0], str)):
        raise ProtocolError("other keys are not [prefix, keys]")
    keys = item[1]
    if keys is None:
        return item[0], None
    if not (isinstance(keys, list) and all(isinstance(key, str) for key in keys)):
        raise ProtocolError("other keys are not a list of texts")
    return item[0], tuple(keys)


def _phase(item: Any) -> tuple[str, float]:
    """``[name, seconds]``."""
    if isinstance(item, list) and len(item) == 2 and isinstance(item[1], int | float):
        return str(item[0]), float(item[1])
    raise ProtocolError("a phase is not [name, seconds]")


def _skipped(item: Any) -> tuple[str, str]:
    """``[name, why]`` (a skipped regime, a keyword kept from a call), or a bare name."""
    if isinstance(item, str):
        return item, ""
    if isinstance(item, list) and len(item) == 2:
        return str(item[0]), str(item[1])
    raise ProtocolError(f"{item!r} is not a pair [name, why]")


_READS = ("local_files", "written_files", "outside_files", "listed_folders", "unseen_reads")
"""What a reply says the check read and wrote, each a list of texts."""


def _said(reply: CheckReply | SnippetFailed) -> dict[str, Any]:
    return {"stdout": reply.stdout, **{name: list(getattr(reply, name)) for name in _READS}}


def _read(fields: Fields) -> dict[str, tuple[str, ...]]:
    return {name: fields.texts(name) for name in _READS}


@dataclass(frozen=True)
class SnippetFailed:
    """The code raised (``phase`` says while doing what), or the checker itself failed on the
    request (``type`` ``InternalError``)."""

    type: str = "Error"
    message: str = ""
    phase: str = ""
    line: int = 0
    file: str = ""
    traceback: str = ""
    stdout: str = ""
    local_files: tuple[str, ...] = ()
    written_files: tuple[str, ...] = ()
    outside_files: tuple[str, ...] = ()
    listed_folders: tuple[str, ...] = ()
    unseen_reads: tuple[str, ...] = ()

    def encode(self) -> dict[str, Any]:
        """The reply's header."""
        return {
            "ok": False,
            "phase": self.phase,
            "type": self.type,
            "message": self.message,
            "line": self.line,
            "file": self.file,
            "traceback": self.traceback,
            **_said(self),
        }

    @classmethod
    def decode(cls, header: Mapping[str, Any]) -> SnippetFailed:
        """The failure ``header`` describes."""
        fields = Fields(header, "a failure")
        return cls(
            type=fields.text("type", "Error"),
            message=fields.text("message"),
            phase=fields.text("phase"),
            line=fields.integer("line", 0),
            file=fields.text("file"),
            traceback=fields.text("traceback"),
            stdout=fields.text("stdout"),
            **_read(fields),
        )


Ending = Literal["timeout", "cancelled", "crash"]


@dataclass(frozen=True)
class CheckEnded:
    """The check's own process gave no answer: it ran out of time, was cancelled, or died
    (``detail`` says how). The worker lives on."""

    how: Ending
    detail: str = ""
    process_seconds: float = 0.0
    written_files: tuple[str, ...] = ()
    """What it said it wrote into the project before it ended."""

    def encode(self) -> dict[str, Any]:
        """The reply's header."""
        header: dict[str, Any] = {"op": self.how}
        if self.how == "crash":
            header["detail"] = self.detail
        header["process_seconds"] = self.process_seconds
        header["written_files"] = list(self.written_files)
        return header

    @classmethod
    def decode(cls, header: Mapping[str, Any]) -> CheckEnded:
        """The ending ``header`` describes."""
        fields = Fields(header, "an ended check")
        how = fields.text("op")
        if how not in {"timeout", "cancelled", "crash"}:
            raise ProtocolError(f"a check does not end by {how!r}")
        return cls(
            how,  # type: ignore[arg-type]
            fields.text("detail"),
            fields.number("process_seconds", 0.0),
            fields.texts("written_files"),
        )


@dataclass(frozen=True)
class RunningOn:
    """A cancelled check that already wrote into the project runs to its end."""

    def encode(self) -> dict[str, Any]:
        """The header."""
        return {"op": "running on"}


Answer = CheckReply | SnippetFailed | CheckEnded | RunningOn


def decode_answer(header: Mapping[str, Any]) -> Answer:
    """Which answer ``header`` is, decoded."""
    fields = Fields(header, "an answer")
    op = fields.text("op")
    if op == "running on":
        return RunningOn()
    if op in {"timeout", "cancelled", "crash"}:
        return CheckEnded.decode(header)
    if fields.optional("ok") is True:
        return CheckReply.decode(header)
    return SnippetFailed.decode(header)
