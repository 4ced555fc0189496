"""A content-addressed on-disk cache of check results.

The key covers everything that can change a result: snippet source, oracle name and
version, every block option, TensorFlow version and this package's version. What the check
read is recorded *inside* the entry (the worker reports what was really read): every file it
imported or opened, in the project or outside it (a package on ``PYTHONPATH``, an editable
or installed one, a data file), with its digest, size and time, and every folder it listed,
with a digest of its names. An entry is served only while each still holds, so editing a
helper module, reinstalling a package or adding a file to a listed folder re-runs the checks
that used it. A check that read by ways the audit cannot follow (a program it ran, a
database, a socket) is never stored.

Files are written to a temporary name and renamed, and sealed with a SHA-256 over their key
and bytes (:mod:`.sealed_files`): a process killed mid-write leaves no entry, and a damaged entry,
or another key's copied over it, is discarded and recomputed, never served.

An entry holds nothing of the machine that wrote it that its use depends on, so that CI
runners can share one cache (copied over one another, restored into another checkout): the
key is the content (no page, line or path), the project files a check read are named
relative to the project and installed packages' files relative to where packages are
installed (:mod:`.read_stamps`; any other file by its full path), and the project's folder in
any text of the result (a message, the printed output) is stored as :data:`PROJECT_FOLDER`
and read back as the reader's own. The
environment a result names (TensorFlow's version, the device) says where it was computed;
the TensorFlow version is in the key, the device is not (a cache is shared by runners of one
kind: see ``docs/ci.md``).
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import hashlib
import json
import math
import os
from collections.abc import Mapping
from importlib import metadata
from pathlib import Path
from typing import Any

from formula_check import wire
from formula_check.model import CheckSpec, Location, Status, frozen_map, to_plain, well_typed
from formula_check.oracles import get_oracle
from formula_check.oracles.registry import UNKEYED
from formula_check.results import (
    CheckResult,
    Environment,
    FormulaVerdict,
    ShapeInfo,
    SnippetFailure,
    SweepPoint,
    TimingStats,
    Verdict,
)
from formula_check.store.digest import checker_digest
from formula_check.store.read_stamps import Inputs, ReadStamps, in_project
from formula_check.store.sealed_files import SealedFiles
from formula_check.version import __version__

SCHEMA = 3
_TF_DISTRIBUTIONS = (
    "tensorflow",
    "tensorflow-cpu",
    "tensorflow-intel",
    "tensorflow-macos",
    "tensorflow-gpu",
    "tensorflow-rocm",
    "tensorflow-aarch64",
    "tensorflow-cpu-aws",
    "intel-tensorflow",
    "tf-nightly",
    "tf-nightly-cpu",
)


@functools.cache
def numerics_versions() -> str:
    """NumPy's version (the oracles and the derived tolerance compute in it) and Keras' (its
    layers are what many blocks check): an upgrade of either re-checks every block."""
    found = []
    for name in ("numpy", "keras"):
        with contextlib.suppress(metadata.PackageNotFoundError):
            found.append(f"{name}=={metadata.version(name)}")
    return " ".join(found)


def tensorflow_version() -> str:
    """The installed TensorFlow version, read from package metadata (TensorFlow not imported):
    the usual distributions by name first, then whichever provides ``tensorflow`` (a build
    under a name of its own must not key its results as "none")."""
    for name in _TF_DISTRIBUTIONS:
        with contextlib.suppress(metadata.PackageNotFoundError):
            return f"{name}=={metadata.version(name)}"
    for name in sorted(metadata.packages_distributions().get("tensorflow", [])):
        with contextlib.suppress(metadata.PackageNotFoundError):
            normal = "-".join(name.lower().replace(".", "_").replace("-", "_").split("_"))
            return f"{normal}=={metadata.version(name)}"
    return "none"


def keras_settings() -> str:
    """A digest of the ``keras.json`` Keras reads in a check's process (``floatx``,
    ``epsilon``, the backend), where the worker's ``KERAS_HOME`` or ``HOME`` leads: other
    settings are other results. Empty when there is none."""
    home = os.environ.get("KERAS_HOME") or os.path.join(os.path.expanduser("~"), ".keras")
    path = Path(home) / "keras.json"
    try:
        stat = path.stat()
    except OSError:
        return ""
    return _file_digest(str(path), stat.st_mtime_ns, stat.st_size, stat.st_ino)


@functools.lru_cache(maxsize=8)
def _file_digest(path: str, *identity: int) -> str:
    """A file's digest, read again whenever its ``identity`` (times, size, inode) moves."""
    try:
        return hashlib.sha256(Path(path).read_bytes()).hexdigest()[:16]
    except OSError:
        return ""


def cacheable(spec: CheckSpec) -> bool:
    """Whether a check's result may be read from the cache and written to it: not when its
    oracle's code cannot be named (an oracle registered from a notebook's cell, see
    :data:`..oracles.registry.UNKEYED`), whose edits no key would follow."""
    return not get_oracle(spec.oracle).source.startswith(UNKEYED)


