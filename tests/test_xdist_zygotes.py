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


def tensorflow_mapping(pid: int) -> str | None:
    """Where process ``pid`` has TensorFlow's framework library mapped (None if it has not):
    the first mapping, as the modules an import loads later land elsewhere."""
    try:
        maps = Path(f"/proc/{pid}/maps").read_text()
    except OSError:
        return None
    starts = [line.split("-")[0] for line in maps.splitlines() if "libtensorflow_fram" in line]
    return min(starts, key=lambda start: int(start, 16), default=None)


def imports(project: Path) -> set[str]:
    """One entry per import of TensorFlow among the processes serving ``project``: a forked
    process inherits its parent's mapping at the same address, while each import of its own
    maps the library where address randomisation puts it. (Telling importers by their parent
    miscounts a forked worker whose handler has just ended: it is re-parented before it dies.)"""
    commands, _ = _processes()
    mappings = (
        tensorflow_mapping(pid)
        for pid, command in commands.items()
        if b"formula_check.runtime.zygote" in command and str(project).encode() in command
    )
    return {mapping for mapping in mappings if mapping is not None}


def test_two_xdist_workers_start_one_tensorflow_process(tmp_path: Path) -> None:
    if Path("/proc/sys/kernel/randomize_va_space").read_text().strip() == "0":
        pytest.skip("address randomisation is off: two imports cannot be told from one")
    site = softmax_site(tmp_path / "site", pages=4, blocks=2)
    runtime = Path(tempfile.mkdtemp(prefix="fc-x-", dir="/tmp"))  # short: a socket path
    env = {**os.environ, "XDG_RUNTIME_DIR": str(runtime)}
    seen: set[str] = set()
    done = threading.Event()

    def watch() -> None:
        while not done.wait(0.05):
            seen.update(imports(site.resolve()))

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
        subprocess.run(
            [sys.executable, "-m", "formula_check.faces.cli", "stop"], env=env, check=False
        )
        shutil.rmtree(runtime, ignore_errors=True)
    assert "2 failed, 6 passed" in run.stdout, run.stdout  # blocks 3 and 6 drift
    assert len(seen) == 1, f"imports of TensorFlow: {sorted(seen)}"
