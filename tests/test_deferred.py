"""Pages render while their blocks are checked: hooks that touch the placeholders, and Ctrl-C.

Real ``mkdocs build`` runs with the result cache off, so every card starts as a placeholder.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from support import checker_pids, wait_until

pytestmark = [pytest.mark.tf, pytest.mark.site]

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "sites" / "good"

HOOKS = """
import re

from mkdocs.plugins import event_priority


@event_priority(200)  # before formula-check, as a minifier listed first would be
def on_post_page(output, page, config):
    if page.file.src_uri == "index.md":  # re-serialised: same element, other attribute syntax
        return output.replace(" data-search-exclude>", ' data-search-exclude="">')
    if page.file.src_uri == "layers.md":  # dropped altogether
        return re.sub(r'<div class="fc-pending"[^>]*></div>', "", output)
    return output
"""

SLOW = """```formula id="slow-{index}" oracle="softmax" dims="b=1 n=2 m=3" timing="off" seed="{index}"
\\text{{softmax}}(x)_i = \\frac{{e^{{x_i}}}}{{\\sum_j e^{{x_j}}}}
```

```python
import os
import tempfile
import time

import tensorflow as tf


def softmax(x):
    open(os.path.join(tempfile.gettempdir(), "started-{index}"), "w").close()
    time.sleep(1.5)
    return tf.nn.softmax(x, axis=-1)
```
"""


# A test runner may run us with SIGINT ignored (xdist workers do), and an ignored signal stays
# ignored across exec: MkDocs is started with Python's own Ctrl-C handler put back.
MKDOCS_WITH_CTRL_C = (
    "import runpy, signal, sys; signal.signal(signal.SIGINT, signal.default_int_handler); "
    "sys.argv = ['mkdocs', *sys.argv[1:]]; runpy.run_module('mkdocs', run_name='__main__')"
)


def build(project: Path, *extra: str, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", MKDOCS_WITH_CTRL_C, "build", *extra],
        cwd=project,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,  # its own group: SIGINT reaches it as a terminal's Ctrl-C would
    )


def test_cards_survive_rewritten_placeholders_and_missing_ones_are_reported(
    tmp_path: Path,
) -> None:
    project = tmp_path / "good"
    shutil.copytree(FIXTURE, project, ignore=shutil.ignore_patterns("site", ".cache"))
    (project / "hooks.py").write_text(HOOKS, encoding="utf-8")
    config = (project / "mkdocs.yml").read_text(encoding="utf-8")
    config = config.replace("  - formula-check\n", "  - formula-check:\n      cache: false\n")
    (project / "mkdocs.yml").write_text(config + "hooks:\n  - hooks.py\n", encoding="utf-8")
    output, _ = build(project).communicate(timeout=300)
    index = (project / "site" / "index.html").read_text(encoding="utf-8")
    layers = (project / "site" / "layers" / "index.html").read_text(encoding="utf-8")
    assert "fc-pending" not in index
    assert index.count('data-fc-status="') == index.count('<div class="arithmatex">') > 3
    assert "fc-card" not in layers
    warnings = [line for line in output.splitlines() if line.startswith("WARNING")]
    assert len(warnings) == 1, output
    assert "cards missing from docs/layers.md: their placeholders were removed" in warnings[0]


class Ledger:
    """The blocks whose snippet has started, seen as it runs: each snippet leaves a file in
    its own temporary folder, the one place a confined check may write, and the build's
    temporary files (each check's folder among them) are in ``temporary``. A check's folder
    is removed once it ends, so the folder is watched all along; each snippet then sleeps
    1.5 s, long enough to be seen."""

    def __init__(self, temporary: Path) -> None:
        self.temporary = temporary
        self.started: set[str] = set()
        self._done = threading.Event()
        self._watcher = threading.Thread(target=self._watch, daemon=True)
        self._watcher.start()

    def _watch(self) -> None:
        while not self._done.wait(0.02):
            with contextlib.suppress(OSError):  # a folder may go while it is walked
                self.started |= {
                    path.name.removeprefix("started-") for path in self.temporary.rglob("started-*")
                }

    def close(self) -> None:
        self._done.set()
        self._watcher.join()


def test_ctrl_c_drops_the_queued_checks_and_leaves_no_process(tmp_path: Path) -> None:
    project = tmp_path / "slow"
    (project / "docs").mkdir(parents=True)
    page = "# Slow\n\n" + "\n".join(SLOW.format(index=i) for i in range(8))
    (project / "docs" / "index.md").write_text(page, encoding="utf-8")
    (project / "mkdocs.yml").write_text(
        "site_name: Slow\nplugins:\n  - formula-check:\n      cache: false\n"
        "markdown_extensions:\n  - pymdownx.superfences\n  - pymdownx.arithmatex:\n"
        "      generic: true\n",
        encoding="utf-8",
    )
    temporary = tmp_path / "temporary"
    temporary.mkdir()
    process = build(project, env=dict(os.environ, TMPDIR=str(temporary)))
    ledger = Ledger(temporary)
    try:
        assert wait_until(lambda: ledger.started, 180), "no snippet ever started"
        os.killpg(process.pid, signal.SIGINT)
        output, _ = process.communicate(timeout=60)
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
        ledger.close()
    ran = sorted(ledger.started)
    assert process.returncode != 0
    assert len(ran) <= 2, f"queued blocks kept running after Ctrl-C: {ran}"
    assert "crashed: " not in output
    assert wait_until(lambda: not checker_pids(project.resolve()), 10), "a worker outlived mkdocs"