def cache_key(spec: CheckSpec, tf_version: str, env_digest: str = "") -> str:
    """The content address of a check (its location on the page is deliberately left out);
    ``env_digest`` stands for the values of the variables the project passes to its checks."""
    oracle = get_oracle(spec.oracle)
    fields = to_plain(spec)
    for volatile in ("block_id", "location"):
        fields.pop(volatile)
    fields["snippet"].pop("location")
    fields["snippet"].pop("line_offset")
    fields["oracle_version"] = [oracle.name, oracle.version, oracle.source]
    fields["tool"] = [
        __version__,
        SCHEMA,
        wire.VERSION,
        tf_version,
        numerics_versions(),
        checker_digest(),
        keras_settings(),
    ]
    if env_digest:
        fields["env"] = env_digest
    text = json.dumps(fields, sort_keys=True, default=_jsonable)
    return hashlib.sha256(text.encode()).hexdigest()


def _jsonable(value: Any) -> Any:
    if isinstance(value, Mapping):
        return dict(value)
    return str(value)


class ResultCache:
    """Results on disk under ``directory``, one file per key."""

    def __init__(self, directory: Path, root: Path) -> None:
        self.directory = directory
        self.root = root
        self.files = SealedFiles(directory, ".fcr", "results", root)
        self.hits = 0
        self.misses = 0
        self.decoded = 0
        # Entries already read, by key, with the identity of the file they came from: a
        # rebuild (``mkdocs serve``) re-reads only entries whose file was replaced.
        self._memory: dict[str, tuple[tuple[int, int, int], CheckResult, ReadStamps]] = {}

    def get(self, key: str, spec: CheckSpec) -> CheckResult | None:
        """The cached result for ``key`` relocated to ``spec``'s block, or None."""
        entry = self._read(key)
        if entry is None:
            self.misses += 1
            return None
        result, read = entry
        if not read.holds(self.root):
            self.misses += 1
            return None
        self.hits += 1
        return _relocated(result, spec, read)

    def _read(self, key: str) -> tuple[CheckResult, ReadStamps] | None:
        identity = self.files.identity(key)
        if identity is None:
            self._memory.pop(key, None)
            return None
        remembered = self._memory.get(key)
        if remembered is not None and remembered[0] == identity:
            return remembered[1], remembered[2]
        message = self.files.read(key)
        entry = self._decode(message, self.root) if message is not None else None
        self.decoded += 1
        if entry is None:
            self.files.discard(key)  # damaged: forget it, recompute
            self._memory.pop(key, None)
            return None
        self._memory[key] = (identity, *entry)
        return entry

    def put(
        self, key: str, result: CheckResult, inputs: Inputs, spec: CheckSpec | None = None
    ) -> None:
        """Store ``result`` atomically along with the stamps of what its check read.

        The same code on another page, or further down, hits the same entry: a failure in
        an inline snippet (``spec``'s) is stored by its line within the snippet, and placed
        on the page that reads it. A cache that cannot be written is said once, and the
        result is simply not stored."""
        read = ReadStamps.now(self.root, inputs)
        stored = dataclasses.replace(result, failure=_unplaced(result.failure, spec))
        header = {"result": portable(result_to_json(stored), self.root), "read": read.encode()}
        self.files.write(key, wire.encode(header, dict(result.arrays)))

    @staticmethod
    def _decode(message: bytes, root: Path) -> tuple[CheckResult, ReadStamps] | None:
        try:
            header, arrays = wire.decode_stored(message)
            result = result_from_json(localised(header["result"], root), arrays)
            if not well_typed(result) or not math.isfinite(result.elapsed):
                raise TypeError("a field of the result is not of its type")
            return result, ReadStamps.decode(header["read"])
        except wire.MALFORMED:
            return None


PROJECT_FOLDER = "\0project\0"
"""What the project's folder is stored as in the texts of an entry (no path has a NUL)."""
_TEXTS = ("message", "stdout", "notes")
_FAILURE_TEXTS = ("message", "traceback")


def _swap(data: dict[str, Any], old: str, new: str) -> dict[str, Any]:
    """``data`` (a stored result) with ``old`` replaced by ``new`` in each text that may name
    a file of the project: a message, the printed output, the notes, a failure's place."""

    def swapped(value: Any) -> Any:
        if isinstance(value, str):
            return value.replace(old, new)
        if isinstance(value, list):
            return [swapped(item) for item in value]
        return value

    data = {**data, **{name: swapped(data[name]) for name in _TEXTS if name in data}}
    failure = data.get("failure")
    if isinstance(failure, dict):
        failure = {**failure, **{name: swapped(failure[name]) for name in _FAILURE_TEXTS}}
        location = failure.get("location")
        if isinstance(location, dict):
            failure["location"] = {**location, "path": swapped(location["path"])}
        data["failure"] = failure
    return data


