"""The result cache: keyed on content, invalidated by imported files, immune to damage."""

from __future__ import annotations

import dataclasses
import logging
import os
import py_compile
import shutil
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from formula_check.model import Location, Status
from formula_check.results import CheckResult
from formula_check.session.engine import Engine
from formula_check.snippets import resolve_code
from formula_check.store.cache import ResultCache, cache_key
from formula_check.store.read_stamps import Inputs
from formula_check.store.sealed_files import STALE_AFTER
from formula_check.store.sealed_files import log as cache_logger
from implementations import SDPA
from support import PROJECT, shared_engine, spec_for

TF = "tensorflow-cpu==2.21.0"


def test_key_ignores_location_but_not_code_or_options() -> None:
    base = spec_for("attention", SDPA)
    moved = dataclasses.replace(base, location=Location("docs/other.md", 99), block_id="other")
    assert cache_key(base, TF) == cache_key(moved, TF)
    assert cache_key(base, TF) != cache_key(spec_for("attention", SDPA + "\n# edit\n"), TF)
    assert cache_key(base, TF) != cache_key(dataclasses.replace(base, mask="causal"), TF)
    assert cache_key(base, TF) != cache_key(dataclasses.replace(base, atol=1e-3), TF)
    assert cache_key(base, TF) != cache_key(base, "tensorflow-cpu==2.22.0")


def sample_result() -> CheckResult:
    import numpy as np

    from formula_check.model import frozen_map
    from formula_check.results import ShapeInfo, TimingStats, Verdict

    return CheckResult(
        block_id="b",
        location=Location("docs/page.md", 3),
        oracle="attention",
        status=Status.MISMATCH,
        verdicts=(
            Verdict(
                "output",
                False,
                ("b", "n"),
                (2, 3),
                (2, 3),
                0.5,
                1.0,
                (1, 2),
                0.1,
                0.6,
                3,
                6,
                1e-5,
                1e-5,
            ),
        ),
        shapes=(ShapeInfo("q", "input", (2, 3), ("b", "n")),),
        timings=(TimingStats("eager", 0.001, 0.0001, 5),),
        arrays=frozen_map({"weights": np.arange(6, dtype=np.float32).reshape(2, 3)}),
        notes=("a note",),
    )


