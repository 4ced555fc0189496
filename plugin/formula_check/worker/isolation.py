"""One check, one process: every check runs in a child forked from the warm worker, and the
child ends with its check.

The warm worker has imported TensorFlow and run one small check of its own (the warm-up), so
a child forked from it starts with TensorFlow's runtime ready: about 20 ms of fork, check and
exit on a small block instead of seconds of import. Whatever the check then does to its
process (patches TensorFlow, Keras, NumPy or this package, sets a precision policy or a
random state, changes the working folder or the environment, starts threads, imports modules)
ends with the child, so no check can change another's verdict.

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

Processes a check starts are ended with it, however they detach: the check's process and the
warm worker are *child subreapers* (Linux), so an orphan of the snippet, also one that called
``setsid``, is re-parented to them instead of to init, and :func:`end_children` kills each
until none is left.

The child answers through a pipe of its own, read whole by the warm worker before it is
passed on, so a child that dies half-way through its answer never leaves the worker's own
conversation with half a message in it.
"""

from __future__ import annotations

import contextlib
import ctypes
import gc
import os
import select
import shutil
import signal
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from . import protocol

_PR_SET_PDEATHSIG = 1
_PR_SET_CHILD_SUBREAPER = 36
_SWEEPS = 1000
"""Rounds of :func:`end_children` at most: each kills every child it finds, and only a child
killed in the previous round can hand it new ones (its own orphans)."""

_notes: int | None = None
"""In a check's process: where :func:`note_written` tells the warm worker what it wrote."""

Handler = Callable[[dict[str, Any], dict[str, Any]], tuple[dict[str, Any], dict[str, Any]]]


def _prctl(option: int, value: int) -> bool:
    """Linux's ``prctl``; False where it is missing or refused."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return bool(libc.prctl(option, value, 0, 0, 0) == 0)
    except (OSError, AttributeError):
        return False


def become_subreaper() -> bool:
    """Adopt this process's orphaned descendants (Linux 3.4+), so that they can be ended."""
    return _prctl(_PR_SET_CHILD_SUBREAPER, 1)


def die_with_parent(parent: int) -> None:
    """SIGKILL this process when ``parent`` dies; exit now if it already has."""
    _prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != parent:
        os._exit(70)


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


def note_written(path: str) -> None:
    """Tell the warm worker, at once, that the check wrote ``path`` (of the project): it is
    known even if the check then dies without an answer."""
    if _notes is not None:
        with contextlib.suppress(OSError):  # a full pipe loses a name, never the check
            os.write(_notes, path.encode("utf-8", "surrogateescape") + b"\n")


def _noted(fd: int) -> list[str]:
    """Every path :func:`note_written` sent down ``fd``."""
    data = bytearray()
    with contextlib.suppress(OSError):  # empty: nothing more to read
        while chunk := os.read(fd, 1 << 16):
            data += chunk
    return sorted({line.decode("utf-8", "replace") for line in data.splitlines() if line})


def children() -> list[int]:
    """This process's child processes, zombies included."""
    me = os.getpid()
    found: list[int] = []
    try:
        tasks = os.listdir(f"/proc/{me}/task")
    except OSError:
        return found
    for task in tasks:
        with contextlib.suppress(OSError, ValueError):
            text = Path(f"/proc/{me}/task/{task}/children").read_text(encoding="ascii")
            found.extend(int(pid) for pid in text.split())
    return found


def end_children(keep: frozenset[int] = frozenset()) -> int:
    """Kill and reap every child of this process but ``keep``, and every orphan that comes to
    us as they die, until none is left. Returns how many were ended."""
    ended = 0
    for _ in range(_SWEEPS):
        strays = [pid for pid in children() if pid not in keep]
        if not strays:
            break
        for pid in strays:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
        for pid in strays:
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pid, 0)
                ended += 1
    return ended


