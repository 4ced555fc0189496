"""Where a zygote kept alive between runs listens, and how it is stopped.

Its socket lies in a folder only this user can enter (:func:`runtime_folder`), named after
everything that could change what a worker computes (:func:`kept_address`). Beside it:
``start.lock`` (one starter at a time), and the zygote's ``.pid`` and ``.log``. Anyone of
this user may stop it (:func:`stop_kept`, the CLI's ``stop``); the client is
:mod:`.kept_client`, the listening process :mod:`.kept_server`.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import importlib.metadata
import json
import os
import signal
import socket
import stat
import tempfile
from pathlib import Path
from typing import IO, Any

from formula_check.errors import WorkerError
from formula_check.runtime.environment import worker_environment
from formula_check.store.digest import checker_digest


class NoKeptPlaceError(WorkerError):
    """No folder where a zygote can be kept safely."""


def kept_address(root: Path, python: str, keep_alive: float, env: tuple[str, ...] = ()) -> Path:
    """The socket of the zygote kept for this run: same project folder (the folder itself, not
    only its name), interpreter, checker, installed packages, the environment its workers get
    (``env`` names the build's variables passed besides the usual few), process settings and
    ``keep_alive``; anything that could change what a worker computes, or how long the
    zygote stays. It lies in a folder only we can enter."""
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
        raise NoKeptPlaceError("no writable folder with a short enough path for the kept zygote")
    parent = Path(usable[0])
    info = os.stat(parent)
    others_write = info.st_mode & 0o022
    if info.st_uid not in (0, os.getuid()) or (others_write and not info.st_mode & stat.S_ISVTX):
        raise NoKeptPlaceError(f"{parent} is open to other users: not keeping a zygote in it")
    folder = parent / name
    with contextlib.suppress(FileExistsError):
        folder.mkdir(mode=0o700)
    info = os.lstat(folder)
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.getuid() or info.st_mode & 0o077:
        raise NoKeptPlaceError(f"{folder} is not a private folder of this user: not using it")
    return folder


def private_open(path: Path) -> IO[bytes]:
    """Open ``path`` for writing, created 0600, never through a symbolic link."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC
    return os.fdopen(os.open(path, flags, 0o600), "wb")


def connect(address: Path) -> socket.socket | None:
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
        lock = private_open(address.parent / "start.lock")
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
    if b"formula_check.runtime.zygote" in _command_line(parent):
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
