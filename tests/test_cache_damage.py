"""Whatever happens to the cache's files, a block gets its own verdict or a fresh check.

A property test damages entry files at random (truncation, flipped bytes, appended bytes,
foreign bytes, one entry's file copied over another's, a folder in an entry's place, a file
in the cache folder's place) and asserts that a damaged or foreign entry is never served and
that nothing raises.
"""

from __future__ import annotations

import dataclasses
import logging
import shutil
import struct
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from formula_check import wire
from formula_check.model import Location, Status, frozen_map, to_plain, well_typed
from formula_check.render import labels_for
from formula_check.render.figure_cache import FigureCache, figure_key
from formula_check.results import (
    CheckResult,
    FormulaVerdict,
    ShapeInfo,
    SnippetFailure,
    SweepPoint,
    TimingStats,
    Verdict,
)
from formula_check.store import sealed_files as sealed
from formula_check.store.cache import ResultCache, result_from_json, result_to_json
from formula_check.store.read_stamps import Inputs
from formula_check.store.sealed_files import read_sealed, write_sealed
from implementations import SDPA
from support import spec_for

KEYS = ("a0" * 32, "b1" * 32, "c2" * 32)
SPEC = spec_for("attention", SDPA)
Damage = Callable[[Path, dict[str, Path]], None]


def entry_result(index: int) -> CheckResult:
    """A different result per entry: a foreign one served would show."""
    return CheckResult(
        block_id=f"b{index}",
        location=Location("docs/page.md", 3),
        oracle="attention",
        status=(Status.VERIFIED, Status.MISMATCH, Status.ERROR)[index],
        message=f"entry {index}",
        shapes=(ShapeInfo("weights", "output", (2, 3, 4), ("b", "n", "m")),),
        arrays=frozen_map({"weights": np.full((2, 3, 4), index, dtype=np.float32)}),
    )


def fingerprint(result: CheckResult) -> tuple[object, ...]:
    return (result.status, result.message, np.asarray(result.arrays["weights"]).tobytes())


def _rewrite(index: int, change: Callable[[bytes], bytes]) -> Damage:
    def apply(_: Path, paths: dict[str, Path]) -> None:
        path = paths[KEYS[index]]
        if path.is_file():
            path.write_bytes(change(path.read_bytes()))

    return apply


def _truncate(index: int, size: int) -> Damage:
    return _rewrite(index, lambda blob: blob[: min(size, len(blob) - 1)])


def _flip(index: int, at: int, bits: int) -> Damage:
    def flip(blob: bytes) -> bytes:
        if not blob:
            return blob
        at_byte = at % len(blob)
        return blob[:at_byte] + bytes([blob[at_byte] ^ bits]) + blob[at_byte + 1 :]

    return _rewrite(index, flip)


def _append(index: int, extra: bytes) -> Damage:
    return _rewrite(index, lambda blob: blob + extra)


def _replace(index: int, junk: bytes) -> Damage:
    return _rewrite(index, lambda _: junk)


def _copy(source: int, target: int) -> Damage:
    def apply(_: Path, paths: dict[str, Path]) -> None:
        copied, replaced = paths[KEYS[source]], paths[KEYS[target]]
        if copied.is_file() and replaced.parent.is_dir() and not replaced.is_dir():
            shutil.copyfile(copied, replaced)

    return apply


def _folder(index: int) -> Damage:
    def apply(_: Path, paths: dict[str, Path]) -> None:
        path = paths[KEYS[index]]
        if path.parent.is_dir() and not path.is_dir():
            path.unlink(missing_ok=True)
            path.mkdir(exist_ok=True)

    return apply


def _cache_is_a_file(directory: Path, _: dict[str, Path]) -> None:
    if directory.is_dir():
        shutil.rmtree(directory)
        directory.write_bytes(b"a file where the cache folder goes")


entry = st.integers(0, len(KEYS) - 1)
damages = st.one_of(
    st.builds(_truncate, entry, st.integers(0, 400)),
    st.builds(_flip, entry, st.integers(0, 10_000), st.integers(1, 255)),
    st.builds(_append, entry, st.binary(min_size=1)),
    st.builds(_replace, entry, st.binary(max_size=200)),
    st.tuples(entry, entry).filter(lambda pair: pair[0] != pair[1]).map(lambda p: _copy(*p)),
    st.builds(_folder, entry),
    st.just(_cache_is_a_file),
)


