"""Figures drawn once: keyed by everything they are drawn from, kept in memory and on disk.

Drawing is cheap (milliseconds), but a cached rebuild of a large site should cost no more
than reading what it drew last time. Figure bytes are reproducible, so a stored figure is
exactly the one that would be drawn.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from formula_check import wire
from formula_check.render.figure import Figure, figures_for
from formula_check.render.labels import Labels
from formula_check.results import CheckResult
from formula_check.store.digest import checker_digest
from formula_check.store.sealed_files import SealedFiles


def figure_key(
    result: CheckResult, heatmaps: tuple[str, ...] | None, labels: Labels, sweep_dim: str
) -> str:
    """A digest of every input of :func:`figures_for` (arrays by content)."""
    digest = hashlib.sha256(checker_digest().encode())  # new drawing code redraws
    # repr() of the frozen dataclasses says everything they hold, and costs far less than
    # converting them to JSON (this runs for every card of every rebuild).
    meta = (heatmaps, labels.language, sweep_dim, result.shapes, result.verdicts, result.sweep)
    digest.update(repr(meta).encode())
    # A cached result's arrays are read from their stored bytes, not decoded (no NumPy)
    digest.update(wire.fingerprint(result.arrays))
    return digest.hexdigest()


class FigureCache:
    """Memoises :func:`figures_for`; ``directory`` None keeps figures in memory only."""

    def __init__(self, directory: Path | None = None) -> None:
        self.directory = directory
        self.files = None if directory is None else SealedFiles(directory, ".fcf", "figures")
        self.memory: dict[str, list[Figure]] = {}
        self.drawn = 0

    def __call__(
        self,
        result: CheckResult,
        heatmaps: tuple[str, ...] | None,
        labels: Labels,
        *,
        sweep_dim: str = "n",
    ) -> list[Figure]:
        """The figures for ``result``, drawn only if neither memory nor disk has them."""
        key = figure_key(result, heatmaps, labels, sweep_dim)
        figures = self.memory.get(key)
        if figures is None:
            figures = self._load(key)
        if figures is None:
            figures = figures_for(result, heatmaps, labels, sweep_dim=sweep_dim)
            self.drawn += 1
            self._store(key, figures)
        self.memory[key] = figures
        return figures

    def _load(self, key: str) -> list[Figure] | None:
        message = self.files.read(key) if self.files is not None else None
        if self.files is None or message is None:
            return None
        try:
            header, arrays = wire.decode_stored(message)
            if not isinstance(arrays, wire.StoredArrays):  # not bytes, as figures are stored
                raise wire.ProtocolError("a figure's data is not bytes")
            return [
                Figure(
                    _text(item["name"]),
                    _text(item["title"]),
                    _text(item["alt"]),
                    arrays.data(f"data/{i}"),
                    int(item["width"]),
                    int(item["height"]),
                    str(item["media_type"]),
                )
                for i, item in enumerate(header["figures"])
            ]
        except wire.MALFORMED:
            self.files.discard(key)  # damaged: draw again
            return None

    def _store(self, key: str, figures: list[Figure]) -> None:
        if self.files is None:
            return
        header = {
            "figures": [
                {
                    "name": f.name,
                    "title": f.title,
                    "alt": f.alt,
                    "width": f.width,
                    "height": f.height,
                    "media_type": f.media_type,
                }
                for f in figures
            ]
        }
        import numpy as np  # figures were drawn from arrays: NumPy is loaded already

        arrays = {f"data/{i}": np.frombuffer(f.data, dtype=np.uint8) for i, f in enumerate(figures)}
        self.files.write(key, wire.encode(header, arrays))


def _text(value: object) -> str:
    """``value``, a text of a stored figure, or TypeError (a damaged entry)."""
    if not isinstance(value, str):
        raise TypeError(f"a figure's text is {type(value).__name__}")
    return value
