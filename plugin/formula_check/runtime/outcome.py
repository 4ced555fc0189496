"""What the pool hands back for one request: the worker's answer, or why none came."""

from __future__ import annotations

import signal
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

from formula_check.messages import CheckReply, SnippetFailed
from formula_check.model import Array, frozen_map

CANCELLED = "not checked to the end: its result was no longer wanted"


@dataclass(frozen=True)
class Reply:
    """What came back for one request: an answer (``ok``), or why none came."""

    outcome: Literal["ok", "timeout", "crash", "cancelled"]
    answer: CheckReply | SnippetFailed | None = None
    """The worker's answer; None unless ``ok``."""
    arrays: Mapping[str, Array] = field(default_factory=frozen_map)
    detail: str = ""
    """Why no answer came."""
    written_files: tuple[str, ...] = ()
    """Project files the check wrote, answered or not."""
    startup: float = 0.0
    """Seconds this request spent starting its worker (importing TensorFlow, or a fork)."""
    queued: float = 0.0
    """Seconds it waited for a worker to be free (all were busy with other requests)."""


STOPPED = Reply("crash", detail="the checker was stopped while this check ran")


def describe_exit(code: int | None) -> str:
    """A process's exit status in words."""
    if code is None:
        return "exit status unknown"
    if code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exit code {code}"
