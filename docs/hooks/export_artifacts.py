"""MkDocs hook: export the artifacts docs/guide/production.md checks, when they are outdated.

Exporting belongs to a project's tests or scripts, never to the checker; our own docs need a
few tiny artifacts, so this hook runs ``python docs/snippets/export_artifacts.py`` before the
build, in a process of its own (TensorFlow stays out of the build process), and only when the
export script or the model it exports has changed since the last export: a stamp in the
artifacts folder holds their digest. An export takes some ten seconds; a build with the
artifacts up to date pays one digest of two small files.
"""

from __future__ import annotations

import hashlib
import subprocess
import sys
from pathlib import Path
from typing import Any

from mkdocs.exceptions import PluginError

SNIPPETS = Path(__file__).resolve().parent.parent / "snippets"
SOURCES = (SNIPPETS / "export_artifacts.py", SNIPPETS / "production_block.py")
STAMP = SNIPPETS / "artifacts" / "exported-from"


def on_pre_build(config: Any) -> None:
    """Export the artifacts unless the stamp says they come from today's sources."""
    digest = hashlib.sha256(b"".join(path.read_bytes() for path in SOURCES)).hexdigest()
    if STAMP.is_file() and STAMP.read_text() == digest:
        return
    done = subprocess.run(
        [sys.executable, str(SOURCES[0])], check=False, capture_output=True, text=True, timeout=600
    )
    if done.returncode != 0:
        last = "\n".join(done.stderr.strip().splitlines()[-5:])
        raise PluginError(f"exporting the artifacts failed ({SOURCES[0].name}):\n{last}")
    STAMP.write_text(digest)
