"""Small generated sites for the sharding and merging tests: softmax blocks, some drifting;
and sites built once for a whole test run, however many xdist workers read them."""

from __future__ import annotations

import fcntl
import os
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

_BLOCK = """
```formula id="{name}" oracle="softmax" timing="off"
\\mathrm{{softmax}}(x)_i = \\frac{{e^{{x_i}}}}{{\\sum_j e^{{x_j}}}}
```

```python
import tensorflow as tf


def softmax(x):
    return tf.nn.softmax(x, axis={axis})  # page {page}, block {block}
```
"""


def softmax_site(root: Path, pages: int, blocks: int, *, drifting: int = 3) -> Path:
    """``pages`` pages of ``blocks`` blocks each under ``root``; every ``drifting``-th block
    computes its softmax over the wrong axis (``axis=1``: a mismatch)."""
    (root / "docs").mkdir(parents=True, exist_ok=True)
    (root / "mkdocs.yml").write_text(
        "site_name: shards\nplugins:\n  - formula-check\n"
        "markdown_extensions:\n  - pymdownx.superfences\n",
        encoding="utf-8",
    )
    number = 0
    for page in range(pages):
        text = f"# Page {page}\n"
        for block in range(blocks):
            number += 1
            axis = 1 if drifting and number % drifting == 0 else -1
            text += _BLOCK.format(name=f"p{page}-b{block}", axis=axis, page=page, block=block)
        (root / "docs" / f"page{page:03d}.md").write_text(text, encoding="utf-8")
    return root


def built_once(
    tmp_path_factory: pytest.TempPathFactory, name: str, build: Callable[[Path], None]
) -> Path:
    """A folder that ``build`` fills once for this whole test run: the first xdist worker to
    ask builds it while the others wait, then each reads the same folder (a costly build
    asked for by tests that xdist gave to two workers is not paid twice). Its readers share
    it, at the same time: what one changes, the others see. A build that raised is begun
    afresh by the next to ask."""
    run = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        run = run.parent  # every worker's base folder lies in the run's own
    folder, done = run / name, run / f"{name}.built"
    with (run / f"{name}.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not done.exists():
            shutil.rmtree(folder, ignore_errors=True)
            folder.mkdir()
            build(folder)
            done.touch()
    return folder
