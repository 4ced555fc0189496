"""One sealed file per key: written atomically, read back only by the key it was written for.

Both caches (results and figures) keep ``ab/abcd….suffix`` files under a folder. A file
starts with a SHA-256 over its key and its message, so a torn write, a flipped bit or another
key's file copied into place (a sync tool, a careless ``cp``) reads back as *no entry*, never
as a wrong one. The seal guards against accidents, not against someone who can write the
cache: they could compute it too.

Nothing about the cache's files stops a build: a folder where an entry goes, a file where the
cache folder goes, an unreadable entry, all mean computing afresh. Each such problem is said
once per process, at INFO (it costs time, never a verdict, so ``--strict`` does not fail).
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import logging
import os
import secrets
import stat
import threading
import time
from pathlib import Path

from formula_check import wire

log = logging.getLogger("mkdocs.plugins.formula_check.store.cache")
"""Where cache problems are said: a name under MkDocs' logger (which shows its descendants'
records in a build) without importing MkDocs; the CLI prints this logger's records too."""

TEMPORARY_PREFIX = ".tmp-"
STALE_AFTER = 3600.0
"""Seconds after its last write when a temporary file is a killed writer's leftover.

A writer fills and renames its file within one :func:`write_sealed` call (milliseconds), so
one that old was left by a process that died mid-write. Age decides, not the writer's process
id: builds sharing a cache may run in other containers or on other machines, whose process
ids mean nothing here. A writer stalled longer than this loses only its own entry (its rename
finds no file, and it is said like any other failure to store)."""

_SEAL_CONTEXT = b"formula-check sealed file\0"
SEAL_SIZE = 32
"""Bytes of the seal at the start of every file."""
_told: set[str] = set()
_told_lock = threading.Lock()


def seal(key: str, message: bytes) -> bytes:
    """The 32-byte seal of ``message`` stored under ``key``."""
    digest = hashlib.sha256(_SEAL_CONTEXT)
    digest.update(key.encode() + b"\0")
    digest.update(message)  # fed as it is: an entry of megabytes is not copied to be hashed
    return digest.digest()


def write_sealed(path: Path, key: str, message: bytes) -> None:
    """Write ``message`` sealed for ``key``, atomically (a temporary file, then a rename).

    The file gets the mode any file this process creates gets (``0o666`` less the umask,
    ``0o644`` typically), not a private one: builds under other user ids (CI runners, a
    container sharing the cache folder) read the same cache."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = _new_temporary(path)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(seal(key, message))
            handle.write(message)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _new_temporary(path: Path) -> tuple[int, Path]:
    """A new file beside ``path``, open for writing: its name unused until now (``O_EXCL``),
    its mode the umask's (``tempfile.mkstemp`` would make it ``0o600``)."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0)
    for _ in range(100):
        tmp = path.parent / f"{TEMPORARY_PREFIX}{secrets.token_hex(8)}{path.suffix}"
        try:
            return os.open(tmp, flags, 0o666), tmp
        except FileExistsError:  # another writer's name: draw again
            continue
    raise FileExistsError(errno.EEXIST, "no unused temporary name", str(path.parent))


def read_sealed(path: Path, key: str) -> bytes | None:
    """The message of the file at ``path`` if it is sealed for ``key``, else None (``OSError``
    when it cannot be read, a link among them). The seal and the message are read apart: the
    message is never copied out of the file's bytes. Only a file exactly as long as the
    message its first bytes declare is read whole: a link is opened not at all, and another
    file (a huge one put in an entry's place) is None after its first bytes."""
    with os.fdopen(os.open(path, os.O_RDONLY | os.O_NOFOLLOW), "rb") as handle:
        size = os.fstat(handle.fileno()).st_size
        stored = handle.read(SEAL_SIZE)
        try:
            length = wire.message_length(handle.read(wire.PREFIX_SIZE))
        except wire.ProtocolError:
            return None
        if size != SEAL_SIZE + length:
            return None
        handle.seek(SEAL_SIZE)
        message = handle.read(length)
    return message if stored == seal(key, message) else None