@settings(max_examples=150, deadline=None)
@given(st.lists(damages, min_size=1, max_size=4))
def test_a_damaged_or_foreign_entry_is_never_served(applied: list[Damage]) -> None:
    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder)
        directory = root / "cache"
        warm = ResultCache(directory, root)
        for index, key in enumerate(KEYS):
            warm.put(key, entry_result(index), Inputs())
            assert warm.get(key, SPEC) is not None
        paths = {key: warm.files.path(key) for key in KEYS}
        written = {key: paths[key].read_bytes() for key in KEYS}
        for damage in applied:
            damage(directory, paths)
        intact = {
            key: paths[key].is_file() and paths[key].read_bytes() == written[key] for key in KEYS
        }
        cold = ResultCache(directory, root)  # the next build
        for index, key in enumerate(KEYS):
            own = fingerprint(entry_result(index))
            served = cold.get(key, SPEC)
            assert (served is not None) == intact[key]
            assert served is None or fingerprint(served) == own
            again = warm.get(key, SPEC)  # the same serve session, entries in memory
            assert again is None or fingerprint(again) == own
            # and the block's fresh result is stored and served wherever the files allow it
            cold.put(key, entry_result(index), Inputs())
            stored = cold.get(key, SPEC)
            assert stored is None or fingerprint(stored) == own
            assert (stored is not None) == paths[key].is_file()


def test_figures_with_a_folder_in_their_way_are_drawn_instead(tmp_path: Path) -> None:
    labels = labels_for("en")
    drawn = FigureCache(tmp_path / "figures")(entry_result(0), None, labels)
    [stored] = list((tmp_path / "figures").glob("*/*.fcf"))
    stored.unlink()
    stored.mkdir()
    again = FigureCache(tmp_path / "figures")
    assert again(entry_result(0), None, labels) == drawn and again.drawn == 1
    (tmp_path / "cache-file").write_text("not a folder")
    elsewhere = FigureCache(tmp_path / "cache-file" / "figures")
    assert elsewhere(entry_result(0), None, labels) == drawn and elsewhere.drawn == 1


def test_another_keys_figures_are_never_shown(tmp_path: Path) -> None:
    labels = labels_for("en")
    figures = FigureCache(tmp_path)
    first = figures(entry_result(0), None, labels)
    assert figures(entry_result(1), None, labels) != first
    one, two = (figure_key(entry_result(i), None, labels, "n") for i in (0, 1))
    one, two = (tmp_path / key[:2] / f"{key}.fcf" for key in (one, two))
    shutil.copyfile(two, one)
    later = FigureCache(tmp_path)
    assert later(entry_result(0), None, labels) == first and later.drawn == 1


def _sealed_again(path: Path, key: str, change: Callable[[dict[str, Any]], None]) -> None:
    """The entry at ``path`` with its header changed by ``change``, sealed as the cache seals
    one: what a writer of the cache (or another checker's bug) could leave there."""
    header, arrays = wire.decode(read_sealed(path, key) or b"")
    change(header)
    write_sealed(path, key, wire.encode(header, arrays))


_VERDICT_TEXT = {**to_plain(Verdict("output", True, ("n",), (4,), (4,))), "max_abs": "big"}
_FORMULA_BOGUS = {"state": "bogus", "compiled": "", "max_abs": 0.0, "message": ""}


WRONG_TYPES: dict[str, Callable[[dict[str, Any]], None]] = {
    "a verdict that is a number": lambda h: h["result"].update(verdicts=[1]),
    "a failure that is a list": lambda h: h["result"].update(failure=[1]),
    "files read that are a list": lambda h: h["read"].update(files=[[1, "x"]]),
    "a stamp that is a number": lambda h: h["read"].update(files={"docs/page.md": 1}),
    "a stamp's size that is text": lambda h: h["read"].update(files={"a.md": ["0", "1", 2]}),
    "a listing digest that is a number": lambda h: h["read"].update(listed={"docs": 1}),
    "a shape that is a number": lambda h: h["result"].update(shapes=[5]),
    "notes that are a number": lambda h: h["result"].update(notes=5),
    # read without complaint before, then failing where a card, a headline or the report
    # used them: each field is now checked against its own type
    "a note that is a number": lambda h: h["result"].update(notes=[1]),
    "a message that is a number": lambda h: h["result"].update(message=5),
    "a shape's dims that are numbers": lambda h: h["result"]["shapes"][0].update(dims=[1, 2, 3]),
    "a line that is text": lambda h: h["result"]["location"].update(line="3"),
    "a verdict's size that is text": lambda h: h["result"].update(verdicts=[_VERDICT_TEXT]),
    "a formula state no card knows": lambda h: h["result"].update(formula=_FORMULA_BOGUS),
    "an elapsed time that is not a number": lambda h: h["result"].update(elapsed=float("nan")),
    "a file name no file can have": lambda h: h["read"].update(
        files={"docs/a\0b.md": ["0" * 64, 1, 2]}
    ),
}


