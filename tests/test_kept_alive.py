"""``keep_alive``: the zygote outlives its build, and the next run of the same project, with
the same interpreter, checker and environment, forks its workers from it."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import stat
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from formula_check.engine import Engine
from formula_check.errors import MissingTensorFlowError, WorkerError
from formula_check.model import Status
from formula_check.worker import zygote
from formula_check.worker.pool import (
    KeptZygote,
    fork_supported,
    is_running,
    kept_address,
    runtime_folder,
    stop_kept,
)
from implementations import SDPA
from support import PROJECT, spec_for

pytestmark = [
    pytest.mark.tf,
    pytest.mark.skipif(not fork_supported(), reason="workers are forked on Linux only"),
]


def parent_pid(pid: int) -> int:
    return int(Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[1])


def wait_until(condition: object, seconds: float = 30.0) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if condition():  # type: ignore[operator]
            return True
        time.sleep(0.05)
    return False


@pytest.fixture
def runtime(monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A private runtime folder for this test; every zygote kept there is stopped after it."""
    folder = Path(tempfile.mkdtemp(prefix="fc-run-", dir="/tmp"))  # short: a socket path
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(folder))
    yield folder
    for address in folder.glob("*/*.sock"):
        stop_kept(address)
    shutil.rmtree(folder, ignore_errors=True)


def kept_pid(address: Path) -> int:
    return int(address.with_suffix(".pid").read_text(encoding="ascii"))


def check(engine: Engine, count: int = 2) -> list[int]:
    """Run ``count`` checks (all must verify); the pids of the workers that ran them."""
    specs = [spec_for("attention", SDPA, block_id=f"kept-{n}") for n in range(count)]
    results = engine.check_many(specs)
    assert all(r.status is Status.VERIFIED for r in results), [r.message for r in results]
    return engine.pool.alive_pids()


def test_the_next_engine_forks_from_the_zygote_the_first_one_left(runtime: Path) -> None:
    address = kept_address(PROJECT.resolve(), sys.executable)
    with Engine(PROJECT, workers=2, use_cache=False, keep_alive=60) as first:
        assert isinstance(first.pool.zygote, KeptZygote)
        workers = check(first)
        kept = kept_pid(address)
        handler = {parent_pid(pid) for pid in workers}
        assert len(handler) == 1 and parent_pid(handler.pop()) == kept
    assert wait_until(lambda: not any(is_running(pid) for pid in workers)), "workers end"
    assert is_running(kept), "the zygote stays after the engine closed"
    assert stat.S_IMODE(address.stat().st_mode) & 0o077 == 0
    with Engine(PROJECT, workers=1, use_cache=False, keep_alive=60) as second:
        (worker,) = check(second, 1)
        assert parent_pid(parent_pid(worker)) == kept, "forked from the same zygote"
        assert second.startup_seconds < 5, "no TensorFlow import (a fork takes milliseconds)"


def test_another_environment_gets_another_zygote(
    runtime: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    python = sys.executable
    before = kept_address(PROJECT.resolve(), python)
    monkeypatch.setenv("TF_FORMULA_CHECK_TEST", "1")
    after = kept_address(PROJECT.resolve(), python)
    assert before != after
    monkeypatch.setenv("PYTEST_CURRENT_TEST", "some other test")
    assert kept_address(PROJECT.resolve(), python) == after, "volatile variables do not count"
    assert kept_address(PROJECT.resolve() / "docs", python) != after, "another project"
    with Engine(PROJECT, use_cache=False, keep_alive=60) as engine:
        check(engine, 1)
    assert after.exists() and not before.exists()


def test_an_idle_zygote_exits_and_cleans_up(runtime: Path) -> None:
    address = kept_address(PROJECT.resolve(), sys.executable)
    with Engine(PROJECT, use_cache=False, keep_alive=1) as engine:
        check(engine, 1)
        kept = kept_pid(address)
        time.sleep(2)
        assert is_running(kept), "a connected client keeps it, however long"
    assert wait_until(lambda: not is_running(kept)), "no client for a second: it exits"
    leftovers = [address.with_suffix(suffix) for suffix in (".sock", ".pid", ".log")]
    assert not any(path.exists() for path in leftovers)


def test_a_zygote_killed_between_runs_or_during_one_is_replaced(runtime: Path) -> None:
    address = kept_address(PROJECT.resolve(), sys.executable)
    with Engine(PROJECT, use_cache=False, keep_alive=60) as engine:
        (worker,) = check(engine, 1)
        os.kill(kept_pid(address), signal.SIGKILL)
        os.kill(parent_pid(worker), signal.SIGKILL)  # this run's handler, and with it the worker
        assert wait_until(lambda: not is_running(worker))
        (again,) = check(engine, 1)
        assert again != worker
    first = kept_pid(address)
    os.kill(first, signal.SIGKILL)  # the socket file stays behind, and nobody answers on it
    assert address.exists()
    with Engine(PROJECT, use_cache=False, keep_alive=60) as engine:
        check(engine, 1)
        assert kept_pid(address) != first and is_running(kept_pid(address))


def test_missing_tensorflow_is_reported_through_a_kept_zygote(
    runtime: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake = tmp_path / "fake"
    (fake / "tensorflow").mkdir(parents=True)
    (fake / "tensorflow" / "__init__.py").write_text("raise ImportError('no tensorflow')\n")
    monkeypatch.setenv("PYTHONPATH", str(fake))
    with (
        Engine(PROJECT, use_cache=False, keep_alive=60) as engine,
        pytest.raises(MissingTensorFlowError),
    ):
        engine.check(spec_for("attention", SDPA))


def test_a_folder_others_can_enter_is_refused(
    runtime: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = runtime_folder()
    folder.chmod(0o755)
    with pytest.raises(WorkerError, match="not a private folder"):
        runtime_folder()
    with Engine(PROJECT, use_cache=False, keep_alive=60) as engine:
        (worker,) = check(engine, 1)  # spawned instead: the check still runs
        assert parent_pid(worker) == os.getpid()
    assert not list(folder.glob("*.sock"))
    folder.chmod(0o700)


def test_connections_are_checked_for_our_user() -> None:
    ours, theirs = socket.socketpair()
    with ours, theirs:
        assert zygote.same_user(ours)
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as tcp:
        assert not zygote.same_user(tcp), "no credentials: refused"
