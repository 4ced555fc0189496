"""Worker processes seen from the parent: start, ask, time out, kill, replace.

On Linux a worker is forked from a zygote that has already imported TensorFlow (see
:mod:`formula_check.worker.zygote`); elsewhere, or if the zygote cannot start, each worker is
spawned and imports TensorFlow itself. Either way the worker speaks the same protocol.
"""

from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import hashlib
import heapq
import importlib.metadata
import json
import math
import os
import queue
import select
import shutil
import signal
import socket
import stat
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from ..errors import MissingTensorFlowError, WorkerError
from ..model import Array
from . import protocol
from .environment import worker_environment
from .isolation import children
from .paths import scrubbed

STARTUP_TIMEOUT = 120.0
ANSWER_TIMEOUT = 60.0
CANCELLED = "not checked to the end: its result was no longer wanted"
ZYGOTE_RESTARTS = 3
"""A zygote lost more often than this in a row, none of them having forked a worker, is given
up: workers are spawned instead."""
_POLL = 0.1


@dataclass(frozen=True)
class Reply:
    """What came back for one request: an answer, or why none came."""

    outcome: str  # "ok" | "timeout" | "crash" | "cancelled"
    header: Mapping[str, Any]
    arrays: Mapping[str, Array]
    detail: str = ""
    startup: float = 0.0
    """Seconds this request spent starting its worker (importing TensorFlow, or a fork)."""
    queued: float = 0.0
    """Seconds it waited for a worker to be free (all were busy with other requests)."""


def fork_supported() -> bool:
    """Can workers be forked from a zygote here? (Linux: descriptor passing and /proc.)"""
    return (
        sys.platform == "linux"
        and hasattr(socket, "send_fds")
        and os.access("/proc/self/stat", os.R_OK)
    )


