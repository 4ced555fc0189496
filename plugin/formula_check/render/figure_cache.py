"""Figures drawn once: keyed by everything they are drawn from, kept in memory and on disk.

Drawing a heatmap with matplotlib costs a few hundred milliseconds; a cached rebuild of a site
must not pay that again for pictures whose inputs did not change. PNG bytes are reproducible,
so a stored figure is exactly the one that would be drawn.
"""

from __future__ import annotations

import hashlib
import json
import multiprocessing
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from pathlib import Path
from typing import Any

import numpy as np

from ..cache import result_from_json, result_to_json, unseal, write_sealed
from ..model import Array, CheckResult, to_plain
from ..worker import protocol
from .figure import Figure, figures_for
from .labels import Labels, labels_for

RENDERER_VERSION = 1
"""Bump when the drawing code changes, so stored figures are redrawn."""


def figure_key(
    result: CheckResult, heatmaps: tuple[str, ...] | None, labels: Labels, sweep_dim: str
) -> str:
    """A digest of every input of :func:`figures_for` (arrays by content)."""
    digest = hashlib.sha256()
    meta = {
        "version": RENDERER_VERSION,
        "heatmaps": heatmaps,
        "language": labels.language,
        "sweep_dim": sweep_dim,
        "shapes": to_plain(result.shapes),
        "verdicts": to_plain(result.verdicts),
        "sweep": to_plain(result.sweep),
    }
    digest.update(json.dumps(meta, sort_keys=True, default=str).encode())
    for name in sorted(result.arrays):
        array = np.asarray(result.arrays[name])
        digest.update(f"{name}:{array.dtype.str}:{array.shape}".encode())
        digest.update(np.ascontiguousarray(array).tobytes())
    return digest.hexdigest()


FigureJob = tuple[CheckResult, "tuple[str, ...] | None", Labels, str]
"""What one card's figures are drawn from: result, heatmap choice, labels, sweep dim."""

_PARALLEL_FROM = 8
"""Fewer missing figure sets than this are drawn in the build process itself."""


def _draw(
    result: dict[str, Any],
    arrays: dict[str, Array],
    heatmaps: tuple[str, ...] | None,
    language: str,
    sweep_dim: str,
) -> list[Figure]:
    """Runs in a drawing process: rebuild the result, draw its figures."""
    return figures_for(
        result_from_json(result, arrays), heatmaps, labels_for(language), sweep_dim=sweep_dim
    )


class FigureCache:
    """Memoises :func:`figures_for`; ``directory`` None keeps figures in memory only."""

    def __init__(self, directory: Path | None = None) -> None:
        self.directory = directory
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

    def prefetch(self, jobs: Sequence[FigureJob], processes: int) -> None:
        """Draw every missing figure set of ``jobs`` at once, in ``processes`` processes.

        Drawing is CPU-bound Python (threads would not help); a cold build of a large site
        otherwise draws one picture after another in the build process. Small batches are
        left to :meth:`__call__`, where starting processes would cost more than it saves.
        """
        missing: dict[
            str, tuple[dict[str, Any], dict[str, Array], tuple[str, ...] | None, str, str]
        ] = {}
        for result, heatmaps, labels, sweep_dim in jobs:
            key = figure_key(result, heatmaps, labels, sweep_dim)
            if key in self.memory or key in missing:
                continue
            stored = self._load(key)
            if stored is not None:
                self.memory[key] = stored
                continue
            missing[key] = (
                result_to_json(result),
                dict(result.arrays),
                heatmaps,
                labels.language,
                sweep_dim,
            )
        if processes < 2 or len(missing) < _PARALLEL_FROM:
            return
        context = multiprocessing.get_context("spawn")  # never fork a process that runs threads
        try:
            with ProcessPoolExecutor(min(processes, len(missing)), mp_context=context) as pool:
                drawn = {key: pool.submit(_draw, *job) for key, job in missing.items()}
                for key, future in drawn.items():
                    self.memory[key] = future.result()
                    self.drawn += 1
                    self._store(key, self.memory[key])
        except (BrokenProcessPool, OSError):
            return  # whatever is left is drawn in this process, page by page

    def _path(self, key: str) -> Path | None:
        return None if self.directory is None else self.directory / key[:2] / f"{key}.fcf"

    def _load(self, key: str) -> list[Figure] | None:
        path = self._path(key)
        if path is None or not path.exists():
            return None
        message = unseal(path.read_bytes())
        try:
            header, arrays = protocol.decode(message) if message is not None else ({}, {})
            return [
                Figure(
                    item["name"],
                    item["title"],
                    item["alt"],
                    arrays[f"png/{i}"].tobytes(),
                    int(item["width"]),
                    int(item["height"]),
                )
                for i, item in enumerate(header["figures"])
            ]
        except (protocol.ProtocolError, KeyError, TypeError, ValueError):
            path.unlink(missing_ok=True)  # damaged: draw again
            return None

    def _store(self, key: str, figures: list[Figure]) -> None:
        path = self._path(key)
        if path is None:
            return
        header = {
            "figures": [
                {
                    "name": f.name,
                    "title": f.title,
                    "alt": f.alt,
                    "width": f.width,
                    "height": f.height,
                }
                for f in figures
            ]
        }
        arrays = {f"png/{i}": np.frombuffer(f.png, dtype=np.uint8) for i, f in enumerate(figures)}
        write_sealed(path, protocol.encode(header, arrays))
