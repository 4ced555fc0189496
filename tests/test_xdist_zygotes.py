"""``pytest --formula-check -n 2``: the xdist workers share one TensorFlow import.

Each xdist worker is a pytest process with its own engine; without sharing, each starts a
zygote, and each zygote imports TensorFlow. The plugin gives them one kept zygote instead
(``keep_alive``), which forks each of them its worker: one import for the run.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

import pytest

from sites import softmax_site
from support import _processes

pytestmark = pytest.mark.tf


def has_tensorflow(pid: int) -> bool:
    """Has process ``pid`` TensorFlow's library loaded?"""
    try:
        return b"tensorflow" in Path(f"/proc/{pid}/maps").read_bytes()
    except OSError:
        return False


def importers(project: Path) -> set[int]:
    """The processes serving ``project`` that imported TensorFlow themselves: those that
    have it loaded while their parent has not (a forked worker inherits its zygote's import;
    the process that starts a kept zygote exits before the import)."""
    commands, parents = _processes()
    loaded = {
        pid
        for pid, command in commands.items()
        if b"formula_check.worker.zygote" in command
        and str(project).encode() in command
        and has_tensorflow(pid)
    }
    return {pid for pid in loaded if parents.get(pid) not in loaded}


def test_two_xdist_workers_start_one_tensorflow_process(tmp_path: Path) -> None:
    site = softmax_site(tmp_path / "site", pages=4, blocks=2)
    runtime = Path(tempfile.mkdtemp(prefix="fc-x-", dir="/tmp"))  # short: a socket path
    env = {**os.environ, "XDG_RUNTIME_DIR": str(runtime)}
    seen: set[int] = set()
    done = threading.Event()

    def watch() -> None:
        while not done.wait(0.05):
            seen.update(importers(site.resolve()))

    watcher = threading.Thread(target=watch)
    watcher.start()
    try:
        run = subprocess.run(
            [
                *(sys.executable, "-m", "pytest", "--formula-check", "docs", "-n", "2", "-q"),
                *("-p", "no:cacheprovider", "--formula-check-no-cache"),
            ],
            cwd=site,
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
    finally:
        done.set()
        watcher.join()
        subprocess.run([sys.executable, "-m", "formula_check.cli", "stop"], env=env, check=False)
        shutil.rmtree(runtime, ignore_errors=True)
    assert "2 failed, 6 passed" in run.stdout, run.stdout  # blocks 3 and 6 drift
    assert len(seen) == 1, f"processes that imported TensorFlow: {len(seen)}"
