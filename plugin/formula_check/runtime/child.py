"""The worker process: imports TensorFlow once, then runs snippets on request.

Run as ``python -m formula_check.runtime.child PROJECT_ROOT [TEMPORARY_FOLDER]`` (spawned), or
forked ready from the zygote (:mod:`.zygote`), which calls :func:`run_worker`. It reads
requests on stdin and answers on a private copy of stdout; the snippet's own prints go to a
buffer returned with the answer. Its life: import, get ready, say :class:`~..messages.Hello`,
then answer each request (in a process of its own, :mod:`.isolation`) until the parent hangs
up or sends ``shutdown``.
"""

from __future__ import annotations

import contextlib
import io
import os
import shutil
import sys
import traceback
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import IO, cast

# Pinned before TensorFlow is imported: oneDNN changes the bits, and its notice is noise.
os.environ["TF_ENABLE_ONEDNN_OPTS"] = "0"
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

from formula_check import wire
from formula_check.messages import Cancel, CheckRequest, Hello, RunningOn, Shutdown, decode_request
from formula_check.model import Array
from formula_check.runtime import isolation
from formula_check.runtime.faults import internal_error
from formula_check.runtime.read_buffer import Unshared

Answerer = Callable[[CheckRequest, dict[str, Array]], isolation.Message]
"""Answers one check request with a whole encoded message."""
Forwarder = Callable[[CheckRequest, dict[str, Array], isolation.Message], isolation.Message]
"""Answers one check request, given also as it came (encoded), with a whole encoded
message."""


def main(argv: list[str] | None = None) -> int:
    """Serve requests until stdin closes or a ``shutdown`` request arrives."""
    args = sys.argv[1:] if argv is None else argv
    root = Path(args[0]).resolve() if args else Path.cwd()
    answers = _private_stdout()
    # Unbuffered: a cancel that comes during a check is seen by select on fd 0, not left
    # unread behind the request in a buffer
    requests = open(0, "rb", buffering=0, closefd=False)  # noqa: SIM115  (fd 0, for life)
    try:
        from formula_check.runtime import warm_worker as execution  # noqa: F401  (TensorFlow: the import is the point)
    except ImportError as exc:  # TensorFlow missing: say so instead of dying
        wire.write_message(answers, Hello(ok=False, error=str(exc)).encode())
        return 3
    warnings.simplefilter("ignore")
    return run_worker(root, requests, answers, args[1] if args[1:] else None)


def run_worker(
    root: Path, requests: IO[bytes], answers: IO[bytes], scratch: str | None = None
) -> int:
    """A worker's life once TensorFlow is imported: get ready, say hello, then answer each
    request from a process of its own (:mod:`.isolation`); at the end (the parent hung up),
    remove the worker's temporary folder, ``scratch`` (made by the parent; by the worker if
    None). A worker that is killed never gets here: its parent removes the folder."""
    from formula_check.runtime.warm_worker import begin, check, prepare_check_process

    _stdin_from_nowhere()
    session, hello = begin(root, scratch)
    checks = isolation.CheckProcesses(
        lambda request, arrays: check(session, request, arrays),
        lambda: prepare_check_process(session, hello),
        conversation=sorted({requests.fileno(), answers.fileno()}),
        scratch=hello.scratch,
    )

    def running_on() -> None:  # the parent asked to cancel a check that will not stop
        answers.write(wire.encode(RunningOn().encode()))
        answers.flush()

    def answer(
        request: CheckRequest, arrays: dict[str, Array], encoded: isolation.Message
    ) -> isolation.Message:
        return checks.run(
            request,
            arrays,
            time_limit=request.time_limit,
            interrupts=(requests.fileno(), lambda: _cancel_asked(requests), running_on),
            encoded=encoded,  # sent on as it came
        )

    try:
        wire.write_message(answers, hello.encode())
        checks.tidy()  # the first check's process, forked and made ready now
        return forward(requests, answers, answer, after=checks.tidy)
    finally:
        checks.close()
        shutil.rmtree(hello.scratch, ignore_errors=True)


