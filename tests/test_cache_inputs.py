"""A cached result is served only while what its check read holds: files outside the project
(a package on ``PYTHONPATH``, a data file), folders it listed; and a check whose reads the
audit cannot follow is never cached, and says why."""

from __future__ import annotations

from pathlib import Path

import pytest

from formula_check.model import Status
from formula_check.runtime.confinement import abi_version
from formula_check.session.engine import UNSEEN, Engine
from support import spec_for

RIGHT = "import tensorflow as tf\n\ndef softmax(x):\n    return tf.nn.softmax(x)\n"
WRONG = "import tensorflow as tf\n\ndef softmax(x):\n    return tf.nn.softmax(2 * x)\n"


@pytest.mark.tf
def test_a_cached_result_follows_what_its_check_read_outside_and_listed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    project, outside = tmp_path / "project", tmp_path / "outside"
    (outside / "outpkg").mkdir(parents=True)
    (outside / "outpkg" / "__init__.py").write_text("")
    ops = outside / "outpkg" / "ops.py"
    ops.write_text(RIGHT)
    data = outside / "scale.txt"
    data.write_text("1\n")
    (project / "tables").mkdir(parents=True)
    (project / "tables" / "one.txt").write_text("")
    monkeypatch.setenv("PYTHONPATH", str(outside))
    from_package = spec_for(
        "softmax", "from outpkg.ops import softmax\n", block_id="pkg", entry="softmax"
    )
    from_data = spec_for(
        "softmax",
        f"import tensorflow as tf\n\ndef softmax(x):\n"
        f"    scale = float(open({str(data)!r}).read())\n"
        "    return tf.nn.softmax(scale * x)\n",
        block_id="data",
    )
    from_listing = spec_for(
        "softmax",
        "import glob\nimport tensorflow as tf\n\ndef softmax(x):\n"
        "    return tf.nn.softmax(len(glob.glob('tables/*.txt')) * x)\n",
        block_id="listing",
    )
    ran_a_program = spec_for(
        "softmax",
        "import subprocess\nimport tensorflow as tf\n\ndef softmax(x):\n"
        "    subprocess.run(['true'], check=True)\n"
        "    return tf.nn.softmax(x)\n",
        block_id="program",
    )
    through_gfile = spec_for(
        "softmax",
        f"import tensorflow as tf\n\ndef softmax(x):\n"
        f"    scale = float(tf.io.gfile.GFile({str(data)!r}).read())\n"
        "    return tf.nn.softmax(scale * x)\n",
        block_id="gfile",
    )
    listed_by_gfile = spec_for(
        "softmax",
        "import tensorflow as tf\n\ndef softmax(x):\n"
        "    return tf.nn.softmax(len(tf.io.gfile.glob('tables/*.txt')) * x)\n",
        block_id="gfile-glob",
    )
    read_by_an_op = spec_for(
        "softmax",
        f"import tensorflow as tf\n\ndef softmax(x):\n"
        f"    scale = float(tf.io.read_file({str(data)!r}).numpy())\n"
        "    return tf.nn.softmax(scale * x)\n",
        block_id="read-file",
    )
    keyed = [from_package, from_data, from_listing, through_gfile, listed_by_gfile]
    specs = [*keyed, ran_a_program, read_by_an_op]
    with Engine(project) as engine:
        first = engine.check_many(specs)
        assert [r.status for r in first] == [Status.VERIFIED] * 7, [r.failure for r in first]
        assert [[n for n in r.notes if n.startswith(UNSEEN)] for r in first[-2:]] == [
            [
                f"{UNSEEN}{why}: what it read there is in no cache key, so this result is not "
                "cached and the block runs again every build"
            ]
            for why in (
                "it started a program",
                "it read files with a TensorFlow op (tf.io.read_file, tf.data)",
            )
        ]
        # the right twins: unchanged inputs serve from the cache, also after a file appears
        # where the import system (not the code) looks for modules
        (project / "unrelated.py").write_text("")
        again = engine.check_many(specs)
        assert [r.cached for r in again] == [True] * 5 + [False] * 2
        ops.write_text(WRONG)
        data.write_text("2\n")
        (project / "tables" / "two.txt").write_text("")
        changed = engine.check_many(specs)
        assert [r.status for r in changed] == [Status.MISMATCH] * 5 + [
            Status.VERIFIED,
            Status.MISMATCH,
        ]
        assert not any(r.cached for r in changed)
        assert engine.executed == 7 + 2 + 7


FORGER = """\
import glob
import os
from pathlib import Path

import tensorflow as tf
from formula_check.store import sealed_files as sealed
from formula_check import wire


def softmax(x):
    for path in glob.glob(os.path.join(CACHE, "*", "*.fcr")):
        key = Path(path).stem
        try:
            header, arrays = wire.decode(sealed.read_sealed(Path(path), key))
            header["result"]["status"] = "verified"
            sealed.write_sealed(Path(path), key, wire.encode(header, arrays))
        except OSError as error:
            print("refused:", type(error).__name__)
    return tf.nn.softmax(x)
"""


@pytest.mark.tf
@pytest.mark.skipif(abi_version() == 0, reason="no Landlock here to confine a check's writes")
def test_a_check_cannot_write_another_blocks_entry(tmp_path: Path) -> None:
    """A block whose code rewrites every entry of the cache as verified, sealed as the cache
    seals them, leaves the wrong block beside it a mismatch: a check's process can list the
    cache but read no entry, writes only in its own temporary folder, and entries are written
    by the build alone."""
    cache = tmp_path / ".cache" / "formula-check"
    wrong = spec_for("softmax", WRONG, block_id="wrong")
    forger = spec_for("softmax", f"CACHE = {str(cache)!r}\n{FORGER}", block_id="forger")
    with Engine(tmp_path) as engine:
        assert engine.check(wrong).status is Status.MISMATCH
        tried = engine.check(forger)
        assert tried.status is Status.VERIFIED, tried.failure
        assert tried.stdout == "refused: PermissionError\n"
        served = engine.check(wrong)
        assert served.cached and served.status is Status.MISMATCH
