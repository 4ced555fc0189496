"""The cache's sealed files as a warm build reads them: readable by other users (the umask's
mode, not a private one), still written atomically, and read back only for their own key."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from formula_check import wire
from formula_check.store import sealed_files as sealed
from formula_check.store.sealed_files import (
    SEAL_SIZE,
    TEMPORARY_PREFIX,
    SealedFiles,
    read_sealed,
    seal,
)


@pytest.fixture
def umask() -> Iterator[None]:
    """The test sets the process's umask with ``os.umask``; the original comes back after."""
    original = os.umask(0o022)
    try:
        yield
    finally:
        os.umask(original)


def framed(text: str) -> bytes:
    """A message as the cache stores one (the wire's framing): an entry is read back only
    when it is exactly as long as its first bytes say."""
    return wire.encode({"text": text})


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.mark.usefixtures("umask")
@pytest.mark.parametrize(("mask", "expected"), [(0o022, 0o644), (0o002, 0o664), (0o077, 0o600)])
def test_an_entry_gets_the_mode_the_umask_gives_every_new_file(
    tmp_path: Path, mask: int, expected: int
) -> None:
    os.umask(mask)
    files = SealedFiles(tmp_path / "cache", ".fcr", "results")
    assert files.write("ab12", framed("message"))
    assert mode(files.path("ab12")) == expected
    plain = tmp_path / "plain-file"
    plain.write_bytes(b"")
    assert mode(plain) == expected, "the same as any file the process creates"


@pytest.mark.usefixtures("umask")
def test_a_rewritten_entry_gets_the_umask_mode_too(tmp_path: Path) -> None:
    os.umask(0o077)
    files = SealedFiles(tmp_path, ".fcr", "results")
    files.write("ab12", framed("old"))
    os.umask(0o022)
    files.write("ab12", framed("new"))
    assert mode(files.path("ab12")) == 0o644
    assert files.read("ab12") == framed("new")


def test_a_failed_write_leaves_the_old_entry_and_no_temporary(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    files = SealedFiles(tmp_path, ".fcr", "results")
    files.write("ab12", framed("old"))

    def no_disk(fd: int) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(sealed.os, "fsync", no_disk)
    assert not files.write("ab12", framed("new"))
    monkeypatch.undo()
    assert files.read("ab12") == framed("old")
    assert [p.name for p in files.path("ab12").parent.iterdir()] == ["ab12.fcr"]


def test_a_temporary_name_in_use_is_never_overwritten(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    files = SealedFiles(tmp_path, ".fcr", "results")
    folder = files.path("ab12").parent
    folder.mkdir(parents=True)
    taken = folder / f"{TEMPORARY_PREFIX}{'0' * 16}.fcr"
    taken.write_bytes(b"another writer's")
    tokens = iter(["0" * 16, "1" * 16])
    monkeypatch.setattr(sealed.secrets, "token_hex", lambda _: next(tokens))
    assert files.write("ab12", framed("mine"))
    assert taken.read_bytes() == b"another writer's"
    assert files.read("ab12") == framed("mine")


def test_no_unused_temporary_name_is_a_failure_said_not_raised(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    files = SealedFiles(tmp_path, ".fcr", "results")
    folder = files.path("ab12").parent
    folder.mkdir(parents=True)
    (folder / f"{TEMPORARY_PREFIX}{'0' * 16}.fcr").write_bytes(b"")
    monkeypatch.setattr(sealed.secrets, "token_hex", lambda _: "0" * 16)
    assert not files.write("ab12", framed("mine"))
    assert not files.path("ab12").exists()


def test_the_file_is_the_seal_then_the_message(tmp_path: Path) -> None:
    files = SealedFiles(tmp_path, ".fcr", "results")
    message = framed("".join(map(chr, range(256))) * 5000)
    files.write("cd34", message)
    blob = files.path("cd34").read_bytes()
    assert blob[:SEAL_SIZE] == seal("cd34", message)
    assert blob[SEAL_SIZE:] == message
    assert read_sealed(files.path("cd34"), "cd34") == message


def test_a_seal_covers_the_key_and_every_byte(tmp_path: Path) -> None:
    assert seal("k", b"m") != seal("k", b"n")
    assert seal("k", b"m") != seal("l", b"m")
    assert seal("k1", b"m") != seal("k", b"1m"), "the key ends where the message begins"
    assert len(seal("k", b"")) == SEAL_SIZE
    files = SealedFiles(tmp_path, ".fcr", "results")
    files.write("ef56", framed("payload"))
    path = files.path("ef56")
    assert read_sealed(path, "ef56") == framed("payload")
    assert read_sealed(path, "ef57") is None, "another key's file"
    blob = path.read_bytes()
    for where in (0, SEAL_SIZE - 1, SEAL_SIZE, len(blob) - 1):
        flipped = bytearray(blob)
        flipped[where] ^= 1
        path.write_bytes(bytes(flipped))
        assert read_sealed(path, "ef56") is None, f"a bit flipped at byte {where}"
    for cut in (0, 5, SEAL_SIZE, len(blob) - 1):
        path.write_bytes(blob[:cut])
        assert read_sealed(path, "ef56") is None, f"cut after {cut} bytes"


def test_a_damaged_entry_reads_as_none_and_is_removed(tmp_path: Path) -> None:
    files = SealedFiles(tmp_path, ".fcr", "results")
    files.write("ab12", framed("message"))
    path = files.path("ab12")
    path.write_bytes(path.read_bytes()[:-1] + b"?")
    assert files.read("ab12") is None
    assert not path.exists()
    assert files.read("ab12") is None, "then simply missing"
