"""The parent's end of the zygote (:mod:`.zygote`): started once, then forks ready workers.

States (:class:`ZygoteState`), and the one method that moves to each:

- ``NONE``: no zygote runs; the next :meth:`Zygote.fork` starts one (``STARTING``).
- ``STARTING``: started, its hello (the TensorFlow import) awaited while holding the lock;
  ``READY`` once it said hello.
- ``READY``: forks workers. :meth:`Zygote.lost` (it died or stopped making sense) stops it:
  back to ``NONE``, or to ``BROKEN`` after :data:`ZYGOTE_RESTARTS` losses in a row.
- ``BROKEN`` (:meth:`Zygote.give_up`): it cannot work here; workers are spawned instead.

Apart from the state, :attr:`Zygote.closed` is a latch the pool sets as it closes, from
another thread and without the lock: :meth:`Zygote.shut` ends it for good, and no fork or
start follows. :meth:`Zygote.interrupt_start` only ends the wait of a start in progress;
:meth:`Zygote.stop` only ends the running process (its workers die with it).

Thread-safe: the workers of a pool start concurrently and share one zygote.
"""

from __future__ import annotations

import contextlib
import enum
import os
import select
import signal
import socket
import subprocess
import sys
import tempfile
import threading
from pathlib import Path
from typing import IO

from formula_check.errors import MissingTensorFlowError, WorkerError
from formula_check.runtime.control import WaitAnswer, ZygoteHello, fork_command, read_line, read_pid
from formula_check.runtime.environment import worker_environment
from formula_check.runtime.forked import ForkedProcess
from formula_check.runtime.limits import ANSWER_TIMEOUT, STARTUP_TIMEOUT
from formula_check.wire import ProtocolError

ZYGOTE_RESTARTS = 3
"""A zygote lost more often than this in a row, none of them having forked a worker, is given
up: workers are spawned instead."""
CLOSED = "the worker pool is closed"


class ZygoteState(enum.Enum):
    """Where the parent's zygote stands (see the module's docstring)."""

    NONE = "no zygote runs: the next fork starts one"
    STARTING = "started, its hello awaited"
    READY = "forks workers"
    BROKEN = "cannot work here: workers are spawned instead"


def fork_supported() -> bool:
    """Can workers be forked from a zygote here? (Linux: descriptor passing and /proc.)"""
    return (
        sys.platform == "linux"
        and hasattr(socket, "send_fds")
        and os.access("/proc/self/stat", os.R_OK)
    )


