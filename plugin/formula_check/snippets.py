"""Where the code under test comes from: a page, a file in the project, or the user's module."""

from __future__ import annotations

import functools
import hashlib
import os
import re
import stat
from pathlib import Path

from formula_check.errors import SnippetError
from formula_check.model import Location, Snippet, frozen_map

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
    if is_artifact_reference(reference):
        return resolve_artifact(reference, root, where)
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


ARTIFACT_FORMATS = ("saved_model", "keras", "tflite")
"""The prefixes of an exported artifact's ``code=``: ``saved_model:DIR[:SIGNATURE]``,
``keras:FILE`` and ``tflite:FILE[:SIGNATURE[:SAVED_MODEL_DIR]]``; a path ending in ``.keras``
or ``.tflite`` needs no prefix."""

DEFAULT_SIGNATURE = "serving_default"


def is_artifact_reference(reference: str) -> bool:
    """``saved_model:...``, ``keras:...``, ``tflite:...``, or a ``.keras``/``.tflite`` path."""
    head, _, _ = reference.partition(":")
    return head in ARTIFACT_FORMATS or head.endswith((".keras", ".tflite"))


def resolve_artifact(reference: str, root: Path, where: Location) -> Snippet:
    """An exported artifact as a :class:`Snippet`: its format, path and signature, and (as its
    ``source``) the digest of every file it is made of, so that re-exporting it re-checks it.

    The paths are confined to the project as snippet files are. A TFLite file keeps no
    attribute paths to its weights; its fourth part names the SavedModel it was converted
    from, whose weights the weight map reads."""
    parts = reference.split(":")
    if parts[0] not in ARTIFACT_FORMATS:  # a bare path: its suffix says the format
        parts.insert(0, "keras" if parts[0].endswith(".keras") else "tflite")
    form, path = parts[0], parts[1] if len(parts) > 1 else ""
    most = {"saved_model": 3, "keras": 2, "tflite": 4}[form]
    if not path or len(parts) > most:
        shapes = {
            "saved_model": "saved_model:DIR[:SIGNATURE]",
            "keras": "keras:FILE.keras",
            "tflite": "tflite:FILE.tflite[:SIGNATURE[:SAVED_MODEL_DIR]]",
        }
        raise SnippetError(f"code={reference!r}: write it as {shapes[form]}", where)
    signature = parts[2] if len(parts) > 2 and parts[2] else ""
    if form != "keras" and not signature:
        signature = DEFAULT_SIGNATURE
    weights_from = parts[3] if len(parts) > 3 else ""
    described = {"format": form, "path": "", "signature": signature, "weights_from": ""}
    manifest = []
    for key, target in (("path", path), ("weights_from", weights_from)):
        if not target:
            continue
        found = confined_path(target, root, where)
        relative = found.relative_to(root.resolve()).as_posix()
        folder = form == "saved_model" or key == "weights_from"
        manifest += _artifact_digests(found, relative, folder, where, root.resolve())
        described[key] = relative
    return Snippet(
        "artifact",
        "\n".join(manifest) + "\n",
        Location(described["path"], 1),
        entry=signature or None,
        artifact=frozen_map(described),
    )


def _artifact_digests(
    path: Path, relative: str, folder: bool, where: Location, root: Path
) -> list[str]:
    """``relative/file sha256`` for each file of the artifact at ``path``; an error naming
    what is missing: a folder where a SavedModel is expected, a file otherwise."""
    if folder:
        if not (path / "saved_model.pb").is_file():
            raise SnippetError(
                f"artifact {relative!r} is not a SavedModel folder (no saved_model.pb in it); "
                "export it first (exporting is a step of your tests or scripts, never of the "
                "docs build)",
                where,
            )
        files = _folder_files(path, relative, where, root)
    else:
        if not path.is_file():
            raise SnippetError(
                f"artifact file {relative!r} does not exist; export it first (exporting is a "
                "step of your tests or scripts, never of the docs build)",
                where,
            )
        files = [path]
    return [
        f"{(relative + '/' + p.relative_to(path).as_posix()) if folder else relative} "
        f"{_digest_of(p)}"
        for p in files
    ]


def _folder_files(path: Path, relative: str, where: Location, root: Path) -> list[Path]:
    """Every file of an artifact folder, its linked folders' included; one that resolves
    outside the project is refused (its weights would be read, and hashed, from elsewhere)."""
    files: list[Path] = []
    seen: set[Path] = set()
    for folder, folders, names in os.walk(path, followlinks=True):
        seen.add(Path(folder).resolve())
        folders[:] = [d for d in folders if (Path(folder) / d).resolve() not in seen]  # no loop
        for name in names:
            file = Path(folder) / name
            if not file.resolve().is_relative_to(root):
                inside = file.relative_to(path).as_posix()
                raise SnippetError(
                    f"artifact {relative!r}: {inside} leads outside the project (a link); an "
                    "artifact's files must live inside the project",
                    where,
                )
            if file.is_file():
                files.append(file)
    return sorted(files)


def _digest_of(path: Path) -> str:
    """A file's digest, read again whenever its identity, size or times change: a large
    artifact is hashed once per export, not once per block and build; a re-export that keeps
    the size and the modification time (``cp -p``) still changes the inode change time."""
    found = path.stat()
    return _cached_digest(path, found.st_ino, found.st_size, found.st_mtime_ns, found.st_ctime_ns)


@functools.lru_cache(maxsize=1024)
def _cached_digest(path: Path, inode: int, size: int, mtime_ns: int, ctime_ns: int) -> str:
    del inode, size, mtime_ns, ctime_ns  # part of the cache key only
    return file_digest(path)