def _stdin_from_nowhere() -> None:
    """A forked worker has no fd 0 (the zygote's conversation was there): give it /dev/null,
    so that a snippet reading stdin reads nothing, and no pipe of ours is made there (the
    check's process would take it for stdin)."""
    try:
        os.fstat(0)
    except OSError:
        os.open(os.devnull, os.O_RDONLY)  # the lowest free descriptor: 0


def _cancel_asked(requests: IO[bytes]) -> bool:
    """Read what the parent sent while a check ran: is it ``cancel`` (or a hang-up)?"""
    try:
        header, _ = wire.read_message(requests)
    except (EOFError, wire.ProtocolError, OSError):
        return True
    try:
        return isinstance(decode_request(header), (Cancel, Shutdown))
    except wire.ProtocolError:
        return False  # not a cancel: one request at a time, and this one is answered


def serve(
    requests: IO[bytes],
    answers: IO[bytes],
    answer: Answerer,
    after: Callable[[], object] = lambda: None,
) -> int:
    """Answer requests, each with a whole encoded message, until EOF or ``shutdown``; returns
    the exit code. What is left to do after an answer (``after``) waits until it is sent."""
    return forward(requests, answers, lambda request, arrays, _: answer(request, arrays), after)


def forward(
    requests: IO[bytes],
    answers: IO[bytes],
    answer: Forwarder,
    after: Callable[[], object] = lambda: None,
) -> int:
    """:func:`serve`, handing ``answer`` each request also as it came, to be sent on."""
    kept = Unshared()  # each request read into the same pages, which no check inherits
    while True:
        try:
            encoded = read_whole(requests, kept)
        except EOFError:
            return 0
        # its arrays are views of the bytearray read (wire.decode): none copied, none used
        # here, where the request is sent on as it came
        header, arrays = wire.decode(encoded)
        try:
            request = decode_request(header)
            if isinstance(request, Shutdown):
                return 0
            if isinstance(request, Cancel):  # came as its check ended: nothing left to stop
                continue
            message = answer(request, arrays, encoded)
        except Exception as exc:  # the checker's own fault, not the snippet's: say so, go on
            traceback.print_exc()  # to the worker's log, which names machine paths
            message = wire.encode(internal_error(exc).encode())
        answers.write(message)
        answers.flush()
        after()


def read_whole(stream: IO[bytes], into: Unshared | None = None) -> memoryview:
    """One whole message, read into one writable buffer of its length (a request may carry
    megabytes of weights: read once, never joined from chunks, nor zeroed before it is read
    into): ``into``'s, where given (overwritten by the next message read into it), else a
    new one. :class:`EOFError` if the stream closed before one began;
    :class:`~..wire.ProtocolError` if it is not a message, or closed half-way."""
    prefix = bytearray(wire.PREFIX_SIZE)
    got = _fill(stream, memoryview(prefix), 0)
    if got == 0:
        raise EOFError("stream closed")
    if got < len(prefix):
        raise wire.ProtocolError("truncated message prefix")
    size = wire.message_length(bytes(prefix))
    message = wire.unfilled(size) if into is None else into.room(size)
    message[:got] = prefix
    if _fill(stream, message, got) < len(message):
        raise wire.ProtocolError("stream closed before the end of a message")
    return message


def _fill(stream: IO[bytes], buffer: memoryview, start: int) -> int:
    """Fill ``buffer`` from ``start`` on, until it is full or the stream ends; where it
    got to."""
    reader = cast("io.RawIOBase", stream)  # files and sockets read into a buffer
    while start < len(buffer):
        count = reader.readinto(buffer[start:])
        if not count:
            break
        start += count
    return start


def _private_stdout() -> IO[bytes]:
    """Keep fd 1 for answers only; anything else printed to it goes to stderr instead."""
    private = os.fdopen(os.dup(1), "wb", buffering=0)
    os.dup2(2, 1)
    sys.stdout = io.TextIOWrapper(os.fdopen(1, "wb", buffering=0), write_through=True)
    return private


if __name__ == "__main__":
    with contextlib.suppress(KeyboardInterrupt):
        sys.exit(main())
