"""The zygote serving one client (see :mod:`.zygote` for the conversation): it forks a
worker per ``fork``, tells a worker's exit status per ``wait``, and when the client hangs up
ends every worker it forked.

Runs in the zygote (or, kept alive, in the handler forked for each client); only that
client talks to it. Each worker it forks is its child and a process group of its own.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
from collections.abc import Callable
from pathlib import Path

from formula_check.runtime import reaping
from formula_check.runtime.control import LONGEST_REQUEST, WaitAnswer, ZygoteHello, send_line

WorkerServer = Callable[[Path, int, "str | None"], int]
"""Serves a forked worker's requests on its conversation socket (a descriptor), with its
temporary folder: :func:`.zygote.serve_forked` (tests lend a stand-in)."""


def serve_client(
    root: Path, control: socket.socket, hello: ZygoteHello, serves: WorkerServer
) -> int:
    """Say ``hello``, then fork workers for the client on ``control`` until it hangs up; its
    workers go with it."""
    send_line(control, hello.encode())
    if not hello.ok:
        return 3
    # A worker killed in the middle of a check leaves what the check started (also in a
    # session of its own) to us, not to init: each is ended when a worker's end is seen.
    reaping.become_subreaper()
    reaping.keep_private()
    children: dict[int, str | None] = {}  # each worker, and its temporary folder
    try:
        _answer_until_eof(root, control, children, serves)
    finally:
        _end_workers(children)
    return 0


def _end_workers(children: dict[int, str | None]) -> None:
    """The client is gone (closed, or killed before it could stop them): so are the workers
    it can no longer reach, and their folders, which it would have removed."""
    for pid in children:
        try:
            os.killpg(pid, signal.SIGKILL)
        except OSError:  # not yet a group of its own (forked a moment ago)
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
    for pid, scratch in children.items():
        with contextlib.suppress(ChildProcessError):
            os.waitpid(pid, 0)
        if scratch is not None:
            shutil.rmtree(scratch, ignore_errors=True)
    reaping.end_children()


def _answer_until_eof(
    root: Path, control: socket.socket, children: dict[int, str | None], serves: WorkerServer
) -> None:
    while True:
        try:
            data, fds, _, _ = socket.recv_fds(control, LONGEST_REQUEST, 2)
        except OSError:
            return
        if not data:
            return
        command = data.decode("ascii", "replace").split()
        if command[:1] == ["fork"] and len(command) <= 2 and len(fds) == 2:
            scratch = os.fsdecode(bytes.fromhex(command[1])) if command[1:] else None
            pid = _fork(root, control, (fds[0], fds[1]), scratch, serves)
            children[pid] = scratch
            send_line(control, {"pid": pid})
            continue
        for fd in fds:
            os.close(fd)
        if command[:1] == ["wait"] and len(command) == 2 and command[1].isdigit():
            answer = wait(int(command[1]), children)
            if not answer.running:  # a worker ended: so does what its last check left running
                reaping.end_children(keep=frozenset(children))
            send_line(control, answer.encode())
        else:
            send_line(control, {"error": f"unknown command {data[:40]!r}"})


def _fork(
    root: Path,
    control: socket.socket,
    descriptors: tuple[int, int],
    scratch: str | None,
    serves: WorkerServer,
) -> int:
    """Fork a worker whose conversation and stderr are ``descriptors``."""
    conversation, stderr = descriptors
    zygote = os.getpid()
    pid = os.fork()
    if pid:
        os.close(conversation)
        os.close(stderr)
        return pid
    # The child: leave the zygote's conversation and become an ordinary worker.
    code = 70
    try:
        control.close()
        os.setsid()  # its own process group: a timeout kills the snippet's children too
        reaping.die_with_parent(zygote)  # no orphan spins on
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        os.dup2(stderr, 2)
        os.dup2(2, 1)  # stray prints to fd 1 land in the stderr log, as in a spawned worker
        os.close(stderr)
        code = serves(root, conversation, scratch)
    except BaseException:
        with contextlib.suppress(Exception):
            import traceback

            traceback.print_exc()
    finally:
        os._exit(code)
    return 0  # pragma: no cover


def wait(pid: int, children: dict[int, str | None]) -> WaitAnswer:
    """The exit status of child ``pid`` if it has exited; never blocks."""
    try:
        done, status = os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        children.pop(pid, None)
        return WaitAnswer(status=None)
    if done == 0:
        return WaitAnswer(running=True)
    children.pop(pid, None)  # reaped: its folder is the client's to remove
    return WaitAnswer(status=os.waitstatus_to_exitcode(status))
