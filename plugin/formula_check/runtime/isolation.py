"""One check, one process: every check runs in a child forked from the warm worker, and the
child ends with its check.

The warm worker has imported TensorFlow and run a few small checks of its own (the warm-up,
:mod:`..execution.warming`), so a child forked from it starts with TensorFlow's runtime ready: about
20 ms of fork, check and exit on a small block instead of seconds of import. Whatever the
check then does to its process (patches TensorFlow, Keras, NumPy or this package, sets a
precision policy or a random state, changes the working folder or the environment, starts
threads, imports modules) ends with the child, so no check can change another's verdict.

TensorFlow's thread pools do not survive ``fork``: their threads stay in the parent, and a
child whose op is handed to one of them waits forever. So the warm worker computes on one
thread, with no intra-op pool to hand work to, from before its warm-up's first op
(:func:`prepare_warm_worker`), and each child starts an eager context of its own, whose
inter-op pool (where graph functions run their ops) is made in the child
(:func:`fresh_runtime`, about 10 ms: kernels, op registry and modules stay loaded and warm).
Every check therefore computes on one thread; checks run in parallel across workers instead.
Where TensorFlow lacks the way to start a new context, the warm worker runs no op before it
forks, and each check pays the runtime's start itself (about 0.1 s more). A GPU context does
not survive ``fork`` at all: where TensorFlow would use a GPU, the warm worker never touches
the device either, and each check's process starts the GPU runtime itself.

Where the kernel offers Landlock, a check's process confines itself as it starts, before its
first thread (:mod:`.confinement`): it writes only in its own temporary folder, reads no other
process's ``/proc`` entry, and can signal no process above it. Its temporary folder is
therefore made before its fork, with it.

Processes a check starts are ended with it, however they detach: the check's process and the
warm worker are *child subreapers* (Linux), so an orphan of the snippet, also one that called
``setsid``, is re-parented to them instead of to init, and :func:`.reaping.end_children` kills each
until none is left.

The child answers through a pipe of its own, read whole by the warm worker before it is
passed on, so a child that dies half-way through its answer never leaves the worker's own
conversation with half a message in it.
"""

from __future__ import annotations

import contextlib
import gc
import os
import select
import shutil
import signal
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from formula_check import wire
from formula_check.execution import project_reads
from formula_check.messages import CheckEnded, CheckReply, CheckRequest, Ending, SnippetFailed
from formula_check.model import Array
from formula_check.runtime.confinement import confine, granted_by_entry
from formula_check.runtime.faults import internal_error
from formula_check.runtime.read_buffer import Unshared
from formula_check.runtime.reaping import become_subreaper, die_with_parent, end_children

_ENDINGS: dict[str, Ending] = {"timeout": "timeout", "cancelled": "cancelled"}
"""How a check that gave no answer ended, by why :func:`_read_answer` stopped reading."""

ANSWER_LIMIT_MIB = 256
"""The most a check's answer may hold, in MiB: its outputs, the weights read back and what it
printed. The warm worker reads an answer whole before it passes it on, and the build reads it
whole again: an answer past this is refused from its first bytes (the length they claim),
its check stopped, and its block an error, so that a snippet returning gigabytes costs the
build nothing."""

Message = bytes | bytearray | memoryview
"""An encoded message (:mod:`..wire`), as read or to be written."""

Handler = Callable[
    [CheckRequest, dict[str, Array]], tuple[CheckReply | SnippetFailed, dict[str, Array]]
]
"""Answers a check request in a check's process: the reply, and its arrays."""


def gpu_present() -> bool:
    """Would TensorFlow use a GPU here? Asked without starting its runtime (which would make
    every forked check unable to use the device): a CUDA build, and a device file present."""
    import tensorflow as tf

    if not tf.test.is_built_with_cuda():
        return False
    if os.environ.get("CUDA_VISIBLE_DEVICES", None) in {"", "-1"}:
        return False
    return any(name.startswith("nvidia") and name[6:].isdigit() for name in os.listdir("/dev"))


def can_renew_runtime() -> bool:
    """Can a forked child start an eager context of its own (see :func:`fresh_runtime`)?"""
    from tensorflow.python.eager import context

    return callable(getattr(context, "_reset_context", None))


def prepare_warm_worker() -> None:
    """Before the warm worker's first op: one thread for TensorFlow's work, so that a child
    forked after the warm-up finds no pool whose threads it lacks."""
    import tensorflow as tf

    tf.config.threading.set_intra_op_parallelism_threads(1)
    tf.config.threading.set_inter_op_parallelism_threads(1)