class Zygote:
    """The parent's end of the zygote: started once, then forks ready workers on request.

    Thread-safe: the workers of a pool start concurrently and share it.
    """

    def __init__(self, root: Path, python: str | None = None, env: tuple[str, ...] = ()) -> None:
        self.root = root
        self.python = python or sys.executable
        self.env = env
        """The build's variables its workers get besides the few every worker gets."""
        self.process: subprocess.Popen[bytes] | None = None
        self.control: socket.socket | None = None
        self.failed = ""
        self.losses = 0
        """Zygotes lost in a row: counted again from 1 when the one lost had forked a worker."""
        self.served = False
        """The running zygote forked at least one worker."""
        self.closed = False
        self.greeting = False
        """A start waits for the new zygote's hello (its TensorFlow import), holding the lock."""
        self._lock = threading.Lock()
        self._stderr: IO[bytes] | None = None

    def fork(self, stderr: IO[bytes], scratch: Path | None = None) -> ForkedProcess:
        """A new worker process (starting the zygote first if need be), whose temporary
        folder is ``scratch`` (made by the caller)."""
        with self._lock:
            control = self._started()
            if self.closed:
                raise WorkerError("the worker pool is closed")
            ours, theirs = socket.socketpair()
            try:
                named = b" " + os.fsencode(scratch).hex().encode() if scratch else b""
                socket.send_fds(
                    control, [b"fork" + named + b"\n"], [theirs.fileno(), stderr.fileno()]
                )
                pid = int(self._answer(control)["pid"])
                self.served = True
            except BaseException as exc:  # an unread answer would be the next fork's pid
                ours.close()
                self._lost(f"the zygote did not fork ({exc})")
                if isinstance(exc, (OSError, KeyError, TypeError, ValueError)):
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
                answer = self._answer(self.control)
            except (OSError, ValueError):
                self._lost("the zygote stopped answering")
                return None
            if answer.get("running") is True:
                return True
            status = answer.get("status")
            return status if isinstance(status, int) and not isinstance(status, bool) else None

    def _started(self) -> socket.socket:
        if self.closed:
            raise WorkerError("the worker pool is closed")
        if self.control is not None:
            if self._alive():
                return self.control
            self._lost("the zygote died")  # unnoticed so far: its socket and log are closed
        if self.failed:
            raise WorkerError(self.failed)
        ours, theirs = socket.socketpair()
        self._stderr = tempfile.TemporaryFile()  # noqa: SIM115  (lives as long as the process)
        try:
            self.process = subprocess.Popen(
                [self.python, "-m", "formula_check.worker.zygote", str(self.root)],
                stdin=theirs.fileno(),
                stdout=subprocess.DEVNULL,
                stderr=self._stderr,
                cwd=self.root,
                env=worker_environment(self.env),
                start_new_session=True,
            )
        except OSError as exc:
            ours.close()
            self._broken(f"the zygote could not be started ({exc})")
            raise WorkerError(self.failed) from None
        finally:
            theirs.close()
        if self.closed:  # shut while it started: the shut kills it, with no wait for its import
            ours.close()
            raise WorkerError("the worker pool is closed")
        return self._greeted(ours)

    def _alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def _greeted(self, control: socket.socket) -> socket.socket:
        """Wait for the zygote's hello on ``control`` (TensorFlow imported, or missing)."""
        self.control = control
        self.greeting = True
        try:
            # A close sets `closed`, then reads `greeting`: one of the two sees the other.
            if self.closed:
                raise WorkerError("the worker pool is closed")
            ready, _, _ = select.select([control], [], [], STARTUP_TIMEOUT)
            hello = self._answer(control) if ready else {}
        except (OSError, ValueError):
            hello = {}
        finally:
            self.greeting = False
        if hello.get("ok") is False:
            self.close()
            raise MissingTensorFlowError(self.python)
        if hello.get("ok") is not True:
            self._broken("the zygote did not start")
            raise WorkerError(self.failed)
        control.settimeout(ANSWER_TIMEOUT)  # a fork or a status takes milliseconds
        return control

    @staticmethod
    def _answer(control: socket.socket) -> dict[str, Any]:
        line = b""
        while not line.endswith(b"\n"):
            chunk = control.recv(4096)
            if not chunk:
                raise ValueError("the zygote hung up")
            line += chunk
        answer = json.loads(line)
        if not isinstance(answer, dict):
            raise ValueError(f"unexpected answer {line!r}")
        return answer

    def _broken(self, why: str) -> None:
        """It cannot work here: workers are spawned from now on."""
        self.failed = why
        self.close()

    def _lost(self, why: str) -> None:
        """It died or stopped making sense: stop it; the next fork starts a new one. After
        :data:`ZYGOTE_RESTARTS` of those in a row, it is broken for good. A zygote that had
        forked a worker worked here: its loss (a snippet that killed it, the machine out of
        memory, hours into ``mkdocs serve``) starts the count afresh."""
        self.losses = 1 if self.served else self.losses + 1
        self.served = False
        if self.losses > ZYGOTE_RESTARTS:
            self._broken(f"{why} ({self.losses} times)")
        else:
            self.close()

    def shut(self) -> None:
        """Stop the zygote for good: no later fork starts another one.

        A start in progress holds the lock while it waits for the hello (the import): that
        wait is ended first, so closing does not wait for TensorFlow to load."""
        self.closed = True
        self.interrupt()
        with self._lock:
            self.close()

    def interrupt(self, *, only_a_start: bool = False) -> None:
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

    def close(self) -> None:
        """Stop the zygote (its workers are stopped by their pool, and die with it)."""
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


class KeptZygote(Zygote):
    """The client's end of a zygote kept alive between runs (``keep_alive`` seconds).

    It connects to the zygote listening for this project, Python, checker and environment,
    starting one if none answers. Closing hangs up: the zygote's handler for this connection
    then stops this client's workers, and the zygote stays for the next run.
    """

    def __init__(
        self,
        root: Path,
        python: str | None = None,
        keep_alive: float = 0.0,
        env: tuple[str, ...] = (),
    ) -> None:
        super().__init__(root, python, env)
        self.keep_alive = keep_alive
        self.private = False
        """No place to keep a zygote: this run has a zygote of its own, as without keep_alive."""

    def _started(self) -> socket.socket:
        if self.private:
            return super()._started()
        if self.closed:
            raise WorkerError("the worker pool is closed")
        if self.failed:
            raise WorkerError(self.failed)
        if self.control is not None:
            return self.control  # one gone stops answering: _lost clears it, and we reconnect
        try:
            address = kept_address(self.root, self.python, self.keep_alive, self.env)
            return self._connected(address)
        except (OSError, _NoKeptPlaceError):  # no usable folder, a full disk...
            self.close()
            self.private = True
            return super()._started()

    def _connected(self, address: Path) -> socket.socket:
        for last in (False, True):
            started = False
            with _private_open(address.parent / "start.lock") as lock:
                fcntl.flock(lock, fcntl.LOCK_EX)  # one starter at a time
                control = _connect(address)
                if control is None:
                    control, started = self._start(address), True
            self.control = control  # now closing the pool can end the wait for its hello
            if self.closed:
                self.close()
                raise WorkerError("the worker pool is closed")
            if not protocol.peer_is_us(control):
                self._broken(f"{address} is served by another user: not using it")
                raise WorkerError(self.failed)
            try:
                return self._greeted(control)
            except MissingTensorFlowError:
                raise
            except WorkerError:
                if last or started or self.closed:
                    raise
                self.failed = ""  # it died as we connected: connect again (or start), once
        raise AssertionError("unreachable")  # pragma: no cover

    def _start(self, address: Path) -> socket.socket:
        with contextlib.suppress(FileNotFoundError):
            address.unlink()  # a socket nobody listens on: its zygote is gone
        log = address.with_suffix(".log")
        with _private_open(log) as stderr:
            starter = subprocess.Popen(
                [
                    *(self.python, "-m", "formula_check.worker.zygote", str(self.root)),
                    *("--listen", str(address), "--idle", f"{self.keep_alive:g}"),
                ],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=stderr,
                cwd=self.root,
                env=worker_environment(self.env),
                start_new_session=True,
            )
            try:
                code = starter.wait(STARTUP_TIMEOUT)
            except subprocess.TimeoutExpired:
                starter.kill()
                code = starter.wait()
        control = _connect(address)
        if control is None:
            self._broken(f"the kept-alive zygote did not start (exit {code}); see {log}")
            raise WorkerError(self.failed)
        return control


