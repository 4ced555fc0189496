"""The process an oracle of one's own is imported and called in; the build's end of it is
:mod:`..oracles.own_process`.

Started by the build as ``python -m formula_check.runtime.oracle_server start REFERENCE ROOT
FOLDER BUILD_PID [ENV ...]``, with the build's environment and in the project ``ROOT``: it
starts itself again at once (``serve``) with the environment a check gets
(:func:`.environment.worker_environment`, with the project's ``env`` names), so that no
variable of the build's others (its tokens) is in the memory or the ``/proc`` entry of the
process that imports the project's code. Then it dies with the build (``BUILD_PID`` 0: it
ends when the build hangs up), is not dumpable, is the subreaper of what its calls start,
and confines itself as a check's process does (:mod:`.confinement`: it writes only in
``FOLDER``, its temporary folder), all before it imports anything of the project. It
imports the module, sends the description of its oracle (or the error that says why there is
none), and answers each call of one of its callables.

Each call is answered by a process forked for it: it starts from the state right after the
import and ends with its answer; what it started is ended, and what it wrote in ``FOLDER``
removed, before the next call is read. So no call sees what an earlier one left, and the
order of a build's blocks changes no verdict.
"""

from __future__ import annotations

import contextlib
import gc
import os
import select
import shutil
import signal
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from typing import IO, Any

from formula_check import wire
from formula_check.errors import OracleError
from formula_check.runtime import reaping
from formula_check.runtime.confinement import confine
from formula_check.runtime.environment import worker_environment


def main(argv: list[str]) -> int:
    """``start``: start again with a check's environment; ``serve``: serve until the build
    hangs up."""
    step, reference, root, folder, build, *env = argv
    if step == "start":
        again = [sys.executable, "-m", __spec__.name, "serve", reference, root, folder, build]
        os.execve(sys.executable, again, worker_environment(env))  # noqa: S606  (ourselves)
    if int(build):  # none: the build ends it by hanging up (see OracleProcess)
        reaping.die_with_parent(int(build))
    reaping.become_subreaper()
    reaping.keep_private()
    requests, answers = _conversation()
    try:
        confine(folder)
    except OSError as exc:
        refused = f"the kernel refused to confine the process of {reference} ({exc.strerror})"
        wire.write_message(answers, {"error": refused})
        return 3
    os.environ["TMPDIR"] = tempfile.tempdir = folder
    callables = _describe(reference, root, answers)
    if callables is not None:
        gc.collect()
        gc.freeze()  # each call's process then copies no page the collector would touch
        _answer_calls(requests, answers, callables, folder)
    return 0


def _conversation() -> tuple[IO[bytes], IO[bytes]]:
    """Private copies of stdin and stdout, the build's requests and this process's answers;
    the module's prints go to stderr, and what reads stdin reads nothing."""
    requests = os.fdopen(os.dup(0), "rb")
    answers = os.fdopen(os.dup(1), "wb")
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    os.dup2(2, 1)
    return requests, answers


def _describe(reference: str, root: str, answers: IO[bytes]) -> list[Callable[..., Any]] | None:
    """Import the oracle and send its description; its callables, by their number in it."""
    from pathlib import Path

    from formula_check.oracles import own_process, registry
    from formula_check.snippets import file_digest

    packing = own_process.Packing(callables=[])
    try:
        oracle = registry.imported(reference, Path(root))
        described = own_process.pack(oracle, reference, packing)
    except OracleError as exc:
        wire.write_message(answers, {"error": exc.message})
        return None
    # Its module's file as imported: loaded again while it is the same, the oracle is kept
    where = getattr(sys.modules.get(reference.partition(":")[0]), "__file__", None)
    module = [where, file_digest(Path(where))] if where else None
    wire.write_message(answers, {"oracle": described, "module": module}, packing.arrays)
    return packing.callables


def _answer_calls(
    requests: IO[bytes], answers: IO[bytes], callables: list[Callable[..., Any]], folder: str
) -> None:
    """Answer each call from a process forked for it, until the build hangs up. The next
    call's process is forked as soon as a call is answered and the process it ran in is
    ended (with what it started, and what it wrote): the fork is paid while the build works
    between two calls, and no call's process meets another."""
    conversation = (requests, answers)
    call = _forked(callables, conversation)
    while True:
        try:
            request = _whole_message(requests)
            answer = call.answer(request, requests)
            if answer is None:
                answer = wire.encode({"error": _said(_ended(call.pid))})
            answers.write(answer)
            answers.flush()
        except (OSError, EOFError, wire.ProtocolError):  # the build hung up
            break
        _ended(call.pid)
        _emptied(folder)
        call = _forked(callables, conversation)
    _ended(call.pid)


