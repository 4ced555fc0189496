"""A snippet's exception, caught in the phase it happened in and said as a card shows it:
its line in the snippet, its traceback without the checker's frames or a machine's paths."""

from __future__ import annotations

import contextlib
import os
import traceback
from collections.abc import Iterator

from formula_check.messages import CheckRequest, SnippetFailed
from formula_check.model import strip_ansi
from formula_check.paths import CHECKER, scrubbed, shown_path
from formula_check.sinks import Sink, for_sink

MAX_TEXT = 4000
"""The most characters of printed output or of a traceback a reply carries."""


class SnippetRaised(Exception):  # noqa: N818  (a signal carrying the user error, not an error of ours)
    """Wraps an exception from user code with the phase it happened in."""

    def __init__(self, phase: str, error: BaseException) -> None:
        super().__init__(phase)
        self.phase = phase
        self.error = error


@contextlib.contextmanager
def phase(name: str) -> Iterator[None]:
    """Run user code: what it raises becomes a :class:`SnippetRaised` in phase ``name``."""
    try:
        yield
    except SnippetRaised:
        raise
    except BaseException as exc:  # user code may raise anything, SystemExit and
        # KeyboardInterrupt included: a check's process is in a session of its own, so a real
        # Ctrl-C never reaches it (it is stopped by its parent), and one raised is the code's
        raise SnippetRaised(name, exc) from exc


def failure(raised: SnippetRaised, request: CheckRequest) -> SnippetFailed:
    """The reply saying the snippet raised ``raised``."""
    error = raised.error
    file, line = _snippet_line(error, request.filename, request.root)
    frames = _shown_traceback(error, request.root)
    # A SyntaxError's str() repeats a mangled filename; its bare msg is what helps.
    message = error.msg if isinstance(error, SyntaxError) else said(error)
    return SnippetFailed(
        phase=raised.phase,
        type=type(error).__name__,
        # its message may name a file (a missing one): shown as the frames show theirs
        message=clean(scrubbed(message, request.root)) or type(error).__name__,
        line=line,
        file=file,
        traceback=clean(scrubbed("".join(frames[-6:]), request.root))[-MAX_TEXT:],
    )


def said(error: BaseException) -> str:
    """An exception's message; its own ``__str__`` may fail, and that is the snippet's doing."""
    try:
        return str(error)
    except Exception as inner:  # any failure of user code is reported, never raised
        return f"(its message could not be read: {type(inner).__name__} in its __str__)"


def _shown_traceback(error: BaseException, root: str) -> list[str]:
    """The traceback a card shows: without the checker's own frames, and with no path of
    the build machine (cards are published). A project file is shown relative to the
    project, an installed module from its package, anything else by its name alone."""
    shown = traceback.TracebackException.from_exception(error)
    seen: set[int] = set()
    pending = [shown]
    while pending:
        current = pending.pop()
        if id(current) in seen:
            continue
        seen.add(id(current))
        if getattr(current, "filename", None):  # a SyntaxError prints the file it names
            current.filename = shown_path(str(current.filename), root)
        current.stack = traceback.StackSummary.from_list(
            [
                (shown_path(frame.filename, root), frame.lineno or 0, frame.name, frame.line)
                for frame in current.stack
                if not frame.filename.startswith(CHECKER)
            ]
        )
        grouped = getattr(current, "exceptions", None) or ()  # an ExceptionGroup's
        linked = (current.__cause__, current.__context__, *grouped)
        pending.extend(e for e in linked if e is not None)
    return list(shown.format())


def _snippet_line(error: BaseException, filename: str, root: str) -> tuple[str, int]:
    """The innermost frame in the snippet (or, for a module, in the project's own files)."""

    def ours(name: str) -> bool:
        if filename:
            return name == filename
        return bool(root) and name.startswith(root + os.sep) and "site-packages" not in name

    if isinstance(error, SyntaxError) and error.filename and ours(error.filename):
        return error.filename, int(error.lineno or 0)
    found = ("", 0)
    for frame in traceback.extract_tb(error.__traceback__):
        if ours(frame.filename):
            found = (frame.filename, frame.lineno or 0)
    return found


def clean(text: str) -> str:
    r"""``text`` as a reply may carry it: no terminal colours, at most ``MAX_TEXT`` long, and
    a lone surrogate (``raise ValueError("\ud800")``) shown as U+FFFD, so that the result
    and its cache entry hold text every writer can write."""
    return for_sink(strip_ansi(text), Sink.UTF8)[:MAX_TEXT]
