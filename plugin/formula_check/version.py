"""The package's version, written once: the package metadata and the cache key read it."""

from __future__ import annotations

__version__ = "0.1.0"