def test_round_trip_and_damage(tmp_path: Path) -> None:
    import numpy as np

    cache = ResultCache(tmp_path / "cache", tmp_path)
    spec = spec_for("attention", SDPA)
    result = sample_result()
    cache.put("ab" * 32, result, Inputs())
    loaded = cache.get("ab" * 32, spec)
    assert loaded is not None and loaded.cached
    assert (
        loaded.verdicts == result.verdicts
        and loaded.shapes == result.shapes
        and loaded.timings == result.timings
    )
    assert np.array_equal(loaded.arrays["weights"], result.arrays["weights"])
    assert loaded.location == spec.location  # relocated to the block that asked
    [path] = list((tmp_path / "cache").glob("*/*.fcr"))
    for damage in (
        lambda b: b[: len(b) // 2],
        lambda b: b[:40] + bytes([b[40] ^ 1]) + b[41:],
        lambda b: b"",
    ):
        path.write_bytes(damage(path.read_bytes()) if path.exists() else b"")
        assert cache.get("ab" * 32, spec) is None
        assert not path.exists(), "a damaged entry is removed"
        cache.put("ab" * 32, result, Inputs())


def test_a_cached_failure_is_placed_on_the_page_that_reads_it(tmp_path: Path) -> None:
    """The same failing snippet on another page (or lower on the same one) hits the entry;
    its error line follows the snippet there instead of naming where it was first seen."""
    from formula_check.results import SnippetFailure

    cache = ResultCache(tmp_path / "cache", tmp_path)
    first = spec_for("attention", SDPA, line=10)
    at_first = Location("docs/page.md", first.snippet.line_offset + 2)
    failed = dataclasses.replace(
        sample_result(),
        status=Status.ERROR,
        failure=SnippetFailure("ValueError", "boom", at_first),
    )
    cache.put("ef" * 32, failed, Inputs(), first)
    elsewhere = spec_for("attention", SDPA, line=40)
    elsewhere = dataclasses.replace(
        elsewhere,
        location=Location("docs/b.md", 36),
        snippet=dataclasses.replace(elsewhere.snippet, location=Location("docs/b.md", 40)),
    )
    moved = cache.get("ef" * 32, elsewhere)
    assert moved is not None and moved.failure is not None
    assert moved.failure.location == Location("docs/b.md", elsewhere.snippet.line_offset + 2)
    again = cache.get("ef" * 32, first)
    assert again is not None and again.failure is not None
    assert again.failure.location == at_first


def test_unchanged_entries_are_read_once_and_replaced_ones_again(tmp_path: Path) -> None:
    cache = ResultCache(tmp_path / "cache", tmp_path)
    spec = spec_for("attention", SDPA)
    key = "cd" * 32
    cache.put(key, sample_result(), Inputs())
    first = cache.get(key, spec)
    assert first is not None and cache.get(key, spec) == first
    assert cache.decoded == 1, "a rebuild does not decode an unchanged entry again"
    other = dataclasses.replace(sample_result(), status=Status.MISMATCH)
    cache.put(key, other, Inputs())  # a new file under the same name
    again = cache.get(key, spec)
    assert again is not None and again.status is Status.MISMATCH and cache.decoded == 2
    [path] = list((tmp_path / "cache").glob("*/*.fcr"))
    path.unlink()
    assert cache.get(key, spec) is None  # deleted on disk: gone from memory too


def test_no_temporary_files_left_behind(tmp_path: Path) -> None:
    cache = ResultCache(tmp_path / "cache", tmp_path)
    for i in range(5):
        cache.put(f"{i:02d}" * 32, sample_result(), Inputs())
    leftovers = [p.name for p in (tmp_path / "cache").rglob("*") if p.name.startswith(".tmp")]
    assert leftovers == []


class CacheLog(logging.Handler):
    """Collects what the cache says, wherever a build would show it."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(f"{record.levelname} {record.getMessage()}")


@pytest.fixture
def cache_log() -> Iterator[CacheLog]:
    handler, level = CacheLog(), cache_logger.level
    cache_logger.addHandler(handler)
    cache_logger.setLevel(logging.DEBUG)  # as under MkDocs, whose logger lets every level through
    yield handler
    cache_logger.removeHandler(handler)
    cache_logger.setLevel(level)


def test_an_entry_that_is_a_folder_is_checked_afresh_and_said_once(
    tmp_path: Path, cache_log: CacheLog
) -> None:
    cache = ResultCache(tmp_path / "cache", tmp_path)
    spec = spec_for("attention", SDPA)
    key = "a1" * 32
    cache.put(key, sample_result(), Inputs())
    [entry] = list((tmp_path / "cache").glob("*/*.fcr"))
    entry.unlink()
    entry.mkdir()  # a stray folder where the entry goes
    for _ in range(3):  # a rebuild meets it again
        assert cache.get(key, spec) is None
        cache.put(key, sample_result(), Inputs())
    assert entry.is_dir(), "what the cache did not write it does not delete"
    [said] = cache_log.lines
    assert said.startswith("INFO formula-check cache: ")
    assert "cache/a1/" + key + ".fcr" in said and "not a file" in said


def test_a_cache_folder_that_is_a_file_means_checking_without_it(
    tmp_path: Path, cache_log: CacheLog
) -> None:
    (tmp_path / "cache").write_text("not a folder")
    cache = ResultCache(tmp_path / "cache", tmp_path)
    spec = spec_for("attention", SDPA)
    for index in range(3):
        key = f"{index:02d}" * 32
        assert cache.get(key, spec) is None
        cache.put(key, sample_result(), Inputs())
    assert (tmp_path / "cache").read_text() == "not a folder"
    [said] = cache_log.lines
    assert said.startswith("INFO formula-check cache: cannot store results in cache")
    assert "not stored" in said


def test_an_entry_copied_over_another_is_never_served(tmp_path: Path) -> None:
    cache = ResultCache(tmp_path / "cache", tmp_path)
    spec = spec_for("attention", SDPA)
    mine, theirs = "b2" * 32, "c3" * 32
    cache.put(mine, sample_result(), Inputs())
    cache.put(theirs, dataclasses.replace(sample_result(), status=Status.VERIFIED), Inputs())
    shard = tmp_path / "cache"
    shutil.copyfile(shard / "c3" / f"{theirs}.fcr", shard / "b2" / f"{mine}.fcr")
    assert cache.get(mine, spec) is None, "another key's verdict is not this block's"
    assert not (shard / "b2" / f"{mine}.fcr").exists()
    served = cache.get(theirs, spec)
    assert served is not None and served.status is Status.VERIFIED


def test_temporaries_of_killed_builds_go_and_those_being_written_stay(tmp_path: Path) -> None:
    cache = ResultCache(tmp_path / "cache", tmp_path)
    spec = spec_for("attention", SDPA)
    cache.put("d4" * 32, sample_result(), Inputs())
    killed = tmp_path / "cache" / "d4" / ".tmp-killed.fcr"
    killed_figure = tmp_path / "cache" / "figures" / "e5" / ".tmp-killed.fcf"
    being_written = tmp_path / "cache" / "d4" / ".tmp-writing.fcr"
    killed_figure.parent.mkdir(parents=True)
    for path in (killed, killed_figure, being_written):
        path.write_bytes(b"half an entry")
    long_ago = time.time() - STALE_AFTER - 60
    for path in (killed, killed_figure):
        os.utime(path, (long_ago, long_ago))
    later = ResultCache(tmp_path / "cache", tmp_path)  # the next build
    assert later.get("f6" * 32, spec) is None
    later.put("f6" * 32, sample_result(), Inputs())
    assert not killed.exists() and not killed_figure.exists()
    assert being_written.read_bytes() == b"half an entry", "another build is writing it"


@pytest.mark.tf
def test_editing_an_imported_helper_invalidates(tmp_path: Path) -> None:
    project = tmp_path / "project"
    shutil.copytree(PROJECT, project)
    here = Location("docs/page.md", 4)
    with Engine(project) as engine:
        spec = dataclasses.replace(
            spec_for("attention", SDPA),
            snippet=resolve_code("team_model.layers:attention", project, here),
        )
        first = engine.check(spec)
        assert first.status is Status.VERIFIED and not first.cached
        again = engine.check(spec)
        assert again.cached and engine.executed == 1
        for result in (first, again):  # what `mkdocs serve` watches, fresh or from the cache
            assert "team_model/math_utils.py" in result.imports, result.imports
        helper = project / "team_model" / "math_utils.py"
        helper.write_text(
            helper.read_text().replace(
                "tf.math.sqrt(tf.cast(depth, tf.float32))", "tf.cast(depth, tf.float32)"
            )
        )
        edited = engine.check(spec)
        assert not edited.cached and engine.executed == 2
        assert edited.status is Status.MISMATCH, (
            "the worker must import the edited helper, not a stale copy"
        )


@pytest.mark.tf
def test_a_module_whose_import_failed_invalidates_once_it_is_fixed(tmp_path: Path) -> None:
    """The module that failed to import never reaches ``sys.modules``: the cache must still
    know it, or the old error outlives the fix (and a CI cache restored from an older run
    keeps failing on fixed code)."""
    project = tmp_path / "project"
    shutil.copytree(PROJECT, project)
    helper = project / "team_model" / "math_utils.py"
    good = helper.read_text()
    here = Location("docs/page.md", 4)
    with Engine(project) as engine:
        spec = dataclasses.replace(
            spec_for("attention", SDPA),
            snippet=resolve_code("team_model.layers:attention", project, here),
        )
        helper.write_text(good + "\ndef broken(:\n")
        broken = engine.check(spec)
        assert broken.status is Status.ERROR and broken.failure is not None
        assert broken.failure.type == "SyntaxError"
        assert "team_model/math_utils.py" in broken.imports, broken.imports
        assert engine.check(spec).cached, "the error itself is cached"
        helper.write_text(good)
        fixed = engine.check(spec)
        assert fixed.status is Status.VERIFIED and not fixed.cached
        helper.unlink()  # a branch without the module
        missing = engine.check(spec)
        assert missing.failure is not None and missing.failure.type == "ModuleNotFoundError"
        helper.write_text(good)  # back on the branch that has it
        restored = engine.check(spec)
        assert restored.status is Status.VERIFIED
        assert restored.cached, "the same bytes as the verified run: its entry serves again"
        assert engine.executed == 3, "the missing module was run, not served from the cache"


@pytest.mark.tf
def test_a_data_file_the_code_reads_invalidates_when_edited(tmp_path: Path) -> None:
    (tmp_path / "settings").mkdir()
    data = tmp_path / "settings" / "norm.json"
    data.write_text('{"epsilon": 1e-6}')
    code = (
        "import json\nimport tensorflow as tf\n\n"
        "def layer_norm(x, gamma, beta):\n"
        "    with open('settings/norm.json') as file:\n"
        "        epsilon = json.load(file)['epsilon']\n"
        "    mean, variance = tf.nn.moments(x, axes=[-1], keepdims=True)\n"
        "    return gamma * (x - mean) / tf.sqrt(variance + epsilon) + beta\n"
    )
    with Engine(tmp_path) as engine:
        spec = spec_for("layer_norm", code)
        first = engine.check(spec)
        assert first.status is Status.VERIFIED and first.imports == ("settings/norm.json",)
        assert engine.check(spec).cached
        data.write_text('{"epsilon": 1e-2}')
        assert engine.check(spec).status is Status.MISMATCH
        assert engine.executed == 2


@pytest.mark.tf
def test_an_import_read_from_bytecode_is_still_tracked(tmp_path: Path) -> None:
    """With a valid ``.pyc``, Python never opens the ``.py``: the bytecode read stands for its
    source, or a module that fails at import would not be tracked once compiled."""
    (tmp_path / "helper.py").write_text("SCALE = undefined_name\n", encoding="utf-8")
    py_compile.compile(str(tmp_path / "helper.py"), doraise=True)
    code = "import helper\n\ndef f(x):\n    return x\n"
    with Engine(tmp_path) as engine:
        result = engine.check(spec_for("softmax", code))
        assert result.failure is not None and result.failure.type == "NameError"
        assert result.imports == ("helper.py",), result.imports


@pytest.mark.tf
def test_a_file_the_code_writes_and_reads_back_is_no_dependency(tmp_path: Path) -> None:
    """It changes with every run: tracked, it would never let the result be cached, and
    would make ``mkdocs serve`` rebuild forever."""
    code = (
        "import numpy as np\nimport tensorflow as tf\n\n"
        "def softmax(x):\n"
        "    np.save('scratch.npy', np.arange(3))\n"
        "    np.load('scratch.npy')\n"
        "    return tf.nn.softmax(x)\n"
    )
    with Engine(tmp_path) as engine:
        spec = spec_for("softmax", code)
        assert engine.check(spec).imports == ()
        assert engine.check(spec).cached


@pytest.mark.tf
def test_a_check_the_checker_failed_on_unloads_the_projects_modules(tmp_path: Path) -> None:
    """A failure of the checker's own (here a request sent without its arrays) must not
    leave the project's modules loaded: the next check would run the old code, and its
    result would be cached with no dependency on the edited file."""
    from formula_check.messages import SnippetFailed
    from formula_check.planning.plan import plan_check

    module = tmp_path / "mymod.py"
    module.write_text("def scale(x):\n    return x\n", encoding="utf-8")
    code = "import mymod\nimport tensorflow as tf\n\ndef softmax(x):\n    return tf.nn.softmax(mymod.scale(x))\n"
    with Engine(tmp_path) as engine:
        spec = spec_for("softmax", code)
        plan = plan_check(spec, str(tmp_path))
        reply, _ = engine.pool.request(plan.request, {}, 60.0)
        assert isinstance(reply.answer, SnippetFailed), reply
        assert reply.answer.type == "InternalError", reply
        module.write_text("def scale(x):\n    return 2 * x\n", encoding="utf-8")
        result = engine.check(spec)
        assert result.status is Status.MISMATCH, "the edited module ran, not the one kept"
        assert result.imports == ("mymod.py",)


@pytest.mark.tf
def test_bypass_and_timeouts_are_not_cached(tmp_path: Path) -> None:
    uncached = shared_engine()  # warm for the whole test process, as use_cache=False
    ran, stored = uncached.executed, sorted(uncached.cache.directory.rglob("*"))
    uncached.check(spec_for("attention", SDPA))
    uncached.check(spec_for("attention", SDPA))
    assert uncached.executed == ran + 2
    assert sorted(uncached.cache.directory.rglob("*")) == stored, "a bypassed check was stored"
    with Engine(tmp_path) as engine:
        hang = spec_for(
            "attention", "def f(q, k, v):\n    while True:\n        pass\n", timeout=1.0
        )
        assert engine.check(hang).status is Status.TIMEOUT
        assert engine.check(hang).status is Status.TIMEOUT
        assert engine.executed == 2


def test_user_oracle_registers_with_metadata() -> None:
    from formula_check.oracles import get_oracle, load_oracle

    oracle = load_oracle("team_oracles:rms_norm", PROJECT)
    assert get_oracle("rms_norm") is oracle
    assert oracle.source.startswith("team_oracles:rms_norm@")
    assert (
        oracle.signature()
        == "rms_norm(x: (b, n, d_model), gain: (d_model)) -> output: (b, n, d_model)"
    )


@pytest.mark.tf
def test_user_oracle_checks_code() -> None:
    from formula_check.oracles import load_oracle
    from support import run

    load_oracle("team_oracles:rms_norm", PROJECT)
    code = (
        "import tensorflow as tf\n\ndef rms(x, g):\n"
        "    return g * x / tf.sqrt(tf.reduce_mean(x * x, axis=-1, keepdims=True) + 1e-6)\n"
    )
    assert run("rms_norm", code).status is Status.VERIFIED
    assert run("rms_norm", code.replace("x * x", "tf.abs(x)")).status is Status.MISMATCH


@pytest.mark.parametrize(
    "reference", ["no_colon", "team_oracles:missing", "no_such_pkg_zz:thing", "team_oracles:np"]
)
def test_bad_user_oracle_references(reference: str) -> None:
    from formula_check.errors import OracleError
    from formula_check.oracles import load_oracle

    with pytest.raises(OracleError):
        load_oracle(reference, PROJECT)


def test_keys_follow_the_keras_settings_a_check_reads(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Keras reads ``keras.json`` (floatx, epsilon) where KERAS_HOME leads: a result computed
    with other settings is another result, and the file is read again when it changes."""
    spec = spec_for("attention", SDPA)
    monkeypatch.setenv("KERAS_HOME", str(tmp_path))
    none = cache_key(spec, "tensorflow==2.0")
    settings = tmp_path / "keras.json"
    settings.write_text('{"floatx": "float32", "epsilon": 1e-07}')
    first = cache_key(spec, "tensorflow==2.0")
    assert first != none and cache_key(spec, "tensorflow==2.0") == first
    settings.write_text('{"floatx": "float32", "epsilon": 1e-03}')
    os.utime(settings, ns=(1, 1))  # another time, whatever the clock's resolution
    assert cache_key(spec, "tensorflow==2.0") not in {none, first}


def test_tensorflow_under_a_name_of_its_own_is_found_by_what_it_provides(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from formula_check.store import cache

    installed = cache.tensorflow_version()
    assert installed != "none"
    monkeypatch.setattr(cache, "_TF_DISTRIBUTIONS", ())
    assert cache.tensorflow_version() == installed  # found again through `tensorflow`
    monkeypatch.setattr(cache.metadata, "packages_distributions", dict)
    assert cache.tensorflow_version() == "none"
