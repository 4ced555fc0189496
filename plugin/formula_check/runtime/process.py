"""One worker seen from the build: a process that keeps TensorFlow imported between checks.

States: *not started* (no process: the next request starts one), *running* (it said hello;
a request is sent and its answer awaited), and *closed* (for good: a request is refused, a
start fails). A check that times out, is cancelled or kills the worker stops the process:
the worker is *not started* again, and the next request starts a fresh one (a fork from the
zygote, or a new import where there is none).

Who calls what: the pool borrows a worker for one request at a time (:meth:`Worker.request`,
which starts it if need be, or :meth:`Worker.start` ahead of any request); any thread may
:meth:`Worker.close` it at any moment (Ctrl-C, the end of a build), and the start or the
request under way then ends at once with a :class:`~..errors.WorkerError` or a ``crash``.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import IO, Any, TypeVar

from formula_check import wire
from formula_check.errors import MissingTensorFlowError, WorkerError
from formula_check.messages import (
    Answer,
    Cancel,
    CheckEnded,
    CheckRequest,
    Hello,
    RunningOn,
    decode_answer,
)
from formula_check.model import Array
from formula_check.paths import SCRATCH_PREFIX, scrubbed
from formula_check.results import Environment
from formula_check.runtime.environment import worker_environment
from formula_check.runtime.forked import ForkedProcess
from formula_check.runtime.limits import CANCEL_GRACE, POLL, STARTUP_TIMEOUT, WORKER_GRACE
from formula_check.runtime.memory import MemoryWatch
from formula_check.runtime.outcome import CANCELLED, STOPPED, Reply, describe_exit
from formula_check.runtime.reaping import keep_private
from formula_check.runtime.stderr_log import StderrLog
from formula_check.runtime.zygote_client import CLOSED, Zygote

M = TypeVar("M")
Received = Reply | tuple[M, dict[str, Array]]
"""An answer and its arrays, or why none came."""


class Worker:
    """One worker process; see the module's docstring."""

    def __init__(
        self,
        root: Path,
        python: str | None = None,
        memory_limit_mb: int = 0,
        zygote: Zygote | None = None,
        env: tuple[str, ...] = (),
    ) -> None:
        self.root = root
        self.env = env
        self.python = python or sys.executable
        self.zygote = zygote
        self.closed = False
        self.process: subprocess.Popen[bytes] | ForkedProcess | None = None
        self.hello: Hello | None = None
        """What the running process said when it started."""
        self.started_at = 0.0
        self.memory = MemoryWatch(memory_limit_mb)
        self.stderr_log = StderrLog()
        self.scratch: Path | None = None
        """The worker's private temporary folder, removed when it stops."""
        self.log_offset = 0
        """Where the stderr log stood when the request now running was sent."""
        self.cancel_asked = False
        """The request now running was asked to cancel."""
        self._killing = threading.Lock()
        self._starting = False

    @property
    def environment(self) -> Environment:
        """What its checks run on (empty until it has said hello)."""
        return self.hello.environment if self.hello is not None else Environment()

    @property
    def memory_limit_mb(self) -> int:
        """The most memory its tree may hold (0: no limit)."""
        return self.memory.limit_mb

    @property
    def peak_rss_kb(self) -> int:
        """The largest resident size its tree reached."""
        return self.memory.peak_kb

    @property
    def started(self) -> bool:
        """Has it a process, running or not yet known to have ended? Asks nobody (a forked
        worker's :attr:`alive` may ask its zygote), so it is safe under a lock."""
        return self.process is not None

    @property
    def alive(self) -> bool:
        """Is the process running?"""
        process = self.process  # read once: another thread's kill may clear it
        return process is not None and process.poll() is None

    def start(self) -> None:
        """Fork or spawn the process and wait for its hello (TensorFlow imported).

        A worker closed meanwhile (Ctrl-C during a background start) starts nothing, and a
        process that came up as it closed is killed: none outlives its pool."""
        with self._killing:
            if self.closed:
                raise WorkerError(CLOSED)
            self._starting = True  # a close now leaves the log to us: a fork may be using it
        try:
            self._start()
        finally:
            if self.closed:
                self.kill()  # what a close that came before it existed could not stop
            with self._killing:
                self._starting = False
                if self.closed:
                    self.stderr_log.close()

    def _start(self) -> None:
        self.kill()  # the process that ended on its own: reaped, and its folder removed
        # The build's environment holds its secrets, and a check runs as its user: out of
        # the check's reach (.reaping), from before the first check can run
        keep_private()
        # The worker's private temporary folder is made here, not by the worker: one stopped
        # before its hello leaves no folder behind that nothing knows of.
        scratch = self.scratch = Path(tempfile.mkdtemp(prefix=SCRATCH_PREFIX))
        self.process = self._forked(scratch) or self._spawned(scratch)
        if self.closed:  # closed while it started: the close found no process to stop yet
            self.kill()
            raise WorkerError(CLOSED)
        self.started_at = time.monotonic()
        got = self._receive(STARTUP_TIMEOUT, Hello.decode)
        if isinstance(got, Reply):
            self.kill()
            raise WorkerError(
                f"the TensorFlow worker did not start: {got.detail}\n{self.stderr_tail()}"
            )
        hello, _ = got
        if not hello.ok:
            self.kill()
            raise MissingTensorFlowError(self.python)
        if self.closed:
            self.kill()
            raise WorkerError(CLOSED)
        self.hello = hello

    def _forked(self, scratch: Path) -> ForkedProcess | None:
        """A process forked by the zygote; None where there is none, or it is broken."""
        if self.zygote is None or self.zygote.failed:
            return None
        try:
            return self.zygote.fork(self.new_stderr_log(), scratch)
        except MissingTensorFlowError:
            raise
        except (WorkerError, ValueError):  # a broken zygote: spawn instead
            if self.closed or self.zygote.closed:
                raise WorkerError(CLOSED) from None
        return None

    def _spawned(self, scratch: Path) -> subprocess.Popen[bytes]:
        """A process of its own, which imports TensorFlow itself."""
        try:
            return subprocess.Popen(
                [self.python, "-m", "formula_check.runtime.child", str(self.root), scratch],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=self.new_stderr_log(),
                cwd=self.root,
                env=worker_environment(self.env),
                start_new_session=True,
            )
        except OSError as exc:  # no such Python, no memory to fork...
            raise WorkerError(f"the TensorFlow worker could not be started: {exc}") from None

    def new_stderr_log(self) -> IO[bytes]:
        """A fresh scratch file for the worker's stderr, read back when it dies."""
        with self._killing:  # never opened after a close: it would stay open
            if self.closed:
                raise WorkerError(CLOSED)
            return self.stderr_log.fresh()

    def stderr_tail(self, limit: int = 1500, since: int = 0) -> str:
        """The end of what the worker wrote to stderr from byte ``since`` on."""
        return self.stderr_log.tail(limit, since)

    def request(
        self,
        request: CheckRequest,
        arrays: Mapping[str, Array],
        timeout: float,
        cancelled: Callable[[], bool] = lambda: False,
    ) -> Reply:
        """Send one request and wait up to ``timeout`` seconds for its answer, or until it is
        ``cancelled``: then the worker is stopped, as on a timeout."""
        if self.closed:
            return Reply("crash", detail="the checker was stopped before this check ran")
        startup = 0.0
        if not self.alive:
            began = time.perf_counter()
            self.start()
            startup = time.perf_counter() - began
        process = self.process  # read once: a close from another thread clears it
        if process is None or process.stdin is None:
            return STOPPED
        # The worker stops a check that overruns its time itself, and stays warm; the pool
        # stops the worker only if that answer, too, is late.
        header = request.with_time_limit(timeout).encode()
        self.log_offset = self.stderr_log.size()
        self.cancel_asked = False
        try:
            wire.write_message(process.stdin, header, arrays)
        except OSError as exc:  # its end of the pipe is gone: it died
            reply = self._crashed(f"the worker stopped accepting requests ({exc})")
        except ValueError:
            if not (self.closed or process.stdin.closed):
                raise  # a request that cannot be encoded: our bug, not a stop
            reply = STOPPED  # our end was closed under us: the pool was shut
        else:
            got = self._receive(timeout + WORKER_GRACE, decode_answer, cancelled)
            reply = self._settled(got, timeout)
        return dataclasses.replace(reply, startup=startup)

    def _settled(self, got: Received[Answer], timeout: float) -> Reply:
        """The reply to a check: its answer, or what the pool says of a check whose own
        process timed out, was cancelled or died (the worker itself lives on)."""
        if isinstance(got, Reply):
            return got
        answer, arrays = got
        assert not isinstance(answer, RunningOn)  # read on by _receive
        if not isinstance(answer, CheckEnded):
            return Reply("ok", answer, arrays, written_files=answer.written_files)
        written = answer.written_files
        if answer.how == "cancelled":
            return Reply("cancelled", detail=CANCELLED, written_files=written)
        if answer.how == "timeout":
            detail = f"no answer within {timeout:g} s; its process was stopped"
            return Reply("timeout", detail=detail, written_files=written)
        tail = scrubbed(self.stderr_tail(600, since=self.log_offset), str(self.root))
        said = f"; it said: {tail}" if tail else ""
        return Reply("crash", detail=f"{answer.detail}{said}", written_files=written)

    def _receive(
        self,
        timeout: float,
        decode: Callable[[Mapping[str, Any]], M],
        cancelled: Callable[[], bool] = lambda: False,
    ) -> Received[M]:
        process = self.process
        if process is None or process.stdout is None:
            return STOPPED  # closed by another thread: the pool was shut
        try:
            return self._wait_for_answer(process.stdout, timeout, decode, cancelled)
        except ValueError:  # its streams were closed under us, for the same reason
            return STOPPED

    def _wait_for_answer(
        self,
        stream: IO[bytes],
        timeout: float,
        decode: Callable[[Mapping[str, Any]], M],
        cancelled: Callable[[], bool],
    ) -> Received[M]:
        deadline = time.monotonic() + timeout
        told_at = 0.0  # when the worker was asked to cancel; 0 until then, and once it said
        # it runs on (a check that wrote into the project is not stopped: see .isolation)
        while True:
            now = time.monotonic()
            if now >= deadline:
                self.kill()
                detail = f"no answer within {timeout:g} s; the worker was restarted"
                return Reply("timeout", detail=detail)
            if told_at and now - told_at > CANCEL_GRACE:  # it did not say: stop it
                self.kill()
                return Reply("cancelled", detail=CANCELLED)
            if _readable(stream, min(POLL, deadline - now)):
                try:
                    header, arrays = wire.read_message(stream)
                    message = decode(header)
                except (EOFError, OSError, wire.ProtocolError):  # ECONNRESET, from a socket
                    return self._crashed("the worker died")
                if isinstance(message, RunningOn):
                    told_at = 0.0
                    continue
                self._over_memory()
                return message, arrays
            if cancelled() and not told_at and not self.cancel_asked:
                self.cancel_asked = True
                if not self._ask_to_cancel():
                    self.kill()
                    return Reply("cancelled", detail=CANCELLED)
                told_at = time.monotonic()
            if self._over_memory():
                self.kill()
                held, limit = self.memory.last_kb // 1024, self.memory_limit_mb
                detail = (
                    f"the worker and the processes of its check exceeded the memory limit of "
                    f"{limit} MiB together (memory_limit_mb), holding {held} MiB; a fresh worker "
                    "takes the next check"
                )
                return Reply("crash", detail=detail)

    def _ask_to_cancel(self) -> bool:
        """Ask the worker to stop the check it runs (it answers ``cancelled``, or runs on a
        check that already wrote into the project, see :mod:`.isolation`); False if it
        cannot be told, and must be stopped."""
        process = self.process
        if process is None or process.stdin is None:
            return False
        try:
            wire.write_message(process.stdin, Cancel().encode())
        except (OSError, ValueError):
            return False
        return True

    def _over_memory(self) -> bool:
        process = self.process
        return self.memory.over(process.pid if process is not None else None)

    def _crashed(self, what: str) -> Reply:
        process = self.process
        if process is None:
            return STOPPED
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(timeout=5)
        code = self.kill()
        tail = scrubbed(self.stderr_tail(600, since=self.log_offset), str(self.root))  # published
        said = f"; it said: {tail}" if tail else ""
        detail = f"{what} ({describe_exit(code)}){said}; a fresh worker takes the next check"
        return Reply("crash", detail=detail)

    def kill(self) -> int | None:
        """Stop the process group at once (a snippet may have started children).

        Returns the exit status; the pipes are closed and the worker is ready to restart.
        """
        with self._killing:  # a close (Ctrl-C) may meet a start or a timeout doing the same
            process = self.process
            code = None
            if process is not None:
                _kill_group(process)
                if self.process is process:
                    self.process = None
                code = process.returncode
            if self.scratch is not None and self.process is None:  # its worker is gone
                shutil.rmtree(self.scratch, ignore_errors=True)
                self.scratch = None
            return code

    def close(self) -> None:
        """Stop the worker at once, for good.

        The worker holds nothing worth flushing, and a polite exit of a process that has
        TensorFlow loaded takes about a second of teardown: killing it is both safe and fast.
        """
        self.closed = True
        self.kill()
        with self._killing:
            if not self._starting:  # a start in progress closes it as it ends
                self.stderr_log.close()


def _kill_group(process: subprocess.Popen[bytes] | ForkedProcess) -> None:
    """Kill ``process``'s group, reap it, and close our ends of its pipes."""
    if process.poll() is None:
        try:
            os.killpg(process.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            process.kill()
        process.wait()
    for stream in (process.stdin, process.stdout):
        if stream is not None:
            with contextlib.suppress(OSError):
                stream.close()


def _readable(stream: IO[bytes], timeout: float) -> bool:
    import select

    ready, _, _ = select.select([stream], [], [], timeout)
    return bool(ready)
