"""Runs ``mkdocs serve`` and JupyterLab side by side, as one service of the container.

Usage: ``together.py ENTRYPOINT [SERVE ARGS...] [-- LAB ARGS...]``

Each server is started through the entry point's own mode (``serve``, ``lab``), so it gets
exactly the flags it gets when started alone. Then:

- when either server ends, the other is stopped, and the exit status is the status of the one
  that ended first (a server killed by signal N counts as 128 + N, as in a shell);
- SIGINT, SIGTERM and SIGHUP stop both, and the exit status is 128 + that signal;
- each server is stopped its own graceful way: MkDocs on SIGINT (its KeyboardInterrupt path
  closes the check workers), Jupyter Server on SIGTERM (it shuts its kernels down). One still
  running ``FORMULA_CHECK_STOP_TIMEOUT`` seconds later (default 8, under ``docker stop``'s 10),
  or when a second stop signal comes, is killed with its process group.

Each server runs in a session of its own, so a terminal's Ctrl-C reaches this process alone
and each server is signalled once, by us. As PID 1 (a container started without ``--init``)
this process also reaps the orphans that the kernel hands it.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
from dataclasses import dataclass
from types import FrameType

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


@dataclass
class Server:
    """One server: the entry point's mode that starts it and the signal that stops it."""

    name: str
    mode: str
    stop_signal: signal.Signals
    pid: int = 0
    stopped: bool = False

    def start(self, entrypoint: str, args: list[str]) -> None:
        # setsigdef: a server must not inherit an ignored SIGINT (a shell's `cmd &` ignores
        # it), or MkDocs would never see the signal that stops it.
        self.pid = os.posix_spawnp(
            "sh",
            ["sh", entrypoint, self.mode, *args],
            os.environ,
            setsid=True,
            setsigdef=STOP_SIGNALS,
        )

    def stop(self) -> None:
        if self.pid and not self.stopped:
            self.stopped = True
            os.kill(self.pid, self.stop_signal)

    def kill(self) -> None:
        with contextlib.suppress(ProcessLookupError):  # it ended after all
            os.killpg(self.pid, signal.SIGKILL)


class Together:
    """The two servers and what happens when one ends or a stop signal comes."""

    def __init__(self, servers: list[Server], stop_timeout: int) -> None:
        self.servers = servers
        self.stop_timeout = stop_timeout
        self.running: dict[int, Server] = {}
        self.signalled: int | None = None

    def on_stop_signal(self, signum: int, _frame: FrameType | None) -> None:
        if self.signalled is None:
            self.signalled = signum
            self.stop_all()
        else:
            self.kill_all("a second stop signal came")

    def on_stop_timeout(self, _signum: int, _frame: FrameType | None) -> None:
        self.kill_all(f"it did not stop within {self.stop_timeout} s")

    def kill_all(self, because: str) -> None:
        for server in list(self.running.values()):
            say(f"killing {server.name}: {because}")
            server.kill()

    def stop_all(self) -> None:
        if not any(server.stopped for server in self.servers):
            signal.alarm(self.stop_timeout)
        for server in self.running.values():
            server.stop()

    def run(self, entrypoint: str, args_by_server: list[list[str]]) -> int:
        for server, args in zip(self.servers, args_by_server, strict=True):
            if self.signalled is not None:
                break
            server.start(entrypoint, args)
            self.running[server.pid] = server
        if self.signalled is not None:
            self.stop_all()  # a signal that came while the servers were starting
        first_status: int | None = None
        while self.running:
            pid, wait_status = os.waitpid(-1, 0)
            if pid not in self.running:
                continue  # an orphan that was handed to us as PID 1
            server = self.running.pop(pid)
            status = exit_status(wait_status)
            if first_status is None:
                first_status = status
                if self.signalled is None and self.running:
                    others = ", ".join(other.name for other in self.running.values())
                    say(f"{server.name} exited with status {status}; stopping {others}")
                self.stop_all()
        signal.alarm(0)
        if self.signalled is not None:
            return 128 + self.signalled
        return first_status if first_status is not None else 0


def exit_status(wait_status: int) -> int:
    """A child's exit status as a shell gives it: its exit code, or 128 + a killing signal."""
    code = os.waitstatus_to_exitcode(wait_status)
    return 128 - code if code < 0 else code


def split_args(args: list[str]) -> list[list[str]]:
    """``SERVE ARGS... -- LAB ARGS...`` as the two lists (the first ``--`` splits)."""
    if "--" not in args:
        return [args, []]
    cut = args.index("--")
    return [args[:cut], args[cut + 1 :]]


def say(message: str) -> None:
    """One line on stderr, in the entry point's voice."""
    print(f"formula-check: {message}", file=sys.stderr, flush=True)


def main(argv: list[str]) -> int:
    """Starts both servers through the entry point ``argv[0]``; returns the exit status."""
    entrypoint, *args = argv
    together = Together(
        [
            Server("mkdocs serve", "serve", signal.SIGINT),
            Server("JupyterLab", "lab", signal.SIGTERM),
        ],
        stop_timeout=int(os.environ.get("FORMULA_CHECK_STOP_TIMEOUT", "8")),
    )
    # Installed before the servers start, so that no stop signal can fall between the two.
    for signum in STOP_SIGNALS:
        signal.signal(signum, together.on_stop_signal)
    signal.signal(signal.SIGALRM, together.on_stop_timeout)
    return together.run(entrypoint, split_args(args))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
