"""What a check read, stamped and named: a file by digest, size and time (not read again while
its size and time hold), a folder by its names, an installed package's file relative to where
packages are installed; and which reads outside the project are keyed at all."""

from __future__ import annotations

import json
import os
import sysconfig
import tempfile
from pathlib import Path

import pytest

import formula_check
from formula_check.execution.outside_reads import keyed
from formula_check.store.read_stamps import INSTALLED, Inputs, ReadStamps, stamp, unchanged


def test_a_file_is_hashed_again_only_when_its_size_or_time_moves(tmp_path: Path) -> None:
    data = tmp_path / "data.txt"
    data.write_text("one")
    taken = stamp(data)
    data.chmod(0)  # unreadable: only the fast path can say it holds
    try:
        assert unchanged(data, taken)
    finally:
        data.chmod(0o644)
    os.utime(data, ns=(taken[2] + 10**9, taken[2] + 10**9))
    assert unchanged(data, taken), "the same bytes at another time: hashed, and the same"
    data.write_text("two")
    assert not unchanged(data, taken)
    data.unlink()
    assert not unchanged(data, taken)
    assert unchanged(data, stamp(data)), "missing, and still missing"


def test_entries_name_project_files_relatively_and_installed_ones_by_their_package(
    tmp_path: Path,
) -> None:
    project, elsewhere = tmp_path / "project", tmp_path / "elsewhere"
    (project / "tables").mkdir(parents=True)
    elsewhere.mkdir()
    (project / "helper.py").write_text("")
    (elsewhere / "weights.npy").write_bytes(b"w")
    purelib = Path(sysconfig.get_paths()["purelib"])
    package_file = next(path for path in purelib.rglob("*.py"))
    read = Inputs(
        files=["helper.py", str(elsewhere / "weights.npy"), str(package_file)],
        listed=["tables"],
    )
    stamps = ReadStamps.now(project, read)
    inside = package_file.relative_to(purelib).as_posix()
    assert set(stamps.files) == {
        "helper.py",
        str(elsewhere / "weights.npy"),
        f"{INSTALLED}{inside}",
    }
    assert read.project_files() == ("helper.py",)
    assert stamps.holds(project)
    assert ReadStamps.decode(stamps.encode()) == stamps
    (project / "tables" / "new.txt").write_text("")
    assert not stamps.holds(project), "a new file in a listed folder"
    stamps = ReadStamps.now(project, read)
    (elsewhere / "weights.npy").write_bytes(b"v")
    assert not stamps.holds(project), "a file outside the project, edited"


def test_only_reads_that_can_change_between_builds_are_keyed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # In a check, the temporary folder is the check's own (isolation sets it); here it stands
    # in, so that a project or environment under the system's /tmp is keyed as anywhere else.
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "check"))
    purelib = sysconfig.get_paths()["purelib"]
    checker = Path(formula_check.__file__).parent
    assert keyed("/srv/data/weights.npy")
    assert keyed(os.path.join(purelib, "somepackage", "module.py"))
    assert not keyed(json.__file__), "the standard library"
    assert not keyed(str(checker / "engine.py")), "the checker: its digest is in every key"
    assert not keyed("/proc/cpuinfo")
    assert not keyed(os.path.join(tempfile.gettempdir(), "scratch.npy")), "the check's own"
