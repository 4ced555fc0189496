"""A worker forked by the zygote, seen through the part of ``Popen`` a worker uses.

It is the zygote's child, not ours: its exit status comes from the zygote (anything with a
``wait(pid)`` such as :class:`.zygote_client.Zygote`). Threads poll and kill it at once (a
close meets a start or a check): every method is safe from any thread.
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import socket
import subprocess
import threading
import time
from pathlib import Path
from typing import IO, Protocol

from formula_check.runtime.limits import EXIT_WAIT


class ExitStatuses(Protocol):
    """Who can tell a forked worker's exit status: its zygote."""

    def wait(self, pid: int) -> int | bool | None:
        """The exit status, True while it runs, None if nobody knows."""


class ForkedProcess:
    """A worker forked by the zygote; see the module's docstring."""

    def __init__(self, pid: int, conversation: socket.socket, zygote: ExitStatuses) -> None:
        self.pid = pid
        self.zygote = zygote
        self.stdin: IO[bytes] | None = conversation.makefile("wb")
        self.stdout: IO[bytes] | None = conversation.makefile("rb")
        conversation.close()  # the files keep the socket open until they are closed
        self.returncode: int | None = None
        # The lock keeps the pidfd from being closed twice, or used after its number went
        # to another file.
        self._lock = threading.Lock()
        # A pidfd names this very process even if its pid is reused after it is gone.
        self.pidfd: int | None = None
        with contextlib.suppress(AttributeError, OSError):
            self.pidfd = os.pidfd_open(pid)

    def _exited(self) -> bool:
        if self.pidfd is not None:
            ready, _, _ = select.select([self.pidfd], [], [], 0)
            if ready:
                return True
        # A pidfd of a multi-threaded process whose parent died can stay unreadable while it
        # waits, a zombie, for an init that does not reap: /proc says it is gone.
        return not is_running(self.pid)

    def poll(self) -> int | None:
        """None while running; the exit status once it has exited."""
        with self._lock:
            if self.returncode is None and self._exited():
                status = self.zygote.wait(self.pid)
                # Exiting right now (a thread of it is still ending): it is no worker to send
                # a request to, so wait for its end, briefly, rather than say it runs
                deadline = time.monotonic() + EXIT_WAIT
                while status is True and time.monotonic() < deadline:
                    time.sleep(0.01)
                    status = self.zygote.wait(self.pid)
                if status is True:
                    return None  # ask again later
                self.returncode = -signal.SIGKILL if status is None else status
                if self.pidfd is not None:
                    os.close(self.pidfd)
                    self.pidfd = None
            return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        """Wait for the exit (raises ``subprocess.TimeoutExpired`` after ``timeout``)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while (code := self.poll()) is None:
            if deadline is not None and time.monotonic() > deadline:
                raise subprocess.TimeoutExpired(f"worker {self.pid}", timeout or 0.0)
            time.sleep(0.01)
        return code

    def kill(self) -> None:
        """SIGKILL."""
        with self._lock, contextlib.suppress(ProcessLookupError):
            if self.returncode is not None:
                return  # reaped: its pid may already be another process's
            if self.pidfd is not None:
                signal.pidfd_send_signal(self.pidfd, signal.SIGKILL)
            else:
                os.kill(self.pid, signal.SIGKILL)


def is_running(pid: int) -> bool:
    """Does ``pid`` exist and not yet wait as a zombie?"""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return fields.rpartition(")")[2].split()[:1] not in (["Z"], ["X"])