def kept_address(root: Path, python: str, keep_alive: float, env: tuple[str, ...] = ()) -> Path:
    """The socket of the zygote kept for this run: same project folder (the folder itself, not
    only its name), interpreter, checker, installed packages, the environment its workers get
    (``env`` names the build's variables passed besides the usual few), process settings and
    ``keep_alive``; anything that could change what a worker computes, or how long the
    zygote stays. It lies in a folder only we can enter."""
    from ..cache import checker_digest

    versions = {}
    for package in ("tensorflow", "tensorflow-cpu", "keras", "numpy"):
        try:
            versions[package] = importlib.metadata.version(package)
        except importlib.metadata.PackageNotFoundError:
            versions[package] = ""
    environment = worker_environment(env)
    identity = [
        str(root),
        _stamp(root, contents=False),
        python,
        _stamp(os.path.realpath(python)),
        checker_digest(),
        versions,
        [(folder, _stamp(folder)) for folder in _package_folders()],  # any install changes it
        sorted(environment.items()),
        _process_settings(),
        float(keep_alive),
    ]
    key = hashlib.sha256(json.dumps(identity).encode()).hexdigest()[:20]
    return runtime_folder() / f"{key}.sock"


def _stamp(path: str | Path, *, contents: bool = True) -> list[int]:
    """Which file or folder ``path`` is (device, inode), and with ``contents`` its last change."""
    try:
        info = os.stat(path)
    except OSError:
        return []
    return [info.st_dev, info.st_ino] + ([info.st_mtime_ns] if contents else [])


def _package_folders() -> list[str]:
    import site

    folders = [*site.getsitepackages(), site.getusersitepackages()]
    return [folder for folder in folders if os.path.isdir(folder)]


def _process_settings() -> list[Any]:
    """What a forked worker inherits from the zygote's process rather than from this run's:
    CPU affinity (TensorFlow sizes its thread pools from it), limits, priority, cgroup."""
    import resource

    limits = [
        resource.getrlimit(getattr(resource, name))
        for name in ("RLIMIT_AS", "RLIMIT_DATA", "RLIMIT_NOFILE", "RLIMIT_CPU", "RLIMIT_STACK")
        if hasattr(resource, name)
    ]
    try:
        cgroup = Path("/proc/self/cgroup").read_text(encoding="utf-8")
    except OSError:
        cgroup = ""
    affinity = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else []
    return [affinity, limits, os.getpriority(os.PRIO_PROCESS, 0), cgroup]


_SOCKET_PATH_MAX = 100
"""Linux allows 107 bytes in a Unix socket's path."""


