"""What the CLI prints while it checks (a live line or plain lines) and when it is done."""

from __future__ import annotations

import os
import shutil
import threading
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from typing import TextIO

from formula_check.render import OUTCOME_KEYS, outcome_key
from formula_check.results import CheckResult, format_seconds
from formula_check.sinks import Sink, for_sink

_TICK = 0.5  # seconds between redraws of the live line while a slow check runs
_CLEAR = "\r\x1b[K"
SLOWEST = 5


LONG_RUN = 10.0
"""Seconds after which a run's plain progress lines also say how long is left."""
_COLOURS = {
    "verified": "32",  # green
    "expected_failure": "36",  # cyan: wrong on purpose, as its block says
    "mismatch": "31",  # red
    "error": "31",
    "unexpected_pass": "31",
    "timeout": "33",  # yellow
    "skipped": "2",  # dim
}


def _clock(seconds: float) -> str:
    minutes, rest = divmod(int(seconds), 60)
    return f"{minutes}:{rest:02d}"


def wants_colour(stream: TextIO, environ: Mapping[str, str] | None = None) -> bool:
    """Colour for a terminal, unless ``NO_COLOR`` is set (https://no-color.org)."""
    env = os.environ if environ is None else environ
    isatty = getattr(stream, "isatty", None)
    return bool(isatty is not None and isatty()) and not env.get("NO_COLOR")


def paint(text: str, key: str, colour: bool) -> str:
    """``text`` in the colour of the outcome ``key`` (as is without ``colour``)."""
    code = _COLOURS.get(key)
    return f"\x1b[{code}m{text}\x1b[0m" if colour and code else text


class Progress:
    r"""Reports each finished block.

    On a terminal: one line redrawn in place (``\r``) naming the block being checked, the
    count done and the time so far, kept fresh by a ticker while TensorFlow starts. Anywhere
    else (CI logs): one plain line per finished block, because ``\r`` garbles a log file.
    """

    def __init__(
        self,
        stream: TextIO,
        total: int,
        *,
        live: bool | None = None,
        colour: bool | None = None,
        clock: Callable[[], float] = time.perf_counter,
    ) -> None:
        self.stream = stream
        self.total = total
        self.live = stream.isatty() if live is None else live
        self.colour = wants_colour(stream) if colour is None else colour
        self.clock = clock
        self.done = 0
        self.ran = 0
        """Blocks that ran now (not from the cache): what the time left is estimated from."""
        self.current = ""
        self.started = clock()
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
        return self.clock() - self.started

    def left(self) -> str:
        """About how long the blocks not done yet take, from those that ran so far (empty
        until one has)."""
        if not self.ran or self.done >= self.total:
            return ""
        return f"~{_clock(self.elapsed() / self.done * (self.total - self.done))} left"

    def checking(self, label: str) -> None:
        """``label`` (``docs/x.md:12 [id]``) is the next block to finish."""
        self.current = for_sink(label, Sink.LINE)
        self._redraw()

    def finished(self, result: CheckResult) -> None:
        """One more block is done."""
        self.done += 1
        self.ran += not result.cached
        if not self.live:
            cached = ", cached" if result.cached else ""
            left = self.left() if self.elapsed() >= LONG_RUN else ""
            count = f"{self.done}/{self.total}" + (f", {left}" if left else "")
            words = paint(outcome_words(result), outcome_key(result), self.colour)
            self._write(
                f"[{count}] {_where(result)} {words} ({format_seconds(result.elapsed)}{cached})\n"
            )
        self._redraw()

    def _redraw(self) -> None:
        if self.live:
            left = self.left()
            head = (
                f"[{self.done}/{self.total} {_clock(self.elapsed())}{' ' + left if left else ''}]"
            )
            doing = self.current
            if self.done == 0 and self.elapsed() >= 1.0:  # the first check waits for the workers
                doing = f"starting TensorFlow, then {doing}"
            line = f"{head} {doing}"
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


def _where(result: CheckResult) -> str:
    """``docs/x.md:12 [id]``, as a line may show it (a page's name is the author's)."""
    return for_sink(f"{result.location} [{result.block_id}]", Sink.LINE)


def _plural(count: int, noun: str) -> str:
    return f"{count} {noun}" if count == 1 else f"{count} {noun}s"


def counts_line(results: Sequence[CheckResult], *, colour: bool = False) -> str:
    """``6 verified, 1 mismatch, 1 expected failure`` in the badges' order."""
    counts = Counter(outcome_key(result) for result in results)
    words = [
        paint(f"{counts[key]} {key.replace('_', ' ')}", key, colour)
        for key in OUTCOME_KEYS
        if counts[key]
    ]
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
    colour: bool = False,
) -> str:
    """The end of a run: counts, worker start-up, the slowest blocks, then every failure.

    ``startup`` is the time spent starting workers (importing TensorFlow); block times do not
    include it, so the first block checked is not mistaken for the slowest. With several
    ``starters`` (workers) the starts overlap, and their sum can exceed the run's own time."""
    cached = sum(result.cached for result in results)
    head = (
        f"formula-check: {_plural(len(results), 'block')} on {_plural(pages, 'page')} "
        f"in {format_seconds(seconds)}: "
        f"{counts_line(results, colour=colour)}"
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
        lines += [f"  {format_seconds(r.elapsed):>9}  {_where(r)}" for r in slowest]
    failures = [r for r in results if is_failure(r)]
    if failures:
        lines.append(f"failures ({len(failures)}):")
        lines += [
            "  " + paint(for_sink(r.headline(), Sink.LINE), outcome_key(r), colour)
            for r in failures
        ]
    return "\n".join(lines)
