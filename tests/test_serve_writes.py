"""A block whose code writes into the docs folder does not make ``mkdocs serve`` rebuild
forever: its result is kept while its inputs are the same, and its card says what it wrote."""

from __future__ import annotations

import re
import shutil
import time
from pathlib import Path

import pytest

from support import CONFINED, WRITES_REFUSED
from test_serve import FIXTURE, fetch, serving

pytestmark = [pytest.mark.tf, pytest.mark.site]

WRITES_THEN = {
    "crashes": "os._exit(3)",
    "runs on after writing": "time.sleep(2.5)\n    return tf.nn.softmax(x)",
}


@pytest.mark.parametrize("then", sorted(WRITES_THEN))
def test_a_block_writing_into_the_docs_rebuilds_the_site_once_not_forever(
    tmp_path: Path, then: str
) -> None:
    project = tmp_path / "zh"
    shutil.copytree(FIXTURE, project, ignore=shutil.ignore_patterns("site", ".cache"))
    page = project / "docs" / "writes.md"
    page.write_text(
        "# Writes\n\n"
        '```formula id="writes" oracle="softmax" timing="off"\n'
        r"\text{softmax}(x)_i = \frac{e^{x_i}}{\sum_j e^{x_j}}"
        "\n```\n\n```python\nimport os\nimport time\n\nimport tensorflow as tf\n\n\n"
        "def softmax(x):\n"
        '    with open("docs/loop.md", "w", encoding="utf-8") as file:\n'
        '        file.write(f"# Written at {time.time()}\\n")\n'
        f"    {WRITES_THEN[then]}\n```\n",
        encoding="utf-8",
    )
    # untimed: the snippet sleeps, and each timed run would sleep again
    log = tmp_path / "serve.log"
    with serving(project, log=log) as (url, _):
        # MkDocs watches from the end of the first build on: an edit of the block runs it
        # (and its write) again while watched
        page.write_text(page.read_text("utf-8").replace("import time", "import time  # !"))
        time.sleep(12)  # a loop rebuilds every second or so
        builds = log.read_text(encoding="utf-8").count("Building documentation")
        card = ""
        for _ in range(20):  # the page may be between two builds: a moment later it is there
            card = fetch(url + "zh/writes/") or ""
            if "fc-card" in card:
                break
            time.sleep(0.5)
    # the first build, the edit's, and one for the file the block wrote
    assert builds <= 3, f"{builds} builds in 12 s"
    assert re.search(r"the code wrote into the project: docs/loop\.md", card), card[-3000:]


WRITERS = {
    "open": 'open("docs/out.md", "w").write("# out\\n")',
    "rename": 'open("scratch.md", "w").write("# out\\n"); os.replace("scratch.md", "docs/out.md")',
    "tensorflow": 'tf.io.write_file("docs/out.md", "# out\\n")',
    "a program": 'subprocess.run(["sh", "-c", "echo out > docs/out.md"], check=True)',
}


@pytest.mark.skipif(CONFINED, reason=WRITES_REFUSED)
@pytest.mark.parametrize("how", sorted(WRITERS))
def test_a_write_into_the_pages_folder_is_noted_however_it_is_made(
    tmp_path: Path, how: str
) -> None:
    from formula_check.session.engine import Engine
    from support import spec_for

    (tmp_path / "docs").mkdir()
    code = (
        "import os, subprocess\nimport tensorflow as tf\n\n"
        f"def softmax(x):\n    {WRITERS[how]}\n    return tf.nn.softmax(x)\n"
    )
    with Engine(tmp_path, use_cache=False) as engine:
        result = engine.check(spec_for("softmax", code))
    assert result.status.value == "verified", result.headline()
    assert any(
        note.startswith("the code wrote into the project: docs/out.md") for note in result.notes
    ), result.notes


def test_a_check_that_changes_a_pages_file_and_dies_is_said_to_have_written(
    tmp_path: Path,
) -> None:
    """A touch or a chmod lands even where the kernel confines the check, and makes ``mkdocs
    serve`` rebuild; here the check's process dies before it looks at the folder again. Only
    a read then is no write."""
    from formula_check.session.engine import WROTE, Engine
    from support import spec_for

    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "a.md").write_text("# a\n")
    changes = {
        'pathlib.Path("docs/a.md").touch()': True,
        'os.chmod("docs/a.md", 0o600)': True,
        'pathlib.Path("docs/a.md").read_text()': False,
    }
    with Engine(tmp_path, use_cache=False) as engine:
        for change, wrote in changes.items():
            code = f"import os, pathlib\n\ndef softmax(x):\n    {change}\n    os._exit(3)\n"
            result = engine.check(spec_for("softmax", code))
            assert result.status.value == "error", result.headline()
            said = any(note.startswith(WROTE + "docs/a.md") for note in result.notes)
            assert said == wrote, (change, result.notes)