def fresh_runtime() -> None:
    """In a check's process: a new eager context, whose pools are this process's own, on one
    thread as the warm worker's. TensorFlow's own helper for its tests, private:
    :func:`can_renew_runtime` tells whether it is there, and where it is not the warm worker
    runs no op before it forks."""
    from tensorflow.python.eager import context

    reset = getattr(context, "_reset_context", None)
    if callable(reset):
        reset()
        prepare_warm_worker()


def ready_to_fork() -> None:
    """After the warm-up: what the warm worker holds is kept out of the collector's way, so a
    child does not copy the pages the collector would touch."""
    gc.collect()
    gc.freeze()


def _noted(fd: int) -> list[str]:
    """Every path :func:`..execution.project_reads.note_written` sent down ``fd``."""
    data = bytearray()
    with contextlib.suppress(OSError):  # empty: nothing more to read
        while chunk := os.read(fd, 1 << 16):
            data += chunk
    return sorted({line.decode("utf-8", "replace") for line in data.splitlines() if line})


class CheckProcesses:
    """The processes a warm worker runs its checks in, one per check.

    The next check's process is forked ahead, as soon as a check starts (or, after a check
    that ended without an answer, in :meth:`tidy`): it runs ``prepare`` (a new eager
    context of its own) while the check before it runs, then waits for its request. The fork
    and the new context are thus paid between checks, not in one, and every check still
    starts from the same state: the warm worker's, plus the same ``prepare``.

    ``handle`` answers a request; ``conversation`` are the warm worker's descriptors to its
    parent, closed in every check's process (a snippet reading stdin must not eat the next
    request); each check gets a temporary folder of its own inside ``scratch``.
    """

    def __init__(
        self,
        handle: Handler,
        prepare: Callable[[], None],
        *,
        conversation: Sequence[int],
        scratch: str,
    ) -> None:
        self.handle = handle
        self.prepare = prepare
        self.conversation = list(conversation)
        self.scratch = scratch
        self.spare: _Process | None = None
        self.done: _Process | None = None
        """The last check's process: answered and killed, not yet reaped (:meth:`tidy`)."""
        self.answers = Unshared()
        """Where each answer is read (:mod:`.read_buffer`): passed on before the next is read."""
        self.unreadable: tuple[tuple[str, ...], tuple[int, ...]] = ((), ())
        """The folders the last request's check could not read (the cache), and when the
        folders above them changed (:func:`.confinement.granted_by_entry`): the next check's
        process is confined so as it is forked, and forked again where either differs."""

    def run(
        self,
        request: CheckRequest,
        arrays: dict[str, Array],
        *,
        time_limit: float | None,
        interrupts: tuple[int, Callable[[], bool], Callable[[], None]] | None = None,
        encoded: Message | None = None,
    ) -> Message:
        """Answer one request in a process of its own; the encoded answer to pass on. With
        ``time_limit`` seconds gone and no answer, the process and all it started are killed
        and the answer says ``timeout``.

        ``interrupts`` is a descriptor that becomes readable when the parent asks to cancel
        the check, what reads that request (True: cancel), and what tells the parent the
        check runs on. A cancelled check is stopped and the answer says ``cancelled``, unless
        it has already written into the project: it then runs to its end, so that its result
        can be kept. (Under ``mkdocs serve`` its own write would otherwise cancel it, and each
        rebuild would run it and write again, for ever.)

        ``encoded`` is the request as it came, sent on as it is instead of encoded again (it
        may hold megabytes of weights: each copy the warm worker makes is CPU, and writes to
        pages a check's process shares with it)."""
        self.tidy(fork_spare=False)
        if (request.unreadable, granted_by_entry(request.unreadable)) != self.unreadable:
            # the spare was confined for other folders, or before an entry came or went
            self._drop_spare()
        self.unreadable = request.unreadable, granted_by_entry(request.unreadable)
        process = self.spare or self._fork()
        self.spare = None
        began = time.perf_counter()
        # Where no kernel confines it, the check before may have removed it
        os.makedirs(process.folder, mode=0o700, exist_ok=True)
        message: Message | None = None
        why = "ended"
        try:
            process.send(wire.encode(request.encode(), arrays) if encoded is None else encoded)
            self.spare = self._fork()  # the next check's, made ready while this one runs
            message, why = _read_answer(process, time_limit, interrupts, self.answers)
        except OSError:  # it died before it took the request
            pass
        with contextlib.suppress(OSError):
            os.kill(process.pid, signal.SIGKILL)  # answered or given up on: nothing left to do
        self.done = process
        if message is not None:
            return message  # what is left to do waits until the answer is on its way
        status = self.tidy(fork_spare=False)
        seconds, written = time.perf_counter() - began, tuple(process.written)
        how = _ENDINGS.get(why, "crash")
        detail = why if why.startswith(_TOO_LARGE) else _ended(status) if how == "crash" else ""
        return wire.encode(CheckEnded(how, detail, seconds, written).encode())

    def tidy(self, *, fork_spare: bool = True) -> int | None:
        """Reap the last check's process, end every process it left, remove its folder; then
        (``fork_spare``) fork the next check's. Returns the last one's exit status."""
        status = None
        process, self.done = self.done, None
        if process is not None:
            status = _reap(process.pid)
            process.close()
        end_children(keep=frozenset([self.spare.pid] if self.spare else []))
        if process is not None and process.folder:
            shutil.rmtree(process.folder, ignore_errors=True)
        if fork_spare and self.spare is None:
            self.spare = self._fork()
        return status

    def close(self) -> None:
        """End every check's process, the spare too."""
        self.tidy(fork_spare=False)
        self._drop_spare()
        end_children()

    def _drop_spare(self) -> None:
        """End the process forked ahead for the next check, unused."""
        if self.spare is not None:
            with contextlib.suppress(OSError):
                os.kill(self.spare.pid, signal.SIGKILL)
            _reap(self.spare.pid)
            self.spare.close()
            shutil.rmtree(self.spare.folder, ignore_errors=True)
            self.spare = None

    def _fork(self) -> _Process:
        requests_out, requests_in = os.pipe()
        answers_out, answers_in = os.pipe()
        notes_out, notes_in = os.pipe()
        os.set_blocking(notes_out, False)
        os.set_blocking(notes_in, False)
        # Made before the fork: the check's process confines itself to it before it starts
        # a thread (.confinement), long before its request comes
        os.makedirs(self.scratch, mode=0o700, exist_ok=True)
        folder = tempfile.mkdtemp(prefix="check-", dir=self.scratch)
        warm = os.getpid()
        pid = os.fork()
        if pid == 0:  # pragma: no cover  (the child; measured through the parent's answers)
            for fd in (requests_in, answers_out, notes_out):
                os.close(fd)
            project_reads.tell_written_to(notes_in)
            self._child(warm, requests_out, answers_in, folder)
        for fd in (requests_out, answers_in, notes_in):
            os.close(fd)
        return _Process(pid, requests_in, answers_out, notes_out, folder)

    def _child(self, warm: int, requests: int, answers: int, folder: str) -> None:
        """A check's process: get ready, wait for the request, answer, end what the snippet
        started, exit. Never returns."""
        code = 0
        try:
            die_with_parent(warm)
            become_subreaper()
            unconfined = _confined(folder, self.unreadable[0])  # first: all made after is too
            os.environ["TMPDIR"] = folder
            tempfile.tempdir = folder
            null = os.open(os.devnull, os.O_RDWR)
            for fd in self.conversation:
                os.dup2(null, fd)
            os.close(null)
            self.prepare()
            with os.fdopen(requests, "rb") as stream:
                header, arrays = wire.read_message(stream)
            try:
                if unconfined is not None:
                    raise unconfined
                reply, out = self.handle(CheckRequest.decode(header), arrays)
                # Its arrays written from where they are: no copy of megabytes of outputs
                # and weights made only to be written and dropped
                message = wire.encode_parts(reply.encode(), out)
            except Exception as exc:  # the checker's own fault: said as such
                message = wire.encode_parts(internal_error(exc).encode())
            _write_all(answers, *message)
        except BaseException:  # nothing may unwind into the warm worker's code in this process
            code = 70
            with contextlib.suppress(BaseException):
                import traceback

                traceback.print_exc()  # to the worker's log
        finally:
            with contextlib.suppress(BaseException):
                end_children()
            os._exit(code)