@dataclass(frozen=True)
class _Call:
    """A call's process seen from the server: its pid, the pipe its request goes down and
    the one its answer comes up."""

    pid: int
    requests: int
    answers: int

    def answer(self, request: bytes, build: IO[bytes]) -> bytes | None:
        """Its whole answer to ``request``; None where it ended without one, or the ``build``
        hung up meanwhile (it sends nothing else while it waits for the answer)."""
        with os.fdopen(self.answers, "rb") as answers:
            try:
                sent = memoryview(request)
                while sent:
                    sent = sent[os.write(self.requests, sent) :]
                if build in select.select([answers, build], [], [])[0]:
                    return None
                return _whole_message(answers)
            except (OSError, EOFError, wire.ProtocolError):
                return None
            finally:
                os.close(self.requests)


def _forked(callables: list[Callable[..., Any]], conversation: tuple[IO[bytes], ...]) -> _Call:
    """A process for the next call, waiting for its request."""
    requests_out, requests_in = os.pipe()
    answers_out, answers_in = os.pipe()
    server = os.getpid()
    pid = os.fork()
    if pid == 0:  # pragma: no cover  (the call's process; measured through its answers)
        os.close(requests_in)
        os.close(answers_out)
        _call(callables, (requests_out, answers_in), server, conversation)
    os.close(requests_out)
    os.close(answers_in)
    return _Call(pid, requests_in, answers_out)


def _call(
    callables: list[Callable[..., Any]],
    pipes: tuple[int, int],
    server: int,
    conversation: tuple[IO[bytes], ...],
) -> None:
    """A call's process: wait for the request, answer it, exit. Never returns."""
    code = 0
    try:
        reaping.die_with_parent(server)
        null = os.open(os.devnull, os.O_RDWR)
        for stream in conversation:  # the build's conversation is the server's alone
            os.dup2(null, stream.fileno())
        with os.fdopen(pipes[0], "rb") as stream:
            try:
                request = _whole_message(stream)
            except EOFError:  # the server ended before a call came: so does this process
                return
        header, out = _answered(request, callables)
        with os.fdopen(pipes[1], "wb") as stream:
            for part in wire.encode_parts(header, out):
                stream.write(part)
    except BaseException:  # nothing may unwind into the server's loop in this process
        code = 70
        with contextlib.suppress(BaseException):
            import traceback

            traceback.print_exc()
    finally:
        os._exit(code)


def _answered(
    request: bytes, callables: list[Callable[..., Any]]
) -> tuple[dict[str, Any], dict[str, Any]]:
    """The answer to one call: its value, or what it raised; the random generators it was
    given, as far as it moved them."""
    from formula_check.lazy import numpy as np
    from formula_check.oracles import own_process

    header, arrays = wire.decode(request)
    np.seterr(**header["errors"])  # as the build's caller has them (an errstate)
    given: list[Any] = []
    args = own_process.unpack(header["args"], arrays, callables.__getitem__, given)
    packing = own_process.Packing()
    reply: dict[str, Any] = {}
    try:
        value = callables[header["call"]](*args)
    except BaseException as exc:  # the oracle's own: raised again in the build
        reply["raised"] = own_process.raised(exc)
    else:
        try:
            reply["value"] = own_process.pack(value, "its result", packing)
        except OracleError as exc:
            return {"error": exc.message}, {}
    reply["generators"] = [
        own_process.pack(g.bit_generator.state, "a generator", packing) for g in given
    ]
    return reply, packing.arrays


def _whole_message(stream: IO[bytes]) -> bytes:
    """One message, as it came; :class:`EOFError` at the end of ``stream``."""
    prefix = stream.read(wire.PREFIX_SIZE)
    if not prefix:
        raise EOFError
    rest = wire.message_length(prefix) - len(prefix)
    message = prefix + stream.read(rest)
    if len(message) != len(prefix) + rest:
        raise wire.ProtocolError("the message ended early")
    return message


def _ended(pid: int) -> int | None:
    """End the call's process and every process it left; its exit status."""
    with contextlib.suppress(OSError):
        os.kill(pid, signal.SIGKILL)
    try:
        _, status = os.waitpid(pid, 0)
    except ChildProcessError:
        return None
    reaping.end_children()
    return os.waitstatus_to_exitcode(status)


def _said(status: int | None) -> str:
    if status is not None and status < 0:
        return f"the process of its call was killed by signal {-status} before it answered"
    return f"the process of its call ended (exit status {status}) before it answered"


def _emptied(folder: str) -> None:
    """Remove what a call wrote in the temporary folder: the next call finds it empty."""
    with contextlib.suppress(OSError), os.scandir(folder) as entries:
        for entry in entries:
            if entry.is_dir(follow_symlinks=False):
                shutil.rmtree(entry.path, ignore_errors=True)
            else:
                with contextlib.suppress(OSError):
                    os.unlink(entry.path)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