@pytest.mark.parametrize("change", sorted(WRONG_TYPES))
def test_a_sealed_entry_with_fields_of_the_wrong_type_is_no_entry(
    tmp_path: Path, change: str
) -> None:
    key = KEYS[0]
    ResultCache(tmp_path / "cache", tmp_path).put(key, entry_result(0), Inputs())
    [path] = (tmp_path / "cache").rglob(f"{key}*")
    _sealed_again(path, key, WRONG_TYPES[change])
    cache = ResultCache(tmp_path / "cache", tmp_path)
    assert cache.get(key, SPEC) is None and cache.misses == 1
    assert not path.exists(), "discarded, to be computed afresh"


@pytest.mark.parametrize(
    "field",
    [("width", 1e999), ("height", "tall"), ("name", 5), ("title", None), ("alt", [1])],
    ids=lambda field: str(field[0]),
)
def test_a_sealed_figure_entry_with_a_field_of_the_wrong_type_is_drawn_again(
    tmp_path: Path, field: tuple[str, object]
) -> None:
    labels = labels_for("en")
    drawn = FigureCache(tmp_path)(entry_result(0), None, labels)
    key = figure_key(entry_result(0), None, labels, "n")
    path = tmp_path / key[:2] / f"{key}.fcf"
    _sealed_again(path, key, lambda h: h["figures"][0].update([field]))
    again = FigureCache(tmp_path)
    assert again(entry_result(0), None, labels) == drawn and again.drawn == 1


def test_a_sealed_entry_nested_deeper_than_json_reads_is_no_entry(tmp_path: Path) -> None:
    """A header of 100,000 opened lists: the JSON reader's RecursionError is no entry too."""
    key = KEYS[0]
    ResultCache(tmp_path / "cache", tmp_path).put(key, entry_result(0), Inputs())
    [path] = (tmp_path / "cache").rglob(f"{key}*")
    head = b"[" * 100_000
    write_sealed(path, key, struct.pack("<4sHQQ", wire.MAGIC, wire.VERSION, len(head), 0) + head)
    cache = ResultCache(tmp_path / "cache", tmp_path)
    assert cache.get(key, SPEC) is None and not path.exists()


def test_every_result_the_checker_makes_reads_back_well_typed() -> None:
    """The type check refuses nothing the cache writes: a result with every field set."""
    result = dataclasses.replace(
        entry_result(1),
        verdicts=(Verdict("output", False, ("n",), (4,), (4,), max_abs=float("nan"), n_bad=2),),
        failure=SnippetFailure("ValueError", "bad", Location("<inline>", 2), "Traceback"),
        timings=(TimingStats("eager", 0.5, 0.01, 3, 1.0),),
        sweep=(SweepPoint(8, 0.2, 0.01),),
        formula=FormulaVerdict("differs", "x * 2", 0.5, "off"),
        notes=("a note",),
        imports=("helpers.py",),
    )
    assert well_typed(result)
    assert well_typed(result_from_json(result_to_json(result), dict(result.arrays)))
    assert not well_typed(dataclasses.replace(result, expect="maybe"))  # type: ignore[arg-type]
    assert not well_typed(dataclasses.replace(result, elapsed=True))


def _huge(path: Path) -> Path:
    """A sparse file of a tebibyte: no disk used, and no memory unless someone reads it."""
    with path.open("wb") as handle:
        handle.truncate(1 << 40)
    return path


@pytest.mark.parametrize("put", ["a link to it", "it, sealed"])
def test_a_huge_file_in_an_entrys_place_is_no_entry_and_is_not_read(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, put: str
) -> None:
    key = KEYS[0]
    ResultCache(tmp_path / "cache", tmp_path).put(key, entry_result(0), Inputs())
    [path] = (tmp_path / "cache").rglob(f"{key}*")
    huge = _huge(tmp_path / "huge")
    path.unlink()
    if put == "a link to it":
        path.symlink_to(huge)
    else:  # a seal of its own first: the file is refused for its length, not its seal
        with huge.open("r+b") as handle:
            handle.write(b"\0" * 32 + struct.pack("<4sHQQ", wire.MAGIC, wire.VERSION, 2, 0))
        huge.rename(path)
    cache = ResultCache(tmp_path / "cache", tmp_path)
    with caplog.at_level(logging.INFO, logger=sealed.log.name):
        assert cache.get(key, SPEC) is None and cache.misses == 1
    if put == "a link to it":
        assert caplog.messages == [
            f"formula-check cache: cache/{key[:2]}/{key}.fcr is a link: computed afresh, "
            "stored in its place"
        ]
    # The check's result goes in the entry's place (a link's target is left as it was).
    cache.put(key, entry_result(1), Inputs())
    assert not path.is_symlink() and path.stat().st_size < 1 << 20
    served = ResultCache(tmp_path / "cache", tmp_path).get(key, SPEC)
    assert served is not None and fingerprint(served) == fingerprint(entry_result(1))
