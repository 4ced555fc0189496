"""A warm ``mkdocs build`` (every block in the cache) shows what the cold one showed, and loads
nothing that only checking needs: no TensorFlow, no worker, no drawing, judging or serving code.

One small site is built cold once (TensorFlow runs); every test below rebuilds it warm, in a
process of its own, as a user does.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

pytestmark = [pytest.mark.site, pytest.mark.tf]

REPORT_JSON = "formula-check-report.json"
SEARCH_INDEX = "search/search_index.json"
"""Left out of every comparison: MkDocs' search plugin indexes a page before formula-check
fills its placeholders, so a card whose result was not in yet when its page rendered (always
in a cold build; in a warm one, when the page renders before the cache lookup ends) is indexed
as its code, a card already in as its text. The HTML is the same either way."""
CACHED_BADGE = ' <span class="fc-cached">cached</span>'

PAGE = """\
# Warm

```formula id="sdpa" oracle="attention" dims="b=1 n=4 m=5 d_k=8 d_v=6" mask="causal"
\\text{Attention}(Q, K, V) = \\text{softmax}\\left(\\frac{QK^T}{\\sqrt{d_k}} + M\\right)V
```

```python
import tensorflow as tf


def scaled_dot_product_attention(q, k, v, mask=None):
    scores = tf.matmul(q, k, transpose_b=True)
    scores = scores / tf.math.sqrt(tf.cast(tf.shape(k)[-1], tf.float32))
    if mask is not None:
        scores += mask * -1e9
    weights = tf.nn.softmax(scores, axis=-1)
    return tf.matmul(weights, v), weights
```

Softmax, with the wrong axis (a mismatch is cached like a pass):

```formula id="softmax" oracle="softmax" timing="off" expect="mismatch"
\\text{softmax}(x)_i = \\frac{e^{x_i}}{\\sum_j e^{x_j}}
```

```python
import tensorflow as tf


def softmax(x):
    return tf.nn.softmax(x, axis=0)
```
"""

CONFIG = """\
site_name: warm
plugins:
  - search
  - formula-check
markdown_extensions:
  - pymdownx.superfences
  - pymdownx.arithmatex:
      generic: true
"""

# Runs MkDocs' own command line in this process, then says what the process loaded and
# started: every subprocess and fork is counted (a worker or its zygote would be one).
PROBE = """\
import json, os, subprocess, sys

started = []
popen_init = subprocess.Popen.__init__


def counted_popen(self, *args, **kwargs):
    started.append(repr(args[0] if args else kwargs.get("args")))
    popen_init(self, *args, **kwargs)


subprocess.Popen.__init__ = counted_popen
for name in ("fork", "forkpty", "posix_spawn", "posix_spawnp"):
    if hasattr(os, name):
        real = getattr(os, name)
        setattr(os, name, lambda *a, _real=real, _name=name, **k: (started.append(_name), _real(*a, **k))[1])

from mkdocs.__main__ import cli

try:
    cli.main(["build", "--strict", "-q"], standalone_mode=False)
finally:
    print(json.dumps({"modules": sorted(sys.modules), "started": started}))
