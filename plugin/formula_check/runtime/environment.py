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
from collections.abc import Mapping, Sequence
from pathlib import Path

from formula_check.paths import PACKAGE

PASSED_PATHS = frozenset(
    [
        # where the interpreter, its packages and the libraries are
        "PATH",
        "HOME",
        "PYTHONPATH",
        "PYTHONHOME",
        "VIRTUAL_ENV",
        "LD_LIBRARY_PATH",
        "PYTHONPYCACHEPREFIX",
        "KERAS_HOME",
        "MPLCONFIGDIR",
        "CUDA_HOME",
        "CUDA_PATH",
        "CUDNN_PATH",
        "CUDA_CACHE_PATH",
    ]
)
"""Variables every worker gets that say where things are: they differ between machines and
change no result."""

PASSED_SETTINGS = frozenset(
    [
        # Python
        "PYTHONNOUSERSITE",
        "PYTHONUTF8",
        "PYTHONIOENCODING",
        "PYTHONHASHSEED",
        "PYTHONDONTWRITEBYTECODE",
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
        # TensorFlow's own settings
        "TF_CPP_MIN_LOG_LEVEL",
        "TF_CPP_MAX_VLOG_LEVEL",
        "TF_ENABLE_ONEDNN_OPTS",
        "TF_FORCE_GPU_ALLOW_GROWTH",
        "TF_GPU_ALLOCATOR",
        "TF_GPU_THREAD_MODE",
        "TF_GPU_THREAD_COUNT",
        "TF_XLA_FLAGS",
        "TF_USE_LEGACY_KERAS",
        "TF_DETERMINISTIC_OPS",
        "TF_CUDNN_DETERMINISTIC",
        "TF_NUM_INTEROP_THREADS",
        "TF_NUM_INTRAOP_THREADS",
        # the GPU stack
        "CUDA_VISIBLE_DEVICES",
        "CUDA_DEVICE_ORDER",
        "CUDA_MODULE_LOADING",
        "CUDA_CACHE_MAXSIZE",
        "NVIDIA_VISIBLE_DEVICES",
        "NVIDIA_DRIVER_CAPABILITIES",
        # Keras and plotting
        "KERAS_BACKEND",
        "MPLBACKEND",
    ]
)
"""Variables every worker gets that can change what it computes: their values are part of
every result's cache key."""

PASSED_PREFIXES = ("LC_",)
"""The locale's family of variables, every worker gets them too (and they key the cache)."""


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
        or name in PASSED_PATHS
        or name in PASSED_SETTINGS
        or name.startswith(PASSED_PREFIXES)
    }
    env["TF_ENABLE_ONEDNN_OPTS"] = "0"
    env["TF_CPP_MIN_LOG_LEVEL"] = "2"
    package_parent = str(Path(PACKAGE).resolve().parent)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (package_parent, env.get("PYTHONPATH")) if p)
    return env


def settings_digest(names: Sequence[str], source: Mapping[str, str] | None = None) -> str:
    """A digest of the variables that can change a result, as ``source`` (the build's
    environment) has them: those of :data:`PASSED_SETTINGS`, the locale's, and ``names``
    (the project's ``env``; unset ones count too). Results computed with other values are
    other results. Values never leave the digest."""
    build = os.environ if source is None else source
    keyed = sorted(
        {*names, *(n for n in build if n in PASSED_SETTINGS or n.startswith(PASSED_PREFIXES))}
    )
    keyed = [name for name in keyed if name not in _OURS]
    text = "\0".join(f"{name}={build.get(name, '')}{name in build}" for name in keyed)
    return hashlib.sha256(text.encode()).hexdigest()[:16] if keyed else ""


_OURS = frozenset(["TF_ENABLE_ONEDNN_OPTS", "TF_CPP_MIN_LOG_LEVEL"])
"""Set by the checker for every worker, whatever the build says: they key nothing."""
