"""Where the code under test comes from: a page, a file in the project, or the user's module."""

from __future__ import annotations

import hashlib
import os
import re
import stat
from pathlib import Path

from .errors import SnippetError
from .model import Location, Snippet

_MODULE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*")


def inline_snippet(source: str, location: Location, entry: str | None = None) -> Snippet:
    """Code written in the page; ``location`` is the line of the fence that opens it."""
    return Snippet("inline", source, location, entry=entry, line_offset=location.line)


def is_module_reference(reference: str) -> bool:
    """``pkg.mod:Attr`` names a module; anything with a slash or ``.py`` is a file."""
    target = reference.partition(":")[0]
    return bool(_MODULE.fullmatch(target)) and not target.endswith(".py")


def resolve_code(reference: str, root: Path, where: Location, entry: str | None = None) -> Snippet:
    """Turn a block's ``code=`` value into a :class:`Snippet`.

    ``snippets/attention.py:scaled_dot_product_attention`` is a file under the project root;
    ``my_model.layers:MultiHeadAttention`` is a module the worker imports.
    """
    target, _, attr = reference.partition(":")
    attr = attr or entry or ""
    if not target:
        raise SnippetError(f"empty code reference {reference!r}", where)
    if is_module_reference(reference):
        if not attr:
            raise SnippetError(
                f"code={reference!r} names a module; add ':Name' for the entry", where
            )
        return Snippet("module", "", Location(target), entry=attr, module=target)
    path = confined_path(target, root, where)
    relative = path.relative_to(root.resolve()).as_posix()
    try:
        source = read_regular_file(path).decode("utf-8")
    except FileNotFoundError:
        raise SnippetError(f"snippet file {target!r} does not exist", where) from None
    except NotRegularFileError as exc:
        raise SnippetError(f"snippet file {relative!r} {exc.what}", where) from None
    except UnicodeDecodeError as exc:
        problem = f"is not UTF-8 (byte 0x{exc.object[exc.start]:02X} at offset {exc.start})"
        raise SnippetError(f"snippet file {relative!r} {problem}", where) from None
    except OSError as exc:  # the strerror alone: the full error names the machine's path
        raise SnippetError(
            f"cannot read snippet file {relative!r}: {exc.strerror}", where
        ) from None
    return Snippet("file", source, Location(relative, 1), entry=attr or None, line_offset=0)


class NotRegularFileError(OSError):
    """A path names a folder, a named pipe, a device or a socket: reading it could block."""

    def __init__(self, what: str) -> None:
        super().__init__(what)
        self.what = what


_KINDS = {
    stat.S_IFDIR: "is a folder, not a file",
    stat.S_IFIFO: "is not a regular file (a named pipe)",
    stat.S_IFSOCK: "is not a regular file (a socket)",
    stat.S_IFCHR: "is not a regular file (a device)",
    stat.S_IFBLK: "is not a regular file (a device)",
}


def read_regular_file(path: Path) -> bytes:
    """The bytes of the regular file at ``path``. Opened without waiting (a named pipe with no
    writer would block its reader for ever), then refused unless it is a regular file."""
    handle = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    try:
        mode = os.fstat(handle).st_mode
    except OSError:
        os.close(handle)
        raise
    if not stat.S_ISREG(mode):
        os.close(handle)
        raise NotRegularFileError(_KINDS.get(stat.S_IFMT(mode), "is not a regular file"))
    with os.fdopen(handle, "rb") as file:
        return file.read()


def confined_path(target: str, root: Path, where: Location) -> Path:
    """``target`` resolved under ``root``; refuses absolute paths and ``..`` escapes."""
    root = root.resolve()
    candidate = Path(target)
    resolved = (candidate if candidate.is_absolute() else root / candidate).resolve()
    if not resolved.is_relative_to(root):
        raise SnippetError(
            f"snippet path {target!r} is outside the project ({resolved.name} is not under the "
            "folder that holds mkdocs.yml); snippets must live inside the project",
            where,
        )
    return resolved


def file_digest(path: Path) -> str:
    """SHA-256 of a file's bytes, or ``missing`` when it is gone (or not a regular file)."""
    try:
        return hashlib.sha256(read_regular_file(path)).hexdigest()
    except OSError:
        return "missing"
