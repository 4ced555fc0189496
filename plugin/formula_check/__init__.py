"""mkdocs-formula-check: verify that the math in documentation matches its TensorFlow code."""

from __future__ import annotations

from formula_check.version import __version__

__all__ = ["__version__", "load_ipython_extension"]


def load_ipython_extension(shell: object) -> None:
    """``%load_ext formula_check`` in Jupyter: the ``%%formula`` cell magic (see
    :mod:`formula_check.faces.jupyter`)."""
    from formula_check.faces.jupyter import load_ipython_extension as load

    load(shell)
