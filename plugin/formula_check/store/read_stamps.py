"""What a check read, stamped: a cached result is served only while every stamp holds.

A check's reply names the files it read (relative to the project inside it, else absolute)
and the folders it listed (:class:`Inputs`). The build stamps each when it stores the result
(:class:`ReadStamps`): a file by its digest, size and modification time, a folder by a digest
of its names. Looking the result up again, a file whose size and time are unchanged is taken
as unchanged without reading it (another checkout's copy has other times: it is hashed); a
folder is listed again.

Files of the project are named relative to it, files of installed packages relative to the
folder they are installed in (:data:`INSTALLED`), so that an entry reads the same in another
checkout and another virtual environment; any other file by its full path.
"""

from __future__ import annotations

import functools
import hashlib
import os
import site
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from formula_check.snippets import file_digest

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


@dataclass(frozen=True)
class Inputs:
    """What a check read, as its reply says: files (relative to the project inside it, else
    absolute), folders it listed (the same), and why a read could not be followed (then its
    result is stored nowhere)."""

    files: Sequence[str] = ()
    listed: Sequence[str] = ()
    unseen: Sequence[str] = ()

    def project_files(self) -> tuple[str, ...]:
        """The files of the project among :attr:`files` (what ``mkdocs serve`` watches)."""
        return tuple(name for name in self.files if in_project(name))


INSTALLED = "<site-packages>/"
"""How an entry names a file of an installed package: relative to the folder packages are
installed in, so that the entry reads the same in a virtual environment made elsewhere (a CI
runner's, restored from another's cache). Any other file outside the project is named by its
full path."""


@functools.cache
def _installed_folders() -> tuple[str, ...]:
    """Where this interpreter installs packages, longest first: its ``site-packages`` (asked
    of :mod:`site`, already loaded; :mod:`sysconfig` would cost a warm build 15 ms)."""
    named = [p for p in sys.path if os.path.basename(p) in {"site-packages", "dist-packages"}]
    found = {
        os.path.join(way(folder), "")
        for folder in [*site.getsitepackages(), *named]
        for way in (os.path.abspath, os.path.realpath)
    }
    return tuple(sorted(found, key=len, reverse=True))


def _entry_name(name: str) -> str:
    """How an entry names the file a check read (``name``: relative to the project, else
    absolute)."""
    for folder in _installed_folders() if os.path.isabs(name) else ():
        if name.startswith(folder):
            return INSTALLED + name[len(folder) :]
    return name


def _located(root: Path, name: str) -> Path:
    """The file or folder an entry's ``name`` stands for, here."""
    if not name.startswith(INSTALLED):
        return root / name
    inside = name[len(INSTALLED) :]
    places = [Path(folder, inside) for folder in _installed_folders()]
    return next((place for place in places if os.path.lexists(place)), places[0])


def in_project(name: str) -> bool:
    """Whether an entry's ``name`` is a file of the project (``mkdocs serve`` watches those)."""
    return not (os.path.isabs(name) or name.startswith(INSTALLED))


@dataclass(frozen=True)
class ReadStamps:
    """The stamps of what a stored result's check read, each to hold again to serve it."""

    files: Mapping[str, Stamp]
    listed: Mapping[str, str]

    @classmethod
    def now(cls, root: Path, inputs: Inputs) -> ReadStamps:
        files = {_entry_name(name) for name in inputs.files}
        listed = {_entry_name(name) for name in inputs.listed}
        return cls(
            {name: stamp(_located(root, name)) for name in sorted(files)},
            {name: listing_digest(_located(root, name)) for name in sorted(listed)},
        )

    def holds(self, root: Path) -> bool:
        return all(
            unchanged(_located(root, name), was) for name, was in self.files.items()
        ) and all(listing_digest(_located(root, name)) == was for name, was in self.listed.items())

    def encode(self) -> dict[str, Any]:
        return {"files": {k: list(v) for k, v in self.files.items()}, "listed": dict(self.listed)}

    @classmethod
    def decode(cls, data: Any) -> ReadStamps:
        files, listed = data["files"], data["listed"]
        if not (isinstance(files, dict) and isinstance(listed, dict)):
            raise TypeError("what the check read is not two mappings")
        if not all(_file_name(k) and _stamp(v) for k, v in files.items()):
            raise TypeError("files read are not file names with stamps")
        if not all(_file_name(k) and isinstance(v, str) for k, v in listed.items()):
            raise TypeError("folders listed are not file names with digests")
        return cls({k: (v[0], v[1], v[2]) for k, v in files.items()}, listed)


def _stamp(value: object) -> bool:
    return (
        isinstance(value, list)
        and len(value) == 3
        and isinstance(value[0], str)
        and all(isinstance(v, int) and not isinstance(v, bool) for v in value[1:])
    )


def _file_name(name: object) -> bool:
    """Whether ``name`` is text the system takes for a file's name (no NUL, encodable)."""
    if not isinstance(name, str) or "\0" in name:
        return False
    try:
        os.fsencode(name)
    except UnicodeError:
        return False
    return True