def _confined(folder: str, unreadable: tuple[str, ...]) -> OSError | None:
    """Confine this process to ``folder``, reading nothing under ``unreadable``
    (:mod:`.confinement`); why not, where the kernel offers it and refuses: the check then
    runs no code, and says so."""
    try:
        confine(folder, unreadable)
    except OSError as exc:
        return OSError(
            f"the kernel refused to confine the check's process ({exc.strerror}): its code "
            "was not run"
        )
    return None


@dataclass
class _Process:
    """A check's process seen from the warm worker: its pipes, and what it said it wrote."""

    pid: int
    requests: int
    answers: int
    notes: int
    folder: str = ""
    written: list[str] = field(default_factory=list)

    def send(self, request: Message) -> None:
        """The request, whole."""
        _write_all(self.requests, request)
        self.requests = -1

    def noted(self) -> bool:
        """Read what it says it wrote; False once it and all it started are gone."""
        noted = _noted(self.notes)
        self.written = sorted({*self.written, *noted})
        return bool(noted)

    def close(self) -> None:
        self.noted()
        for fd in (self.requests, self.answers, self.notes):
            if fd >= 0:
                with contextlib.suppress(OSError):
                    os.close(fd)
        self.requests = self.answers = self.notes = -1


def _write_all(fd: int, *parts: wire.Buffer) -> None:
    """Write ``parts`` one after the other (none joined into a copy), then close ``fd``."""
    for part in parts:
        view = memoryview(part).cast("B")
        while view:
            view = view[os.write(fd, view) :]
    os.close(fd)


