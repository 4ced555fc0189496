"""The oracle catalog: float64 NumPy references of the formulas, and the registry users extend."""

from __future__ import annotations

from formula_check.oracles.base import Oracle, Regime, TensorSpec, scaled
from formula_check.oracles.compose import Add, Apply, Rename, compose, residual
from formula_check.oracles.registry import all_oracles, get_oracle, load_oracle, register

__all__ = [
    "Add",
    "Apply",
    "Oracle",
    "Regime",
    "Rename",
    "TensorSpec",
    "all_oracles",
    "compose",
    "get_oracle",
    "load_oracle",
    "register",
    "residual",
    "scaled",
]
