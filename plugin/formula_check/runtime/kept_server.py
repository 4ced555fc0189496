"""The zygote kept alive between runs (``--listen ADDRESS --idle SECONDS``; see
:mod:`.zygote`), on its side of the socket.

States: *starting* (the process the client started binds the address, forks the zygote
proper and exits, so the client knows the socket listens), *importing*, *listening* (forks
one handler per connection of this user, :func:`.zygote_server.serve_client`, which ends
with its client), and *gone* (no client for ``SECONDS``, or the address is no longer ours:
it removes its files, if still its own, and exits). Clients reach it only through the
socket (:mod:`.kept_client`); :func:`.kept_socket.stop_kept` stops it with SIGTERM.
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import socket
import sys
import time
from collections.abc import Callable
from pathlib import Path

from formula_check.runtime.control import ZygoteHello, peer_is_us
from formula_check.runtime.zygote_server import WorkerServer, serve_client, wait

LOOK_EVERY = 5.0
"""Seconds a kept zygote with nothing to do sleeps before it looks at its address again."""


def listen(
    root: Path,
    address: Path,
    idle: float,
    imports: Callable[[], ZygoteHello],
    serves: WorkerServer,
) -> int:
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
    zygote = os.fork()
    if zygote:  # the starter sees this exit: the socket listens, and the pid file is there
        with contextlib.suppress(OSError):
            address.with_suffix(".pid").write_text(f"{zygote}\n", encoding="ascii")
        os._exit(0)
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a Ctrl-C meant for the build that started us
    serve_clients(server, root, (address, inode), idle, imports(), serves)
    server.close()
    return 0


def serve_clients(
    server: socket.socket,
    root: Path,
    bound: tuple[Path, int],
    idle: float,
    hello: ZygoteHello,
    serves: WorkerServer,
) -> None:
    """Fork a zygote for each client until the address (the socket file and the inode it
    was bound to) is no longer ours or none has been connected for ``idle`` seconds (then
    the address is removed). ``serves`` the workers forked for them."""
    address, inode = bound
    handlers: dict[int, int | None] = {}  # each client's process, and a pidfd telling its end
    quiet_since = time.monotonic()
    while _still_ours(address, inode):
        ended = [pid for pid in handlers if not wait(pid, {}).running]
        for pid in ended:
            _close_pidfd(handlers.pop(pid))
        if handlers or ended:  # the idle time counts from the last client's end
            quiet_since = time.monotonic()
        idle_left = idle - (time.monotonic() - quiet_since)
        if not handlers and idle_left <= 0:
            _remove(address)
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
                if peer_is_us(connection):
                    pid = _fork_handler(server, connection, handlers, root, (hello, serves))
                    handlers[pid] = _pidfd(pid)
                    quiet_since = time.monotonic()
                connection.close()


def _remove(address: Path) -> None:
    for path in (address, address.with_suffix(".pid"), address.with_suffix(".log")):
        with contextlib.suppress(OSError):
            path.unlink()


def _fork_handler(
    server: socket.socket,
    connection: socket.socket,
    handlers: dict[int, int | None],
    root: Path,
    said: tuple[ZygoteHello, WorkerServer],
) -> int:
    """A zygote for the client on ``connection``, as :func:`.zygote.main` is the parent's."""
    pid = os.fork()
    if pid == 0:
        server.close()
        for fd in handlers.values():
            _close_pidfd(fd)
        code = 70
        try:
            code = serve_client(root, connection, *said)
        finally:
            os._exit(code)
    return pid


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