def runtime_folder() -> Path:
    """``formula-check-UID`` under ``$XDG_RUNTIME_DIR``, else the temp folder, else ``/tmp``
    (the first that exists, is writable and is short enough for a socket path): ours, mode
    0700, in a parent that only we or root control (or that is sticky)."""
    name = f"formula-check-{os.getuid()}"
    # /tmp is safe here: the folder is created 0700 and checked to be ours before use
    bases = [os.environ.get("XDG_RUNTIME_DIR") or "", tempfile.gettempdir(), "/tmp"]  # noqa: S108
    usable = [
        base
        for base in bases
        if base
        and os.path.isdir(base)
        and os.access(base, os.W_OK | os.X_OK)
        and len(os.fsencode(base)) + len(name) + 27 <= _SOCKET_PATH_MAX
    ]
    if not usable:
        raise _NoKeptPlaceError("no writable folder with a short enough path for the kept zygote")
    parent = Path(usable[0])
    info = os.stat(parent)
    others_write = info.st_mode & 0o022
    if info.st_uid not in (0, os.getuid()) or (others_write and not info.st_mode & stat.S_ISVTX):
        raise _NoKeptPlaceError(f"{parent} is open to other users: not keeping a zygote in it")
    folder = parent / name
    with contextlib.suppress(FileExistsError):
        folder.mkdir(mode=0o700)
    info = os.lstat(folder)
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.getuid() or info.st_mode & 0o077:
        raise _NoKeptPlaceError(f"{folder} is not a private folder of this user: not using it")
    return folder


class _NoKeptPlaceError(WorkerError):
    """No folder where a zygote can be kept safely."""


