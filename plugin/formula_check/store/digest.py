"""The digest of the checker's own source: part of every cache key (results, figures, the
kept zygote's address), so that a new checker never trusts what an old one computed."""

from __future__ import annotations

import functools
import hashlib
from pathlib import Path

from formula_check.paths import PACKAGE


@functools.cache
def checker_digest() -> str:
    """A digest of this package's own source: a new checker never trusts an old verdict.

    Read once per process: the package's files do not change under a running build."""
    digest = hashlib.sha256()
    package = Path(PACKAGE).resolve()
    for path in sorted(package.rglob("*.py")):
        digest.update(path.relative_to(package).as_posix().encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()[:16]