"""


@dataclass(frozen=True)
class Site:
    """The project, and a copy of its ``site/`` as the cold build left it."""

    project: Path
    cold: Path


# MkDocs' theme writes the build's date into every page unless this fixes it.
REPRODUCIBLE = {**os.environ, "SOURCE_DATE_EPOCH": "1700000000"}


def build(project: Path) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "-q"],
        cwd=project,
        env=REPRODUCIBLE,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return done


def files(site: Path) -> dict[str, bytes]:
    """Every file of ``site`` by its path, but the search index."""
    found = {path.relative_to(site).as_posix(): path for path in sorted(site.rglob("*"))}
    return {
        name: path.read_bytes()
        for name, path in found.items()
        if path.is_file() and name != SEARCH_INDEX
    }


def blocks(site: Path) -> list[dict[str, object]]:
    return list(json.loads((site / REPORT_JSON).read_text(encoding="utf-8"))["blocks"])


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Site:
    project = tmp_path_factory.mktemp("warm") / "project"
    (project / "docs").mkdir(parents=True)
    (project / "docs" / "index.md").write_text(PAGE, encoding="utf-8")
    (project / "mkdocs.yml").write_text(CONFIG, encoding="utf-8")
    build(project)
    cold = project.parent / "cold-site"
    shutil.copytree(project / "site", cold)
    assert [block["cached"] for block in blocks(cold)] == [False, False]
    return Site(project, cold)


def test_warm_builds_are_byte_identical_and_show_what_the_cold_one_showed(site: Site) -> None:
    build(site.project)
    first = files(site.project / "site")
    build(site.project)
    second = files(site.project / "site")
    assert [block["cached"] for block in blocks(site.project / "site")] == [True, True]
    assert first.keys() == second.keys()
    assert [name for name in first if first[name] != second[name]] == []

    cold = files(site.cold)
    assert cold.keys() == first.keys()
    figures = [name for name in cold if name.startswith("assets/formula-check/")]
    assert any(name.endswith(".svg") for name in figures), "the attention card has a heatmap"
    # A published page never says a card was cached (readers cannot act on it); the report's
    # JSON says so per block. Nothing else may differ.
    page = "index.html"
    assert CACHED_BADGE not in first[page].decode()
    assert first[page] == cold[page]
    assert all(block["cached"] for block in json.loads(first[REPORT_JSON])["blocks"])
    warm_report = json.loads(first[REPORT_JSON])
    for block in warm_report["blocks"]:
        block["cached"] = False
    assert warm_report == json.loads(cold[REPORT_JSON])
    differing = {name for name in cold if cold[name] != first[name]}
    report_page = "formula-check-report/index.html"
    assert differing == {REPORT_JSON, report_page}, "the report page says which were cached"
    assert "cached" in first[report_page].decode() and "cached" not in cold[report_page].decode()
    for name in figures:
        assert first[name] == cold[name], f"{name} was drawn again, differently"


def test_a_damaged_figure_entry_is_drawn_again_to_the_same_bytes(site: Site) -> None:
    build(site.project)
    before = files(site.project / "site")
    entries = sorted((site.project / ".cache" / "formula-check" / "figures").rglob("*.fcf"))
    assert entries
    for entry in entries:
        entry.write_bytes(entry.read_bytes()[:-1] + b"?")
    build(site.project)
    after = files(site.project / "site")
    assert after == before
    assert all(entry.is_file() for entry in entries), "stored again"


def probe(project: Path) -> dict[str, list[str]]:
    done = subprocess.run(
        [sys.executable, "-c", PROBE],
        cwd=project,
        env=REPRODUCIBLE,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    found: dict[str, list[str]] = json.loads(done.stdout.strip().splitlines()[-1])
    assert all(block["cached"] for block in blocks(project / "site"))
    return found


def loaded(modules: list[str], *names: str) -> list[str]:
    wanted = re.compile("|".join(rf"{re.escape(name)}(\..*)?" for name in names))
    return [module for module in modules if wanted.fullmatch(module)]


def test_a_cached_build_starts_no_worker_and_loads_no_tensorflow(site: Site) -> None:
    found = probe(site.project)
    assert found["started"] == []
    assert loaded(found["modules"], "tensorflow", "keras") == []


def test_a_cached_build_loads_neither_drawing_judging_nor_serving_code(site: Site) -> None:
    modules = probe(site.project)["modules"]
    assert "formula_check.faces.mkdocs_plugin" in modules  # the probe did run the plugin
    assert (
        loaded(
            modules,
            "formula_check.render.heatmaps",
            "formula_check.render.svg",
            "formula_check.checking.judge",
            "formula_check.latex",
            "formula_check.checking.compare",
            "mkdocs.livereload",
            "watchdog",
        )
        == []
    )


def test_a_cached_build_loads_no_planning_and_no_worker_client(site: Site) -> None:
    modules = probe(site.project)["modules"]
    assert (
        loaded(
            modules,
            "formula_check.planning.plan",
            "formula_check.messages",
            "formula_check.runtime.pool",
            "threadpoolctl",
        )
        == []
    )


def test_a_cached_build_does_not_import_numpy(site: Site) -> None:
    """Its results' arrays stay the stored bytes (their figures are found by those bytes), and
    the core names NumPy through :mod:`formula_check.lazy` (60 to 90 ms of import saved)."""
    assert loaded(probe(site.project)["modules"], "numpy") == []
