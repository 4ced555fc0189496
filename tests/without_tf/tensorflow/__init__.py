"""Stands in for tensorflow where a test not marked ``tf`` runs: it fails to import, as where
TensorFlow is not installed (see ``tests/conftest.py``)."""

raise ImportError("tensorflow is blocked here: a test not marked tf runs as without TensorFlow")