def _read_answer(
    process: _Process,
    time_limit: float | None,
    interrupts: tuple[int, Callable[[], bool], Callable[[], None]] | None,
    room: Unshared | None = None,
) -> tuple[memoryview | None, str]:
    """The check's whole answer, or None and why not (``timeout``, ``cancelled`` or
    ``ended``). Ends when the message is complete, not at end of file: a process the snippet
    started may hold the pipe. Meanwhile what the check says it wrote is read as it comes.

    Never read past the message, and the buffer read into (``room``'s, kept from one answer
    to the next; a new one without) is the answer passed on: an answer of megabytes
    (weights read back) is not copied again at its end. The buffer grows as the bytes come,
    never to the length the prefix claims: the snippet can write to the pipe too, and claim
    any length."""
    room = Unshared() if room is None else room
    deadline = None if time_limit is None else time.monotonic() + time_limit
    data = room.room(wire.PREFIX_SIZE)
    got = 0
    expected = wire.PREFIX_SIZE  # until the prefix says the whole length
    watched = [process.answers, process.notes] + ([interrupts[0]] if interrupts else [])
    while got < expected:
        wait = None if deadline is None else deadline - time.monotonic()
        if wait is not None and wait <= 0:
            return None, "timeout"
        ready, _, _ = select.select(watched, [], [], wait)
        if process.notes in ready and not process.noted():
            watched.remove(process.notes)  # the check is gone, and every process it started
        if interrupts and interrupts[0] in ready:
            watched.remove(interrupts[0])  # one request at a time: it is answered now
            if interrupts[1]():
                if not process.written:
                    return None, "cancelled"
                interrupts[2]()
        if process.answers not in ready:
            continue
        if got == len(data):  # twice the room, up to the whole message: no more than came
            data = room.room(min(expected, max(2 * got, _FIRST_READ)), keep=got)
        count = os.readv(process.answers, [data[got:]])
        if not count:
            return None, "ended"
        got += count
        if got == wire.PREFIX_SIZE == expected:
            try:
                expected = wire.message_length(bytes(data))
            except wire.ProtocolError:
                return None, "ended"
            if expected > ANSWER_LIMIT_MIB << 20:
                return None, f"{_TOO_LARGE} {_mib(expected)} MiB, {_OVER}"
    return data, ""


_TOO_LARGE = "its answer (the values it returned, the weights read back, what it printed) is"


_OVER = f"more than the {ANSWER_LIMIT_MIB} MiB a check may send back; its process was stopped"


def _mib(size: int) -> str:
    return f"{size / (1 << 20):.0f}"


_FIRST_READ = 1 << 16
"""Room for the first read of an answer past its prefix; doubled as the answer comes."""


def _reap(pid: int) -> int | None:
    try:
        _, status = os.waitpid(pid, 0)
    except ChildProcessError:
        return None
    return os.waitstatus_to_exitcode(status)


def _ended(status: int | None) -> str:
    """Why a check's process gave no answer, in words."""
    if status is None:
        return "the check's process ended without an answer"
    if status < 0:
        try:
            name = signal.Signals(-status).name
        except ValueError:
            name = f"signal {-status}"
        return f"the check's process was killed by {name} before it answered"
    return (
        f"the check's process exited (exit code {status}) before it answered: the code "
        "under test ended it (os._exit, or a library that exits)"
    )
