"""mkdocs-formula-check: verify that the math in documentation matches its TensorFlow code."""

from __future__ import annotations

__version__ = "0.1.0"
