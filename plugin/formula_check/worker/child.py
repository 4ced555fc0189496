"""The worker process: imports TensorFlow once, then runs snippets on request.

Run as ``python -m formula_check.worker.child PROJECT_ROOT [TEMPORARY_FOLDER]``. It reads
requests on stdin and answers on a private copy of stdout; the snippet's own prints go to a
buffer returned with the answer. This is the only module of the package that imports TensorFlow.
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
from typing import IO, Any

# Pinned before TensorFlow is imported: oneDNN changes the bits, and its notice is noise.
os.environ["TF_ENABLE_ONEDNN_OPTS"] = "0"
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

from . import isolation, protocol
from .paths import scrubbed


def main(argv: list[str] | None = None) -> int:
    """Serve requests until stdin closes or a ``shutdown`` request arrives."""
    args = sys.argv[1:] if argv is None else argv
    root = Path(args[0]).resolve() if args else Path.cwd()
    answers = _private_stdout()
    # Unbuffered: a cancel that comes during a check is seen by select on fd 0, not left
    # unread behind the request in a buffer
    requests = open(0, "rb", buffering=0, closefd=False)  # noqa: SIM115  (fd 0, for life)
    try:
        from . import execution  # noqa: F401  (TensorFlow: the import is the point)
    except ImportError as exc:  # TensorFlow missing: say so instead of dying
        protocol.write_message(answers, {"op": "hello", "ok": False, "error": str(exc)})
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
    from .execution import begin, prepare_check_process, run_check

    _stdin_from_nowhere()
    session, environment = begin(root, scratch)
    checks = isolation.CheckProcesses(
        lambda header, arrays: run_check(session, header, arrays),
        lambda: prepare_check_process(session, environment),
        conversation=sorted({requests.fileno(), answers.fileno()}),
        scratch=environment["scratch"],
    )

    def running_on() -> None:  # the parent asked to cancel a check that will not stop
        answers.write(protocol.encode({"op": "running on"}))
        answers.flush()

    def answer(header: dict[str, Any], arrays: dict[str, Any]) -> bytes:
        limit = header.get("time_limit")
        return checks.run(
            header,
            arrays,
            time_limit=float(limit) if isinstance(limit, (int, float)) else None,
            interrupts=(requests.fileno(), lambda: _cancel_asked(requests), running_on),
        )

    try:
        say_hello(answers, environment)
        checks.tidy()  # the first check's process, forked and made ready now
        return serve(requests, answers, answer, after=checks.tidy)
    finally:
        checks.close()
        shutil.rmtree(environment["scratch"], ignore_errors=True)


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
        header, _ = protocol.read_message(requests)
    except (EOFError, protocol.ProtocolError, OSError):
        return True
    return header.get("op") in {"cancel", "shutdown"}


def say_hello(answers: IO[bytes], environment: dict[str, Any]) -> None:
    """The first message of a worker: TensorFlow is imported, here is what it runs on."""
    protocol.write_message(answers, {"op": "hello", "ok": True, **environment})


def serve(
    requests: IO[bytes],
    answers: IO[bytes],
    answer: Callable[[dict[str, Any], dict[str, Any]], bytes],
    after: Callable[[], object] = lambda: None,
) -> int:
    """Answer requests, each with a whole encoded message, until EOF or ``shutdown``; returns
    the exit code. What is left to do after an answer (``after``) waits until it is sent."""
    while True:
        try:
            header, arrays = protocol.read_message(requests)
        except EOFError:
            return 0
        if header.get("op") == "shutdown":
            return 0
        if header.get("op") == "cancel":  # came as its check ended: nothing left to stop
            continue
        try:
            message = answer(header, arrays)
        except Exception as exc:  # the checker's own fault, not the snippet's: say so, go on
            traceback.print_exc()  # to the worker's log, which names machine paths
            message = protocol.encode(internal_error(exc))
        answers.write(message)
        answers.flush()
        after()


def internal_error(exc: Exception) -> dict[str, Any]:
    """The answer to a request the worker itself failed on (a bug of the checker). Its
    message goes on a card, which is published: no folder of this machine in it."""
    said = scrubbed(f"{type(exc).__name__}: {exc}", os.getcwd())
    return {
        "ok": False,
        "type": "InternalError",
        "message": (
            f"formula-check could not run this block ({said}); this is a bug in "
            "formula-check, not in the code under test: please report it"
        ),
    }


def _private_stdout() -> IO[bytes]:
    """Keep fd 1 for answers only; anything else printed to it goes to stderr instead."""
    private = os.fdopen(os.dup(1), "wb", buffering=0)
    os.dup2(2, 1)
    sys.stdout = io.TextIOWrapper(os.fdopen(1, "wb", buffering=0), write_through=True)
    return private


if __name__ == "__main__":
    with contextlib.suppress(KeyboardInterrupt):
        sys.exit(main())
