"""What the CLI prints while it checks (a live line or plain lines) and when it is done."""

from __future__ import annotations

import shutil
import threading
import time
from collections import Counter
from collections.abc import Callable, Sequence
from typing import TextIO

from .model import CheckResult, format_seconds
from .render import OUTCOME_KEYS, outcome_key, strip_ansi

_TICK = 0.5  # seconds between redraws of the live line while a slow check runs
_CLEAR = "\r\x1b[K"
SLOWEST = 5


def _clock(seconds: float) -> str:
    minutes, rest = divmod(int(seconds), 60)
    return f"{minutes}:{rest:02d}"


class Progress:
    r"""Reports each finished block.

    On a terminal: one line redrawn in place (``\r``) naming the block being checked, the
    count done and the time so far, kept fresh by a ticker while TensorFlow starts. Anywhere
    else (CI logs): one plain line per finished block, because ``\r`` garbles a log file.
    """

    def __init__(self, stream: TextIO, total: int, *, live: bool | None = None) -> None:
        self.stream = stream
        self.total = total
        self.live = stream.isatty() if live is None else live
        self.done = 0
        self.current = ""
        self.started = time.perf_counter()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._ticker: threading.Thread | None = None

    def __enter__(self) -> Progress:
        if self.live:
            self._ticker = threading.Thread(target=self._tick, daemon=True)
            self._ticker.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._ticker is not None:
            self._ticker.join()
        if self.live:
            self._write(_CLEAR)

    def elapsed(self) -> float:
        """Seconds since the first block started."""
        return time.perf_counter() - self.started

    def checking(self, label: str) -> None:
        """``label`` (``docs/x.md:12 [id]``) is the next block to finish."""
        self.current = label
        self._redraw()

    def finished(self, result: CheckResult) -> None:
        """One more block is done."""
        self.done += 1
        if not self.live:
            cached = ", cached" if result.cached else ""
            self._write(
                f"[{self.done}/{self.total}] {result.location} [{result.block_id}] "
                f"{outcome_words(result)} ({format_seconds(result.elapsed)}{cached})\n"
            )
        self._redraw()

    def _redraw(self) -> None:
        if self.live:
            line = f"[{self.done}/{self.total} {_clock(self.elapsed())}] {self.current}"
            # A line that wraps cannot be redrawn in place: keep it within the terminal.
            width = shutil.get_terminal_size().columns - 1
            self._write(_CLEAR + line[:width])

    def _tick(self) -> None:
        while not self._stop.wait(_TICK):
            self._redraw()

    def _write(self, text: str) -> None:
        with self._lock:  # the ticker and the main thread share the line
            self.stream.write(text)
            self.stream.flush()


def outcome_words(result: CheckResult) -> str:
    """The badge as words: ``expected failure``."""
    return outcome_key(result).replace("_", " ")


def _plural(count: int, noun: str) -> str:
    return f"{count} {noun}" if count == 1 else f"{count} {noun}s"


def counts_line(results: Sequence[CheckResult]) -> str:
    """``6 verified, 1 mismatch, 1 expected failure`` in the badges' order."""
    counts = Counter(outcome_key(result) for result in results)
    words = [f"{counts[key]} {key.replace('_', ' ')}" for key in OUTCOME_KEYS if counts[key]]
    return ", ".join(words) or "nothing checked"


def summary(
    results: Sequence[CheckResult],
    *,
    pages: int,
    seconds: float,
    deselected: int,
    is_failure: Callable[[CheckResult], bool],
    startup: float = 0.0,
    starters: int = 1,
) -> str:
    """The end of a run: counts, worker start-up, the slowest blocks, then every failure.

    ``startup`` is the time spent starting workers (importing TensorFlow); block times do not
    include it, so the first block checked is not mistaken for the slowest. With several
    ``starters`` (workers) the starts overlap, and their sum can exceed the run's own time."""
    cached = sum(result.cached for result in results)
    head = (
        f"formula-check: {_plural(len(results), 'block')} on {_plural(pages, 'page')} "
        f"in {format_seconds(seconds)}: "
        f"{counts_line(results)}"
    )
    notes = [f"{cached} cached"] if cached else []
    notes += [f"{deselected} deselected"] if deselected else []
    lines = [head + (f" ({', '.join(notes)})" if notes else "")]
    if startup > 0:
        summed = f", summed over {starters} workers" if starters > 1 else ""
        lines.append(f"starting workers (TensorFlow import{summed}): {format_seconds(startup)}")
    # Cached results keep the time of the run that made them; they cost nothing now.
    ran = [result for result in results if not result.cached and result.elapsed > 0]
    slowest = sorted(ran, key=lambda result: -result.elapsed)[:SLOWEST]
    if slowest:
        lines.append("slowest:")
        lines += [f"  {format_seconds(r.elapsed):>9}  {r.location} [{r.block_id}]" for r in slowest]
    failures = [r for r in results if is_failure(r)]
    if failures:
        lines.append(f"failures ({len(failures)}):")
        lines += ["  " + strip_ansi(r.headline()) for r in failures]
    return "\n".join(lines)
