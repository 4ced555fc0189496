"""The environment a worker runs in: what Python, TensorFlow, CUDA and the locale need, and
the variables the project names in its ``env`` option; nothing else of the build's.

A build's environment holds tokens and passwords (CI secrets, cloud credentials). A snippet
that printed one, or put it into an exception message, would publish it: in the page, the
JSON report, the search index and the cache. So the worker never has them unless the project
asks for them by name.
"""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Mapping, Sequence
from pathlib import Path

PASSED = frozenset(
    [
        # the interpreter and the packages it finds
        "PATH",
        "HOME",
        "PYTHONPATH",
        "PYTHONHOME",
        "PYTHONNOUSERSITE",
        "PYTHONUTF8",
        "PYTHONIOENCODING",
        "PYTHONHASHSEED",
        "PYTHONDONTWRITEBYTECODE",
        "PYTHONPYCACHEPREFIX",
        "VIRTUAL_ENV",
        "LD_LIBRARY_PATH",
        # the locale and the time zone
        "LANG",
        "LANGUAGE",
        "TZ",
        # numerical libraries' threading and kernels
        "OMP_NUM_THREADS",
        "MKL_NUM_THREADS",
        "OPENBLAS_NUM_THREADS",
        "OPENBLAS_CORETYPE",
        "OPENBLAS_L2_SIZE",
        "XLA_FLAGS",
        # Keras and plotting
        "KERAS_BACKEND",
        "KERAS_HOME",
        "MPLBACKEND",
        "MPLCONFIGDIR",
    ]
)
"""Variables every worker gets as the build has them."""

PASSED_PREFIXES = ("LC_", "TF_", "CUDA_", "CUDNN_", "NVIDIA_")
"""Families of variables every worker gets: the locale's, TensorFlow's, the GPU stack's."""

WITHHELD_PREFIXES = ("TF_VAR_",)
"""Not TensorFlow's, though they look it: Terraform's variables, often secrets."""

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


def bad_names(names: Sequence[str]) -> list[str]:
    """The entries of an ``env`` option that cannot be the name of a variable."""
    return [name for name in names if not isinstance(name, str) or not _NAME.match(name)]


def worker_environment(
    names: Sequence[str] = (), source: Mapping[str, str] | None = None
) -> dict[str, str]:
    """What a worker or zygote runs with: the variables above and those ``names`` (the
    project's ``env`` option) as ``source`` (the build's environment) has them, the package
    importable, TensorFlow quiet and its oneDNN pinned (it changes the bits)."""
    build = os.environ if source is None else source
    wanted = set(names)
    env = {
        name: value
        for name, value in build.items()
        if name in wanted
        or name in PASSED
        or (name.startswith(PASSED_PREFIXES) and not name.startswith(WITHHELD_PREFIXES))
    }
    env["TF_ENABLE_ONEDNN_OPTS"] = "0"
    env["TF_CPP_MIN_LOG_LEVEL"] = "2"
    package_parent = str(Path(__file__).resolve().parents[2])
    env["PYTHONPATH"] = os.pathsep.join(p for p in (package_parent, env.get("PYTHONPATH")) if p)
    return env


def named_digest(names: Sequence[str], source: Mapping[str, str] | None = None) -> str:
    """A digest of the variables ``names`` as ``source`` has them (unset ones included):
    results computed with other values are other results. Values never leave the digest."""
    build = os.environ if source is None else source
    text = "\0".join(f"{name}={build.get(name, '')}{name in build}" for name in sorted(names))
    return hashlib.sha256(text.encode()).hexdigest()[:16] if names else ""