def _private_open(path: Path) -> IO[bytes]:
    """Open ``path`` for writing, created 0600, never through a symbolic link."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC
    return os.fdopen(os.open(path, flags, 0o600), "wb")


def _connect(address: Path) -> socket.socket | None:
    """A connection to the zygote listening at ``address``, or None if none listens."""
    control = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        control.connect(str(address))
    except OSError:
        control.close()
        return None
    return control


def stop_kept(address: Path) -> bool:
    """Stop the zygote kept at ``address`` now (the workers of runs still connected stay until
    those runs end); False if none was running there.

    Holds the lock starters take, so that a zygote another run is starting at that address
    is either stopped whole or left alone with its files."""
    try:
        lock = _private_open(address.parent / "start.lock")
    except OSError:
        return False  # no folder there (or not one we may use): nothing we kept
    with lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        return _stop_kept(address)


def _stop_kept(address: Path) -> bool:
    try:
        pid = int(address.with_suffix(".pid").read_text(encoding="ascii"))
        command = Path(f"/proc/{pid}/cmdline").read_bytes()
        parent = int(Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[1])
    except (OSError, ValueError, IndexError):
        return False
    if b"--listen" not in command or str(address).encode() not in command:
        return False
    if b"formula_check.worker.zygote" in _command_line(parent):
        return False  # a handler of that zygote (a reused pid in a stale file): not the zygote
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGTERM)
    for path in (address, address.with_suffix(".pid"), address.with_suffix(".log")):
        with contextlib.suppress(OSError):
            path.unlink()
    return True


def stop_every_kept() -> int:
    """Stop every zygote this user keeps alive; how many there were."""
    try:
        folder = runtime_folder()
    except (WorkerError, OSError):
        return 0
    return sum(stop_kept(address) for address in sorted(folder.glob("*.sock")))


def _command_line(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""


class ForkedProcess:
    """A worker forked by the zygote, seen through the part of ``Popen`` a Worker uses.

    It is the zygote's child, not ours: its exit status comes from the zygote.
    """

    def __init__(self, pid: int, conversation: socket.socket, zygote: Zygote) -> None:
        self.pid = pid
        self.zygote = zygote
        self.stdin: IO[bytes] | None = conversation.makefile("wb")
        self.stdout: IO[bytes] | None = conversation.makefile("rb")
        conversation.close()  # the files keep the socket open until they are closed
        self.returncode: int | None = None
        # Threads poll and kill at once (a close meets a start or a check): the lock keeps the
        # pidfd from being closed twice, or used after its number went to another file.
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


class Worker:
    """One child process that keeps TensorFlow imported between requests."""

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
        self.memory_limit_mb = memory_limit_mb
        self.zygote = zygote
        self.closed = False
        self.process: subprocess.Popen[bytes] | ForkedProcess | None = None
        self.environment: dict[str, Any] = {}
        self.started_at = 0.0
        self.peak_rss_kb = 0
        self.stderr_log: IO[bytes] | None = None
        self.scratch: Path | None = None
        """The worker's private temporary folder, removed when it stops."""
        self.log_offset = 0
        """Where the stderr log stood when the request now running was sent."""
        self.cancel_asked = False
        """The request now running was asked to cancel."""
        self._killing = threading.Lock()
        self._starting = False

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
                raise WorkerError("the worker pool is closed")
            self._starting = True  # a close now leaves the log to us: a fork may be using it
        try:
            self._start()
        finally:
            if self.closed:
                self.kill()  # what a close that came before it existed could not stop
            with self._killing:
                self._starting = False
                if self.closed:
                    self._close_log()

    def _start(self) -> None:
        self.kill()  # the process that ended on its own: reaped, and its folder removed
        # The worker's private temporary folder is made here, not by the worker: one stopped
        # before its hello leaves no folder behind that nothing knows of.
        scratch = self.scratch = Path(tempfile.mkdtemp(prefix=protocol.SCRATCH_PREFIX))
        if self.zygote is not None and not self.zygote.failed:
            try:
                self.process = self.zygote.fork(self._stderr_log(), scratch)
            except MissingTensorFlowError:
                raise
            except (WorkerError, ValueError):  # a broken zygote: spawn instead
                if self.closed or self.zygote.closed:
                    raise WorkerError("the worker pool is closed") from None
        if self.process is None:
            try:
                self.process = subprocess.Popen(
                    [self.python, "-m", "formula_check.worker.child", str(self.root), scratch],
                    stdin=subprocess.PIPE,
                    stdout=subprocess.PIPE,
                    stderr=self._stderr_log(),
                    cwd=self.root,
                    env=worker_environment(self.env),
                    start_new_session=True,
                )
            except OSError as exc:  # no such Python, no memory to fork...
                raise WorkerError(f"the TensorFlow worker could not be started: {exc}") from None
        if self.closed:  # closed while it started: the close found no process to stop yet
            self.kill()
            raise WorkerError("the worker pool is closed")
        self.started_at = time.monotonic()
        reply = self._receive(STARTUP_TIMEOUT)
        if reply.outcome != "ok":
            self.kill()
            raise WorkerError(
                f"the TensorFlow worker did not start: {reply.detail}\n{self.stderr_tail()}"
            )
        if not reply.header.get("ok"):
            self.kill()
            raise MissingTensorFlowError(self.python)
        environment = {k: v for k, v in reply.header.items() if k not in {"op", "ok", "scratch"}}
        if self.closed:
            self.kill()
            raise WorkerError("the worker pool is closed")
        self.environment = environment

    def _stderr_log(self) -> IO[bytes]:
        """A fresh scratch file for the worker's stderr, read back when it dies."""
        with self._killing:  # never opened after a close: it would stay open
            if self.closed:
                raise WorkerError("the worker pool is closed")
            self._close_log()
            self.stderr_log = tempfile.TemporaryFile()  # noqa: SIM115  (lives with the process)
            # Appended to by every check's process: none can move where the next one writes
            fd = self.stderr_log.fileno()
            fcntl.fcntl(fd, fcntl.F_SETFL, fcntl.fcntl(fd, fcntl.F_GETFL) | os.O_APPEND)
            return self.stderr_log

    def _close_log(self) -> None:
        if self.stderr_log is not None:
            self.stderr_log.close()
            self.stderr_log = None

    def _log_size(self) -> int:
        with self._killing:  # a close closes the log under this lock
            if self.stderr_log is None:
                return 0
            return os.fstat(self.stderr_log.fileno()).st_size

    def stderr_tail(self, limit: int = 1500, since: int = 0) -> str:
        """The end of what the worker wrote to stderr from byte ``since`` on (another check's
        lines are not this one's to show); TensorFlow noise filtered out."""
        with self._killing:  # a close closes the log under this lock
            if self.stderr_log is None:
                return ""
            self.stderr_log.seek(since)
            text = self.stderr_log.read().decode("utf-8", "replace")
        lines = text.splitlines()
        useful = [
            line
            for line in lines
            if line.strip() and " I tensorflow/" not in line and "W0000" not in line
        ]
        return "\n".join(useful)[-limit:]

    def request(
        self,
        header: Mapping[str, Any],
        arrays: Mapping[str, Array],
        timeout: float,
        cancelled: Callable[[], bool] = lambda: False,
    ) -> Reply:
        """Send one request and wait up to ``timeout`` seconds for its answer, or until it is
        ``cancelled``: then the worker is stopped, as on a timeout."""
        if self.closed:
            return Reply("crash", {}, {}, "the checker was stopped before this check ran")
        startup = 0.0
        if not self.alive:
            began = time.perf_counter()
            self.start()
            startup = time.perf_counter() - began
        process = self.process  # read once: a close from another thread clears it
        if process is None or process.stdin is None:
            return _STOPPED
        # The worker stops a check that overruns its time itself, and stays warm; the pool
        # stops the worker only if that answer, too, is late.
        header = {**header, "time_limit": timeout}
        self.log_offset = self._log_size()
        self.cancel_asked = False
        try:
            protocol.write_message(process.stdin, header, arrays)
        except OSError as exc:  # its end of the pipe is gone: it died
            reply = self._crashed(f"the worker stopped accepting requests ({exc})")
        except ValueError:
            if not (self.closed or process.stdin.closed):
                raise  # a request that cannot be encoded: our bug, not a stop
            reply = _STOPPED  # our end was closed under us: the pool was shut
        else:
            reply = self._receive(timeout + WORKER_GRACE, cancelled)
            reply = self._check_process_ended(reply, timeout)
        return dataclasses.replace(reply, startup=startup)

    def _check_process_ended(self, reply: Reply, timeout: float) -> Reply:
        """A check whose own process timed out or died, said as the pool says it of a worker
        (the worker itself lives on)."""
        if reply.outcome != "ok" or reply.header.get("op") not in {"timeout", "crash", "cancelled"}:
            return reply
        written = {"written_files": reply.header.get("written_files", [])}
        if reply.header["op"] == "cancelled":
            return Reply("cancelled", written, {}, CANCELLED)
        if reply.header["op"] == "timeout":
            detail = f"no answer within {timeout:g} s; its process was stopped"
            return Reply("timeout", written, {}, detail)
        tail = scrubbed(self.stderr_tail(600, since=self.log_offset), str(self.root))
        said = f"; it said: {tail}" if tail else ""
        return Reply("crash", written, {}, f"{reply.header.get('detail', '')}{said}")

    def _receive(self, timeout: float, cancelled: Callable[[], bool] = lambda: False) -> Reply:
        process = self.process
        if process is None or process.stdout is None:
            return _STOPPED  # closed by another thread: the pool was shut
        try:
            return self._wait_for_answer(process.stdout, timeout, cancelled)
        except ValueError:  # its streams were closed under us, for the same reason
            return _STOPPED

    def _wait_for_answer(
        self, stream: IO[bytes], timeout: float, cancelled: Callable[[], bool]
    ) -> Reply:
        deadline = time.monotonic() + timeout
        told_at = 0.0  # when the worker was asked to cancel; 0 until then, and once it said
        # it runs on (a check that wrote into the project is not stopped: see .isolation)
        while True:
            now = time.monotonic()
            if now >= deadline:
                self.kill()
                return Reply(
                    "timeout", {}, {}, f"no answer within {timeout:g} s; the worker was restarted"
                )
            if told_at and now - told_at > CANCEL_GRACE:  # it did not say: stop it
                self.kill()
                return Reply("cancelled", {}, {}, CANCELLED)
            ready, _, _ = select.select([stream], [], [], min(_POLL, deadline - now))
            if ready:
                try:
                    header, arrays = protocol.read_message(stream)
                except (EOFError, OSError, protocol.ProtocolError):  # ECONNRESET, from a socket
                    return self._crashed("the worker died")
                if header.get("op") == "running on":
                    told_at = 0.0
                    continue
                self._over_memory()
                return Reply("ok", header, arrays)
            if cancelled() and not told_at and not self.cancel_asked:
                self.cancel_asked = True
                if not self._ask_to_cancel():
                    self.kill()
                    return Reply("cancelled", {}, {}, CANCELLED)
                told_at = time.monotonic()
            if self._over_memory():
                self.kill()
                return Reply(
                    "crash",
                    {},
                    {},
                    f"worker exceeded the memory limit of {self.memory_limit_mb} MiB",
                )

    def _ask_to_cancel(self) -> bool:
        """Ask the worker to stop the check it runs (it answers ``cancelled``, or runs on a
        check that already wrote into the project, see :mod:`.isolation`); False if it
        cannot be told, and must be stopped."""
        process = self.process
        if process is None or process.stdin is None:
            return False
        try:
            protocol.write_message(process.stdin, {"op": "cancel"})
        except (OSError, ValueError):
            return False
        return True

    def _over_memory(self) -> bool:
        rss = self.rss_kb()
        self.peak_rss_kb = max(self.peak_rss_kb, rss)
        return bool(self.memory_limit_mb) and rss > self.memory_limit_mb * 1024

    def rss_kb(self) -> int:
        """Resident memory now of the largest process of the worker's tree: the worker, or
        the check's process forked from it, or one the snippet started (0 when unknown). The
        largest, not the sum: a forked check shares most of its pages with the worker."""
        process = self.process
        if process is None:
            return 0
        return max((_rss_kb(pid) for pid in _process_tree(process.pid)), default=0)

    def _crashed(self, what: str) -> Reply:
        process = self.process
        if process is None:
            return _STOPPED
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(timeout=5)
        code = self.kill()
        tail = scrubbed(self.stderr_tail(600, since=self.log_offset), str(self.root))  # published
        said = f"; it said: {tail}" if tail else ""
        return Reply(
            "crash",
            {},
            {},
            f"{what} ({_describe_exit(code)}){said}; a fresh worker takes the next check",
        )

    def kill(self) -> int | None:
        """Stop the process group at once (a snippet may have started children).

        Returns the exit status; the pipes are closed and the worker is ready to restart.
        """
        with self._killing:  # a close (Ctrl-C) may meet a start or a timeout doing the same
            process = self.process
            code = None
            if process is not None:
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
                self._close_log()