def run_isolated(
    handle: Handler,
    header: dict[str, Any],
    arrays: dict[str, Any],
    *,
    conversation: Sequence[int],
    scratch: str,
    time_limit: float | None,
    interrupts: tuple[int, Callable[[], bool], Callable[[], None]] | None = None,
) -> bytes:
    """Run ``handle`` on one request in a child of its own; the encoded answer to pass on.

    ``conversation`` are the warm worker's descriptors to its parent: the child closes them
    (a snippet reading stdin must not eat the next request). The child gets a temporary folder
    of its own inside ``scratch``, removed with it. With ``time_limit`` seconds gone and no
    answer, the child and all it started are killed and the answer says ``timeout``.

    ``interrupts`` is a descriptor that becomes readable when the parent asks to cancel the
    check, what reads that request (True: cancel), and what tells the parent the check runs
    on. A cancelled check is stopped and the answer says ``cancelled``, unless it has already
    written into the project: it then runs to its end, so that its result can be kept. (Under
    ``mkdocs serve`` its own write would otherwise cancel it, and each rebuild would run it and
    write again, for ever.)"""
    folder = tempfile.mkdtemp(prefix="check-", dir=scratch)
    reading, writing = os.pipe()
    notes_in, notes_out = os.pipe()
    os.set_blocking(notes_in, False)
    os.set_blocking(notes_out, False)
    warm = os.getpid()
    began = time.perf_counter()
    pid = os.fork()
    if pid == 0:  # pragma: no cover  (the child; measured through the parent's answers)
        global _notes  # noqa: PLW0603  (this process's own, set once as it starts)
        os.close(reading)
        os.close(notes_in)
        _notes = notes_out
        _child(handle, header, arrays, warm, conversation, folder, writing)
    os.close(writing)
    os.close(notes_out)
    written: list[str] = []
    try:
        message, why = _read_answer(reading, time_limit, (notes_in, written), interrupts)
    finally:
        os.close(reading)
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)  # answered, or given up on: it has nothing left to do
        status = _reap(pid)
        end_children()
        shutil.rmtree(folder, ignore_errors=True)
        written = sorted({*written, *_noted(notes_in)})
        os.close(notes_in)
    seconds = time.perf_counter() - began
    if message is not None:
        return message
    said = {"process_seconds": seconds, "written_files": written}
    if why in {"timeout", "cancelled"}:
        return protocol.encode({"op": why, **said})
    return protocol.encode({"op": "crash", "detail": _ended(status), **said})


def _child(
    handle: Handler,
    header: dict[str, Any],
    arrays: dict[str, Any],
    warm: int,
    conversation: Sequence[int],
    folder: str,
    writing: int,
) -> None:
    """The check's process: answer, end what the snippet started, exit. Never returns."""
    code = 0
    try:
        die_with_parent(warm)
        become_subreaper()
        null = os.open(os.devnull, os.O_RDWR)
        for fd in conversation:
            os.dup2(null, fd)
        os.close(null)
        os.environ["TMPDIR"] = folder
        tempfile.tempdir = folder
        from .child import internal_error

        try:
            message = protocol.encode(*handle(header, arrays))
        except Exception as exc:  # the checker's own fault: said as such, as before
            message = protocol.encode(internal_error(exc))
        _write_all(writing, message)
    except BaseException:  # nothing may unwind into the warm worker's code in this process
        code = 70
    finally:
        with contextlib.suppress(BaseException):
            end_children()
        os._exit(code)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]
    os.close(fd)


def _read_answer(
    fd: int,
    time_limit: float | None,
    notes: tuple[int, list[str]],
    interrupts: tuple[int, Callable[[], bool], Callable[[], None]] | None,
) -> tuple[bytes | None, str]:
    """The child's whole answer, or None and why not (``timeout``, ``cancelled`` or
    ``ended``). Ends when the message is complete, not at end of file: a process the snippet
    started may hold the pipe. Meanwhile what the child says it wrote is added to ``notes``."""
    deadline = None if time_limit is None else time.monotonic() + time_limit
    data = bytearray()
    expected = -1
    notes_in, written = notes
    watched = [fd, notes_in] + ([interrupts[0]] if interrupts else [])
    while expected < 0 or len(data) < expected:
        wait = None if deadline is None else deadline - time.monotonic()
        if wait is not None and wait <= 0:
            return None, "timeout"
        ready, _, _ = select.select(watched, [], [], wait)
        if notes_in in ready:
            noted = _noted(notes_in)
            written.extend(noted)
            if not noted:  # the child is gone, and every process it started
                watched.remove(notes_in)
        if interrupts and interrupts[0] in ready:
            watched.remove(interrupts[0])  # one request at a time: it is answered now
            if interrupts[1]():
                if not written:
                    return None, "cancelled"
                interrupts[2]()
        if fd not in ready:
            continue
        chunk = os.read(fd, 1 << 20)
        if not chunk:
            return None, "ended"
        data += chunk
        if expected < 0 and len(data) >= protocol.PREFIX_SIZE:
            try:
                expected = protocol.message_length(bytes(data[: protocol.PREFIX_SIZE]))
            except protocol.ProtocolError:
                return None, "ended"
    return bytes(data[:expected]), ""


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
