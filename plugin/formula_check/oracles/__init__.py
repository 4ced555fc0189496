"""The oracle catalog: float64 NumPy references of the formulas, and the registry users extend."""

from __future__ import annotations

from .base import Oracle, TensorSpec
from .registry import all_oracles, get_oracle, load_oracle, register

__all__ = ["Oracle", "TensorSpec", "all_oracles", "get_oracle", "load_oracle", "register"]