_STOPPED = Reply("crash", {}, {}, "the checker was stopped while this check ran")
EXIT_WAIT = 5.0
"""Seconds a worker seen ending is waited for, until the zygote can tell its exit status."""
CANCEL_GRACE = 5.0
"""Seconds a worker asked to cancel a check has to answer (``cancelled``, or that the check
runs on) before it is stopped."""
WORKER_GRACE = 5.0
"""Seconds past a check's time limit that the pool waits for the worker to say it stopped
the check, before it stops the worker itself."""


def _process_tree(pid: int, limit: int = 256) -> list[int]:
    """``pid`` and its descendants (Linux; ``pid`` alone elsewhere), ``limit`` at most."""
    tree: list[int] = []
    pending = [pid]
    while pending and len(tree) < limit:
        current = pending.pop()
        tree.append(current)
        pending.extend(children(current))
    return tree


def _rss_kb(pid: int) -> int:
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return 0
    for line in status.splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def _describe_exit(code: int | None) -> str:
    if code is None:
        return "exit status unknown"
    if code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exit code {code}"


class IdleWorkers:
    """The pool's idle workers, handed out by the order of the checks asking for them.

    A worker given back goes straight to the waiting request with the lowest ``order`` (the
    earliest block of the batch; the earliest to ask among equals), never to whichever thread
    happens to ask next: with a plain queue, the thread that had just given a worker back
    could take it again at once, request after request, and starve the block the caller was
    waiting on. With no request waiting, a running worker goes before one that would have to
    start (after a timeout killed it, say), and the one most recently given back goes first
    (its memory is warm).
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._workers: list[Worker] = []
        self._waiting: list[tuple[float, int, _Waiter]] = []
        self._asked = 0

    def put(self, worker: Worker) -> None:
        with self._lock:
            if self._waiting:
                waiter = heapq.heappop(self._waiting)[2]
                waiter.worker = worker
                waiter.ready.set()
            else:
                self._workers.append(worker)

    def get(self, order: float = math.inf) -> Worker:
        with self._lock:
            if self._workers:  # then no request is waiting either
                return self._take()
            waiter = _Waiter()
            self._asked += 1
            heapq.heappush(self._waiting, (order, self._asked, waiter))
        try:
            waiter.ready.wait()
        except BaseException:  # Ctrl-C while waiting: leave no waiter to swallow a worker
            with self._lock:
                handed = waiter.worker
                if handed is None:
                    self._waiting = [entry for entry in self._waiting if entry[2] is not waiter]
                    heapq.heapify(self._waiting)
            if handed is not None:
                self.put(handed)
            raise
        assert waiter.worker is not None
        return waiter.worker

    def get_nowait(self) -> Worker:
        with self._lock:
            if not self._workers:
                raise queue.Empty
            return self._take()

    def _take(self) -> Worker:
        running = [n for n, worker in enumerate(self._workers) if worker.started]
        return self._workers.pop(running[-1] if running else -1)

    def qsize(self) -> int:
        with self._lock:
            return len(self._workers)


@dataclass(eq=False)
class _Waiter:
    ready: threading.Event = dataclasses.field(default_factory=threading.Event)
    worker: Worker | None = None


class WorkerPool:
    """N workers, started lazily, shared by threads; each request borrows one idle worker."""

    def __init__(
        self,
        root: Path,
        size: int = 1,
        python: str | None = None,
        memory_limit_mb: int = 0,
        *,
        fork: bool = True,
        keep_alive: float = 0.0,
        env: tuple[str, ...] = (),
    ) -> None:
        if size < 1:
            raise WorkerError(f"workers must be at least 1, got {size}")
        self.root = root
        self.size = size
        self.zygote: Zygote | None = None
        if fork and fork_supported():
            kept = keep_alive > 0
            self.zygote = (
                KeptZygote(root, python, keep_alive, env) if kept else Zygote(root, python, env)
            )
        self._all = [Worker(root, python, memory_limit_mb, self.zygote, env) for _ in range(size)]
        self._idle = IdleWorkers()
        for worker in self._all:
            self._idle.put(worker)
        self._lock = threading.Lock()
        self._starters: list[threading.Thread] = []
        self.started_ahead = 0.0
        """Seconds spent starting workers ahead of any request (:meth:`start_idle`)."""

    def request(
        self,
        header: Mapping[str, Any],
        arrays: Mapping[str, Array],
        timeout: float,
        cancelled: Callable[[], bool] = lambda: False,
        order: float = math.inf,
    ) -> tuple[Reply, dict[str, Any]]:
        """Run one request on an idle worker, waiting for one if all are busy; also return
        that worker's environment. A request ``cancelled`` while it waited runs nothing.
        Waiting requests get workers by ``order`` (lowest first), then first come."""
        began = time.perf_counter()
        worker = self._idle.get(order)
        queued = time.perf_counter() - began
        if cancelled():
            self._idle.put(worker)
            return Reply("cancelled", {}, {}, CANCELLED, queued=queued), {}
        try:
            reply = worker.request(header, arrays, timeout, cancelled)
            return dataclasses.replace(reply, queued=queued), dict(worker.environment)
        finally:
            self._idle.put(worker)

    def warm_up(self) -> None:
        """Start every worker now (in parallel) instead of on first use; a failure raises."""
        failures = self._start_borrowed(count_ahead=False)
        if failures:
            raise failures[0]

    def start_idle(self) -> None:
        """Start the idle workers that are not running, in parallel. A failure is left for
        the next request to meet and report."""
        self._start_borrowed(count_ahead=True)

    def _start_borrowed(self, *, count_ahead: bool) -> list[Exception]:
        """Start the idle workers that are not running, each borrowed as a request borrows it:
        a request arriving meanwhile waits for that worker's start instead of racing it (or
        killing the check it runs), and gets it as soon as it is up."""
        failures: list[Exception] = []

        def start(worker: Worker) -> None:
            try:
                if not worker.closed and not worker.alive:
                    began = time.perf_counter()
                    worker.start()
                    if count_ahead:
                        with self._lock:
                            self.started_ahead += time.perf_counter() - began
            except Exception as exc:  # handed to the caller
                failures.append(exc)
            finally:
                self._idle.put(worker)

        borrowed: list[Worker] = []
        while True:
            try:
                borrowed.append(self._idle.get_nowait())
            except queue.Empty:
                break
        threads: list[threading.Thread] = []
        try:
            for worker in borrowed:
                thread = threading.Thread(target=start, args=(worker,), daemon=True)
                thread.start()  # may fail (no thread left to start): hand the rest back
                threads.append(thread)
        finally:
            for worker in borrowed[len(threads) :]:
                self._idle.put(worker)
        for thread in threads:
            thread.join()
        return failures

    def start_in_background(self) -> threading.Thread:
        """:meth:`start_idle` on a thread of its own; :meth:`close` waits for it to end."""
        thread = threading.Thread(target=self.start_idle, name="formula-check-start", daemon=True)
        with self._lock:  # started under the lock: a close never joins an unstarted thread
            self._starters = [t for t in self._starters if t.is_alive()]
            thread.start()
            self._starters.append(thread)
        return thread

    @property
    def peak_rss_kb(self) -> int:
        """The largest resident size any worker reached."""
        return max((w.peak_rss_kb for w in self._all), default=0)

    def alive_pids(self) -> list[int]:
        """Process ids of the running workers (for tests and diagnostics)."""
        processes = [w.process for w in self._all]  # each read once: a kill may clear it
        return [p.pid for p in processes if p is not None and p.poll() is None]

    def close(self) -> None:
        """Stop every worker, then the zygote; later requests are refused, not restarted.

        Workers go first, so that the zygote reaps them (their CPU time is then counted in
        this process's children, as a spawned worker's is; a kept zygote's handler reaps them
        instead, and their time is not)."""
        if self.zygote is not None:
            self.zygote.closed = True  # no fork from now on
            # a zygote starting again (the last one died) has no workers to reap, but holds
            # the lock reaping needs until its TensorFlow import ends: it is stopped first
            self.zygote.interrupt(only_a_start=True)
        for worker in self._all:
            worker.close()
        if self.zygote is not None:
            self.zygote.shut()
        with self._lock:
            starters, self._starters = self._starters, []
        for thread in starters:  # each start has met the close by now, and ends at once
            if thread is not threading.current_thread():
                thread.join(STARTUP_TIMEOUT)