def portable(data: dict[str, Any], root: Path) -> dict[str, Any]:
    """A stored result with the project's folder (``root``) in its texts as
    :data:`PROJECT_FOLDER`: an entry reads the same under any checkout of the project."""
    return _swap(data, f"{root.resolve()}/", f"{PROJECT_FOLDER}/")


def localised(data: dict[str, Any], root: Path) -> dict[str, Any]:
    """The inverse of :func:`portable`, for the project at ``root``."""
    return _swap(data, f"{PROJECT_FOLDER}/", f"{root.resolve()}/")


class MemoryResults:
    """Results kept in this process alone, by key, with the stamps of what their checks
    read: served while those hold, placed on the asking block."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self._entries: dict[str, tuple[CheckResult, ReadStamps]] = {}

    def put(
        self, key: str, result: CheckResult, inputs: Inputs, spec: CheckSpec | None = None
    ) -> None:
        """Keep ``result`` under ``key`` (as :meth:`ResultCache.put` stores it)."""
        self._entries[key] = (
            dataclasses.replace(result, failure=_unplaced(result.failure, spec)),
            ReadStamps.now(self.root, inputs),
        )

    def get(self, key: str, spec: CheckSpec) -> CheckResult | None:
        """The result kept for ``key`` placed on ``spec``'s block, if its inputs are the same."""
        entry = self._entries.get(key)
        if entry is None:
            return None
        if not entry[1].holds(self.root):
            del self._entries[key]
            return None
        return _relocated(entry[0], spec, entry[1])


def _relocated(result: CheckResult, spec: CheckSpec, read: ReadStamps) -> CheckResult:
    """A stored result, as ``spec``'s block shows it."""
    return dataclasses.replace(
        result,
        block_id=spec.block_id,
        location=spec.location,
        cached=True,
        imports=tuple(name for name in read.files if in_project(name)),
        failure=_placed(result.failure, spec),
    )


_IN_SNIPPET = "<inline snippet>"


def _unplaced(failure: SnippetFailure | None, spec: CheckSpec | None) -> SnippetFailure | None:
    snippet = spec.snippet if spec is not None else None
    at = failure.location if failure is not None else None
    if failure is None or at is None or snippet is None or snippet.origin != "inline":
        return failure
    if at.path != snippet.location.path:
        return failure
    return dataclasses.replace(
        failure, location=Location(_IN_SNIPPET, at.line - snippet.line_offset)
    )


def _placed(failure: SnippetFailure | None, spec: CheckSpec) -> SnippetFailure | None:
    at = failure.location if failure is not None else None
    if failure is None or at is None or at.path != _IN_SNIPPET:
        return failure
    snippet = spec.snippet
    return dataclasses.replace(
        failure, location=Location(snippet.location.path, snippet.line_offset + at.line)
    )


def result_to_json(result: CheckResult) -> dict[str, Any]:
    """Every field of ``result`` but its arrays, as JSON-able values."""
    data: dict[str, Any] = to_plain(dataclasses.replace(result, arrays=frozen_map()))
    data.pop("arrays")
    return data


def result_from_json(data: Mapping[str, Any], arrays: Mapping[str, Any]) -> CheckResult:
    """The inverse of :func:`result_to_json`."""
    failure = data.get("failure")
    return CheckResult(
        block_id=data["block_id"],
        location=Location(**data["location"]),
        oracle=data["oracle"],
        status=Status(data["status"]),
        expect=data["expect"],
        verdicts=tuple(_verdict(v) for v in data["verdicts"]),
        failure=_failure(failure) if failure else None,
        message=data["message"],
        shapes=tuple(
            ShapeInfo(s["name"], s["role"], tuple(s["shape"]), tuple(s["dims"]))
            for s in data["shapes"]
        ),
        timings=tuple(TimingStats(**t) for t in data["timings"]),
        environment=Environment(**data["environment"]),
        arrays=arrays if isinstance(arrays, wire.StoredArrays) else frozen_map(arrays),
        sweep=tuple(SweepPoint(**p) for p in data["sweep"]),
        notes=tuple(data["notes"]),
        stdout=data["stdout"],
        elapsed=data["elapsed"],
        formula=FormulaVerdict(**data["formula"]) if data.get("formula") else None,
        imports=tuple(data.get("imports", ())),
    )


def _verdict(data: Mapping[str, Any]) -> Verdict:
    tuples = {"dims", "expected_shape", "actual_shape", "worst_index", "max_index"}
    fields: dict[str, Any] = {k: tuple(v) if k in tuples else v for k, v in data.items()}
    return Verdict(**fields)


def _failure(data: Mapping[str, Any]) -> SnippetFailure:
    location = data.get("location")
    return SnippetFailure(
        data["type"], data["message"], Location(**location) if location else None, data["traceback"]
    )
