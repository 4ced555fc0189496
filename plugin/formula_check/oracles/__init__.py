"""The oracle catalog: float64 NumPy references of the formulas, and the registry users extend."""

from __future__ import annotations

from .base import Oracle, Regime, TensorSpec, scaled
from .registry import all_oracles, get_oracle, load_oracle, register

__all__ = [
    "Oracle",
    "Regime",
    "TensorSpec",
    "all_oracles",
    "get_oracle",
    "load_oracle",
    "register",
    "scaled",
]