class Zygote:
    """The parent's end of the zygote; see the module's docstring for its states."""

    def __init__(self, root: Path, python: str | None = None, env: tuple[str, ...] = ()) -> None:
        self.root = root
        self.python = python or sys.executable
        self.env = env
        """The build's variables its workers get besides the few every worker gets."""
        self.process: subprocess.Popen[bytes] | None = None
        self.control: socket.socket | None = None
        self.state = ZygoteState.NONE
        self.why_broken = ""
        self.losses = 0
        """Zygotes lost in a row: counted again from 1 when the one lost had forked a worker."""
        self.served = False
        """The running zygote forked at least one worker."""
        self.closed = False
        self._lock = threading.Lock()
        self._stderr: IO[bytes] | None = None

    @property
    def failed(self) -> str:
        """Why it was given up (``BROKEN``); empty while it may still work."""
        return self.why_broken if self.state is ZygoteState.BROKEN else ""

    @property
    def greeting(self) -> bool:
        """Is a start waiting for the new zygote's hello (holding the lock)?"""
        return self.state is ZygoteState.STARTING

    def fork(self, stderr: IO[bytes], scratch: Path | None = None) -> ForkedProcess:
        """A new worker process (starting the zygote first if need be), whose temporary
        folder is ``scratch`` (made by the caller)."""
        with self._lock:
            control = self._started()
            if self.closed:
                raise WorkerError(CLOSED)
            ours, theirs = socket.socketpair()
            try:
                command = fork_command(os.fsencode(scratch) if scratch else b"")
                socket.send_fds(control, [command], [theirs.fileno(), stderr.fileno()])
                pid = read_pid(control)
                self.served = True
            except BaseException as exc:  # an unread answer would be the next fork's pid
                ours.close()
                self.lost(f"the zygote did not fork ({exc})")
                if isinstance(exc, (OSError, ValueError)):
                    raise WorkerError(f"the zygote did not fork ({exc})") from None
                raise
            finally:
                theirs.close()
        return ForkedProcess(pid, ours, self)

    def wait(self, pid: int) -> int | bool | None:
        """The exit status of worker ``pid`` if it has exited, True if it is still running,
        None if nobody knows (the zygote is gone)."""
        with self._lock:
            if self.control is None:
                return None
            try:
                self.control.sendall(f"wait {pid}\n".encode())
                answer = WaitAnswer.decode(read_line(self.control))
            except (OSError, ValueError, ProtocolError):
                self.lost("the zygote stopped answering")
                return None
            return True if answer.running else answer.status

    def _started(self) -> socket.socket:
        if self.closed:
            raise WorkerError(CLOSED)
        if self.control is not None:
            if self._alive():
                return self.control
            self.lost("the zygote died")  # unnoticed so far: its socket and log are closed
        if self.failed:
            raise WorkerError(self.failed)
        ours, theirs = socket.socketpair()
        self._stderr = tempfile.TemporaryFile()  # noqa: SIM115  (lives as long as the process)
        try:
            self.process = subprocess.Popen(
                [self.python, "-m", "formula_check.runtime.zygote", str(self.root)],
                stdin=theirs.fileno(),
                stdout=subprocess.DEVNULL,
                stderr=self._stderr,
                cwd=self.root,
                env=worker_environment(self.env),
                start_new_session=True,
            )
        except OSError as exc:
            ours.close()
            self.give_up(f"the zygote could not be started ({exc})")
            raise WorkerError(self.failed) from None
        finally:
            theirs.close()
        if self.closed:  # shut while it started: the shut kills it, with no wait for its import
            ours.close()
            raise WorkerError(CLOSED)
        return self._greeted(ours)

    def _alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def _greeted(self, control: socket.socket) -> socket.socket:
        """Wait for the zygote's hello on ``control`` (TensorFlow imported, or missing)."""
        self.control = control
        self.state = ZygoteState.STARTING
        hello: ZygoteHello | None = None
        try:
            # A close sets `closed`, then reads the state: one of the two sees the other.
            if self.closed:
                raise WorkerError(CLOSED)
            ready, _, _ = select.select([control], [], [], STARTUP_TIMEOUT)
            hello = ZygoteHello.decode(read_line(control)) if ready else None
        except (OSError, ValueError, ProtocolError):
            hello = None
        finally:
            self.state = ZygoteState.NONE
        if hello is not None and not hello.ok:
            self.stop()
            raise MissingTensorFlowError(self.python)
        if hello is None:
            self.give_up("the zygote did not start")
            raise WorkerError(self.failed)
        control.settimeout(ANSWER_TIMEOUT)  # a fork or a status takes milliseconds
        self.state = ZygoteState.READY
        return control

    def give_up(self, why: str) -> None:
        """It cannot work here (``BROKEN``): workers are spawned from now on."""
        self.why_broken = why
        self.state = ZygoteState.BROKEN
        self.stop()

    def lost(self, why: str) -> None:
        """It died or stopped making sense: stop it; the next fork starts a new one. After
        :data:`ZYGOTE_RESTARTS` of those in a row, it is given up. A zygote that had forked
        a worker worked here: its loss (a snippet that killed it, the machine out of
        memory, hours into ``mkdocs serve``) starts the count afresh."""
        self.losses = 1 if self.served else self.losses + 1
        self.served = False
        if self.losses > ZYGOTE_RESTARTS:
            self.give_up(f"{why} ({self.losses} times)")
        else:
            self.stop()

    def shut(self) -> None:
        """Stop the zygote for good: no later fork starts another one.

        A start in progress holds the lock while it waits for the hello (the import): that
        wait is ended first, so closing does not wait for TensorFlow to load."""
        self.closed = True
        self.interrupt_start()
        with self._lock:
            self.stop()

    def interrupt_start(self, *, only_a_start: bool = False) -> None:
        """End the wait of a start in progress for the zygote's hello: the zygote is killed
        and the start fails at once. ``only_a_start``: leave a zygote that already said
        hello (its workers are still to be stopped and reaped)."""
        if only_a_start and not self.greeting:
            return
        process, control = self.process, self.control
        if process is not None and process.poll() is None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(process.pid, signal.SIGKILL)
        if control is not None:
            with contextlib.suppress(OSError):
                control.shutdown(socket.SHUT_RDWR)

    def stop(self) -> None:
        """Stop the running zygote, if any (its workers are stopped by their pool, and die
        with it); a fork may start another, unless it was given up or shut."""
        if self.state is not ZygoteState.BROKEN:
            self.state = ZygoteState.NONE
        if self.control is not None:
            self.control.close()
            self.control = None
        if self.process is not None:
            if self.process.poll() is None:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()
            self.process = None
        if self._stderr is not None:
            self._stderr.close()
            self._stderr = None
