"""The messages between the build and a worker, typed: each with one codec.

Every message is a frozen dataclass with ``encode()``, the JSON header that :mod:`..wire`
frames (named arrays travel beside it), and ``decode(header)``, which checks every field's
type and fills every default once: the reading side never guesses at a key. A header that
does not fit raises :class:`~..wire.ProtocolError`.

Who sends what:

- the build asks with :class:`CheckRequest` (built by :mod:`.planning`), :class:`Cancel` and
  :class:`Shutdown` (:func:`decode_request` reads them in the worker);
- a worker says :class:`Hello` once, then answers each request with :class:`CheckReply`
  (the code ran), :class:`SnippetFailed` (it raised, or the checker failed on it),
  :class:`CheckEnded` (the check's own process timed out, was cancelled or died) or, while
  a cancelled check runs on, :class:`RunningOn` (:func:`decode_answer` reads them).
"""

from __future__ import annotations

from formula_check.messages.fields import Value
from formula_check.messages.replies import (
    FIRST,
    FLOAT16_WEIGHTS,
    GRAPH,
    NOT_A_TENSOR,
    Answer,
    CheckEnded,
    CheckReply,
    Ending,
    RunningOn,
    SnippetFailed,
    TimingResult,
    decode_answer,
)
from formula_check.messages.requests import (
    AUTO_REPEATS,
    Argument,
    Call,
    Calls,
    Cancel,
    CheckRequest,
    Hello,
    RegimeRequest,
    Shutdown,
    TimingRequest,
    TimingRun,
    decode_request,
)
from formula_check.wire import ProtocolError

__all__ = [
    "AUTO_REPEATS",
    "FIRST",
    "FLOAT16_WEIGHTS",
    "GRAPH",
    "NOT_A_TENSOR",
    "Answer",
    "Argument",
    "Call",
    "Calls",
    "Cancel",
    "CheckEnded",
    "CheckReply",
    "CheckRequest",
    "Ending",
    "Hello",
    "ProtocolError",
    "RegimeRequest",
    "RunningOn",
    "Shutdown",
    "SnippetFailed",
    "TimingRequest",
    "TimingResult",
    "TimingRun",
    "Value",
    "decode_answer",
    "decode_request",
]
