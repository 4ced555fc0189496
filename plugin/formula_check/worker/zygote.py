"""The zygote: one process imports TensorFlow, then forks a ready worker per request.

Importing TensorFlow is the largest fixed cost of a cold check (seconds of CPU). Paid once in
the zygote, a second worker, or the fresh worker that replaces one killed on a timeout, is a
``fork()`` away: a few milliseconds instead of another import.

The zygote only imports. It never runs an op or asks for devices, so neither TensorFlow's
thread pools nor a GPU context exist yet when it forks: each child creates its own, as a
freshly started process would (NumPy's BLAS may have started a thread; BLAS libraries handle
fork). Run as ``python -m formula_check.worker.zygote PROJECT_ROOT``
with fd 0 a Unix socket to the parent, which speaks one line per request:

``fork HEX`` (with two descriptors attached: the child's conversation socket and its stderr)
    answered ``{"pid": N}``; the child serves requests exactly like ``worker.child``, with the
    folder whose path is ``HEX`` (hex-encoded bytes, made by the parent) as its temporary
    folder.
``wait N``
    answered ``{"status": S}`` if child N has exited (negative: the signal that killed it),
    ``{"running": true}`` if it has not; it never blocks.

The first line the zygote writes is its hello: ``{"ok": true}``, or ``{"ok": false, ...}``
when TensorFlow cannot be imported. EOF on fd 0 (the parent closed the pool, or died) ends
the zygote, and it takes its workers with it: each worker also dies with the zygote.

**Kept alive** (``--listen ADDRESS --idle SECONDS``): the zygote outlives the build that
started it, so that the next build, CLI run or test session of the same project skips the
import too. It listens on a Unix socket in a folder only its user can enter, accepts
connections from that user only, and forks one handler per connection: a copy of itself that
speaks the protocol above with that client alone and ends, with the workers it forked, when
the client hangs up. The process started by the client returns once the socket listens (the
zygote itself has moved to a child of its own). With no client for ``SECONDS``, it exits.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import shutil
import signal
import socket
import sys
import time
import warnings
from pathlib import Path
from typing import IO, Any, cast

from . import child, isolation, protocol

_LONGEST_REQUEST = 16384
"""Bytes read per request: ``fork`` with a folder path of up to 8 KiB, hex-encoded."""


def main(argv: list[str] | None = None) -> int:
    """Import TensorFlow, say hello, then fork workers until the parent hangs up."""
    args = sys.argv[1:] if argv is None else argv
    root = Path(args[0]).resolve() if args else Path.cwd()
    if args[1:2] == ["--listen"] and len(args) == 5 and args[3] == "--idle":
        return listen(root, Path(args[2]), float(args[4]))
    control = socket.socket(fileno=0)
    # Inherited "ignore" would reap children behind our back and lose their exit statuses.
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    return _serve(root, control, _import_tensorflow())


def _import_tensorflow() -> dict[str, Any]:
    """Import TensorFlow (through the worker's module); the hello that says how it went."""
    try:
        from .. import planning  # noqa: F401  (what each worker's warm-up plans with)
        from . import execution  # noqa: F401  (the import is the point)
    except ImportError as exc:
        return {"ok": False, "error": str(exc)}
    warnings.simplefilter("ignore")
    return {"ok": True}


def _serve(root: Path, control: socket.socket, hello: dict[str, Any]) -> int:
    """Say ``hello``, then fork workers for the client on ``control`` until it hangs up; its
    workers go with it."""
    send_line(control, hello)
    if not hello["ok"]:
        return 3
    # A worker killed in the middle of a check leaves what the check started (also in a
    # session of its own) to us, not to init: each is ended when a worker's end is seen.
    isolation.become_subreaper()
    isolation.keep_private()
    children: dict[int, str | None] = {}  # each worker, and its temporary folder
    try:
        _answer_until_eof(root, control, children)
    finally:
        # The client is gone (closed, or killed before it could stop them): so are the workers
        # it can no longer reach, and their folders, which it would have removed.
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
        isolation.end_children()
    return 0


def listen(root: Path, address: Path, idle: float) -> int:
    """Serve every connection to ``address`` until no client has come for ``idle`` seconds."""
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    mask = os.umask(0o177)
    try:
        server.bind(str(address))
    except OSError as exc:  # another zygote listens there, or the path is unusable
        print(f"formula-check: cannot listen on {address}: {exc}", file=sys.stderr)
        return 4
    finally:
        os.umask(mask)
    server.listen(64)
    inode = os.stat(address).st_ino
    child = os.fork()
    if child:  # the starter sees this exit: the socket listens, and the pid file is there
        with contextlib.suppress(OSError):
            address.with_suffix(".pid").write_text(f"{child}\n", encoding="ascii")
        os._exit(0)
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a Ctrl-C meant for the build that started us
    hello = _import_tensorflow()
    _serve_clients(server, root, (address, inode), idle, hello)
    server.close()
    return 0


def _serve_clients(
    server: socket.socket,
    root: Path,
    bound: tuple[Path, int],
    idle: float,
    hello: dict[str, Any],
) -> None:
    """Fork a zygote for each client until the address (the socket file and the inode it
    was bound to) is no longer ours or none has been connected for ``idle`` seconds (then
    the address is removed)."""
    address, inode = bound
    handlers: dict[int, int | None] = {}  # each client's process, and a pidfd telling its end
    quiet_since = time.monotonic()
    while _still_ours(address, inode):
        ended = [pid for pid in handlers if _wait(pid, {}).get("running") is not True]
        for pid in ended:
            _close_pidfd(handlers.pop(pid))
        if handlers or ended:  # the idle time counts from the last client's end
            quiet_since = time.monotonic()
        idle_left = idle - (time.monotonic() - quiet_since)
        if not handlers and idle_left <= 0:
            for path in (address, address.with_suffix(".pid"), address.with_suffix(".log")):
                with contextlib.suppress(OSError):
                    path.unlink()
            return
        # asleep until a client connects or one ends; awake now and then to see that the
        # address is still ours (and often when a client's end cannot be told by a pidfd)
        pidfds = [fd for fd in handlers.values() if fd is not None]
        timeout = LOOK_EVERY if len(pidfds) == len(handlers) else 0.2
        waited: list[int] = [server.fileno(), *pidfds]
        ready, _, _ = select.select(waited, [], [], min(timeout, max(idle_left, 0)))
        if server.fileno() in ready:
            with contextlib.suppress(OSError):
                connection, _ = server.accept()
                if protocol.peer_is_us(connection):
                    pid = _fork_handler(server, connection, handlers, root, hello)
                    handlers[pid] = _pidfd(pid)
                    quiet_since = time.monotonic()
                connection.close()


def _fork_handler(
    server: socket.socket,
    connection: socket.socket,
    handlers: dict[int, int | None],
    root: Path,
    hello: dict[str, Any],
) -> int:
    """A zygote for the client on ``connection``, as ``main`` is the parent's."""
    pid = os.fork()
    if pid == 0:
        server.close()
        for fd in handlers.values():
            _close_pidfd(fd)
        code = 70
        try:
            code = _serve(root, connection, hello)
        finally:
            os._exit(code)
    return pid


LOOK_EVERY = 5.0
"""Seconds a kept zygote with nothing to do sleeps before it looks at its address again."""


def _pidfd(pid: int) -> int | None:
    """A descriptor that becomes readable when child ``pid`` ends (None where unsupported)."""
    try:
        return os.pidfd_open(pid)
    except (AttributeError, OSError):
        return None


def _close_pidfd(fd: int | None) -> None:
    if fd is not None:
        os.close(fd)


def _still_ours(address: Path, inode: int) -> bool:
    """Is ``address`` still our socket (not removed, nor taken over by a newer zygote)?"""
    try:
        return os.stat(address).st_ino == inode
    except OSError:
        return False


def _answer_until_eof(root: Path, control: socket.socket, children: dict[int, str | None]) -> None:
    while True:
        try:
            data, fds, _, _ = socket.recv_fds(control, _LONGEST_REQUEST, 2)
        except OSError:
            return
        if not data:
            return
        command = data.decode("ascii", "replace").split()
        if command[:1] == ["fork"] and len(command) <= 2 and len(fds) == 2:
            scratch = os.fsdecode(bytes.fromhex(command[1])) if command[1:] else None
            pid = _fork(root, control, fds[0], fds[1], scratch)
            children[pid] = scratch
            send_line(control, {"pid": pid})
            continue
        for fd in fds:
            os.close(fd)
        if command[:1] == ["wait"] and len(command) == 2 and command[1].isdigit():
            answer = _wait(int(command[1]), children)
            if "status" in answer:  # a worker ended: so does what its last check left running
                isolation.end_children(keep=frozenset(children))
            send_line(control, answer)
        else:
            send_line(control, {"error": f"unknown command {data[:40]!r}"})


def _fork(
    root: Path, control: socket.socket, conversation: int, stderr: int, scratch: str | None
) -> int:
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
        isolation.die_with_parent(zygote)  # no orphan spins on
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        os.dup2(stderr, 2)
        os.dup2(2, 1)  # stray prints to fd 1 land in the stderr log, as in a spawned worker
        os.close(stderr)
        code = _serve_forked(root, conversation, scratch)
    except BaseException:
        with contextlib.suppress(Exception):
            import traceback

            traceback.print_exc()
    finally:
        os._exit(code)
    return 0  # pragma: no cover


def _serve_forked(root: Path, conversation: int, scratch: str | None = None) -> int:
    # The project folder as it is now: a zygote kept alive may have started in a folder that
    # was since removed and made again under the same name.
    os.chdir(root)
    sock = socket.socket(fileno=conversation)
    # Unbuffered: a cancel that comes during a check is seen by select on the socket, not
    # left unread behind the request in a buffer
    requests = cast("IO[bytes]", sock.makefile("rb", buffering=0))
    answers = sock.makefile("wb")
    return child.run_worker(root, requests, answers, scratch)


def _wait(pid: int, children: dict[int, str | None]) -> dict[str, Any]:
    """The exit status of child ``pid`` if it has exited; never blocks."""
    try:
        done, status = os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        children.pop(pid, None)
        return {"status": None}
    if done == 0:
        return {"running": True}
    children.pop(pid, None)  # reaped: its folder is the client's to remove
    return {"status": os.waitstatus_to_exitcode(status)}


def send_line(sock: socket.socket, message: dict[str, Any]) -> None:
    """One JSON object and a newline."""
    sock.sendall(json.dumps(message).encode() + b"\n")


if __name__ == "__main__":
    with contextlib.suppress(KeyboardInterrupt):
        sys.exit(main())