def remove_stale_temporaries(directory: Path, older_than: float = STALE_AFTER) -> int:
    """Delete the temporary files killed writers left under ``directory``; returns how many.

    Only files last written ``older_than`` seconds ago or earlier go (see
    :data:`STALE_AFTER`): another build's file being written right now stays."""
    cutoff = time.time() - older_than
    removed = 0
    for folder, _, names in os.walk(directory):
        for name in names:
            if not name.startswith(TEMPORARY_PREFIX):
                continue
            path = Path(folder, name)
            with contextlib.suppress(OSError):  # gone already: its writer renamed it
                if path.lstat().st_mtime <= cutoff:
                    path.unlink()
                    removed += 1
    return removed


def say_once(subject: Path, message: str) -> None:
    """Log ``message`` unless something was already said about ``subject`` in this process
    (every block of every rebuild would meet the same folder in the way)."""
    with _told_lock:
        if str(subject) in _told:
            return
        _told.add(str(subject))
    log.info(f"formula-check cache: {message}")


def _in_the_way(path: Path) -> Path | None:
    """The nearest ancestor of ``path`` that exists but is not a folder, if any."""
    for folder in reversed(path.parents):
        if folder.exists() and not folder.is_dir():
            return folder
    return None


class SealedFiles:
    """The files of one cache: ``directory/ab/<key><suffix>``, each sealed for its key.

    ``what`` names what they hold in messages; paths are shown relative to ``root``."""

    def __init__(self, directory: Path, suffix: str, what: str, root: Path | None = None) -> None:
        self.directory = directory
        self.suffix = suffix
        self.what = what
        self.root = root
        self._swept = False
        self._lock = threading.Lock()

    def path(self, key: str) -> Path:
        """Where the entry for ``key`` lives."""
        return self.directory / key[:2] / f"{key}{self.suffix}"

    def identity(self, key: str) -> tuple[int, int, int] | None:
        """Inode, modification time and size of ``key``'s file (a rewrite is a new file), or
        None when there is no such file (a folder in its place is said once)."""
        path = self.path(key)
        try:
            found = path.lstat()
        except OSError:  # none yet (or no cache folder: said when storing)
            return None
        if stat.S_ISLNK(found.st_mode):  # entries are files renamed into place, never links
            say_once(path, f"{self._shown(path)} is a link: computed afresh, stored in its place")
            return None
        if not stat.S_ISREG(found.st_mode):
            self._not_a_file(path)
            return None
        return found.st_ino, found.st_mtime_ns, found.st_size

    def read(self, key: str) -> bytes | None:
        """The message stored for ``key``; None when there is none. A damaged file, or one
        sealed for another key, is removed."""
        path = self.path(key)
        if self.identity(key) is None:
            return None
        try:
            message = read_sealed(path, key)
        except OSError as exc:
            say_once(path, f"cannot read {self._shown(path)} ({exc.strerror}): computed afresh")
            return None
        if message is None:
            self.discard(key)
        return message

    def discard(self, key: str) -> None:
        """Remove ``key``'s file (damaged or unusable): it is computed again."""
        with contextlib.suppress(OSError):
            self.path(key).unlink()

    def write(self, key: str, message: bytes) -> bool:
        """Store ``message`` for ``key``; False (said once) when the files cannot be written.
        The first write also removes what killed writers left (a build that only reads
        leaves them to the next one that writes)."""
        with self._lock:
            sweep, self._swept = not self._swept, True
        if sweep:
            remove_stale_temporaries(self.directory)
        path = self.path(key)
        try:
            write_sealed(path, key, message)
        except OSError as exc:
            if path.is_dir():
                self._not_a_file(path)
                return False
            blocker = _in_the_way(path) or self.directory
            say_once(
                blocker,
                f"cannot store {self.what} in {self._shown(self.directory)} ({exc.strerror}: "
                f"{self._shown(blocker)}); those not stored are computed again next build",
            )
            return False
        return True

    def _not_a_file(self, path: Path) -> None:
        say_once(
            path,
            f"{self._shown(path)} is not a file: what it would hold is computed afresh every "
            "build (remove it to cache it again)",
        )

    def _shown(self, path: Path) -> str:
        if self.root is not None and path.is_relative_to(self.root):
            return path.relative_to(self.root).as_posix()
        return str(path)
