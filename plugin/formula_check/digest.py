"""The digest of the checker's own source: part of every cache key (results, figures, the
kept zygote's address), so that a new checker never trusts what an old one computed; and the
stamps of what a check read (files, folders' listings), which a cached result is served by
only while they hold."""

from __future__ import annotations

import functools
import hashlib
import os
from pathlib import Path

from .snippets import file_digest


@functools.cache
def checker_digest() -> str:
    """A digest of this package's own source: a new checker never trusts an old verdict.

    Read once per process: the package's files do not change under a running build."""
    digest = hashlib.sha256()
    package = Path(__file__).resolve().parent
    for path in sorted(package.rglob("*.py")):
        digest.update(path.relative_to(package).as_posix().encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


Stamp = tuple[str, int, int]
"""What a file a check read looked like: its digest, its size and its modification time."""


def stamp(path: Path) -> Stamp:
    """``path``'s digest (``missing`` when it is gone or no regular file), size and time.

    The digest is hashed again only when the size, time or inode moved since it was last
    hashed in this process: blocks that read the same files (an installed package's
    modules) pay for them once per build."""
    try:
        found = path.stat()
    except OSError:
        return ("missing", -1, -1)
    identity = (found.st_size, found.st_mtime_ns, found.st_ino)
    return (_hashed(str(path), *identity), found.st_size, found.st_mtime_ns)


def unchanged(path: Path, stored: Stamp) -> bool:
    """Whether ``path`` still holds what it held when ``stored`` was taken. Its size and time
    unmoved say so at once (another machine's copy has other times: it is hashed)."""
    try:
        found = path.stat()
    except OSError:
        return stored[0] == "missing"
    if (found.st_size, found.st_mtime_ns) == stored[1:]:
        return True
    return _hashed(str(path), found.st_size, found.st_mtime_ns, found.st_ino) == stored[0]


@functools.lru_cache(maxsize=4096)
def _hashed(path: str, *identity: int) -> str:
    return file_digest(Path(path))


def listing_digest(folder: Path) -> str:
    """A digest of the names in ``folder`` (``missing`` when it is no folder): a file added
    to or removed from a folder a check listed changes it."""
    try:
        names = sorted(os.listdir(folder))
    except OSError:
        return "missing"
    return hashlib.sha256("\0".join(names).encode("utf-8", "surrogateescape")).hexdigest()[:32]
