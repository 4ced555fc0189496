"""What a build says about its checks as a whole: one line when they start, a progress line
now and then on a long run, and one summary line at the end.

Results arrive on the session's background thread while pages render on the main one; the
tally counts them under a lock and logs through the plugin's logger.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Callable, Sequence

from formula_check.faces.mkdocs_plugin.site import log
from formula_check.model import Status
from formula_check.pages.blocks import PageBlock
from formula_check.results import CheckResult, format_seconds
from formula_check.session import is_failure

PROGRESS_EVERY = 10.0
"""Seconds between two progress lines; a build that ends sooner prints none."""


class Tally:
    """Counts one build's results (:meth:`add` for each, in any thread)."""

    def __init__(
        self,
        fail_on: frozenset[str],
        *,
        clock: Callable[[], float] = time.monotonic,
        every: float = PROGRESS_EVERY,
    ) -> None:
        self.fail_on = fail_on
        self.clock = clock
        self.every = every
        self.total = 0
        self.counts: Counter[str] = Counter()
        self.started = clock()
        self._said = self.started
        self._lock = threading.Lock()

    def start(self, blocks: Sequence[PageBlock], pages: int, workers: int) -> None:
        """Say how many blocks this build checks, on how many pages, with how many workers."""
        self.total = len(blocks)
        self.started = self._said = self.clock()
        if blocks:
            log.info(
                f"formula-check: checking {_count(len(blocks), 'block')} on "
                f"{_count(pages, 'page')} with {_count(workers, 'worker')}; unchanged blocks "
                "come from the cache"
            )

    def add(self, result: CheckResult) -> None:
        """Count ``result``; on a long run, say how far the checks are now and then."""
        with self._lock:
            self.counts[_kind(result, self.fail_on)] += 1
            self.counts["cached"] += result.cached
            self.counts["unchecked"] += result.formula_unchecked
            done = sum(self.counts[k] for k in _KINDS)
            now = self.clock()
            if now - self._said < self.every or done >= self.total:
                return
            self._said = now
        log.info(
            f"formula-check: {done} of {self.total} blocks checked "
            f"({format_seconds(now - self.started)})"
        )

    def summary(self) -> str:
        """The build's one line about its checks (empty when it had no block)."""
        with self._lock:
            counts = Counter(self.counts)
        done = sum(counts[k] for k in _KINDS)
        if not done:
            return ""
        parts = [f"{counts[k]} {_WORDS[k]}" for k in _KINDS if counts[k]]
        unchecked = counts["unchecked"]
        formulas = f"; {_count(unchecked, 'formula')} not checked" if unchecked else ""
        cached = f"; {counts['cached']} from the cache" if counts["cached"] else ""
        seconds = format_seconds(self.clock() - self.started)
        return (
            f"formula-check: {_count(done, 'block')} in {seconds}: {', '.join(parts)}"
            f"{formulas}{cached}"
        )


_KINDS = ("verified", "expected", "failing", "skipped", "other")
_WORDS = {
    "verified": "verified",
    "expected": "expected failures",
    "failing": "failing",
    "skipped": "skipped",
    "other": "not verified, with a status fail_on lets pass",
}


def _kind(result: CheckResult, fail_on: frozenset[str]) -> str:
    if is_failure(result, fail_on):
        return "failing"
    if result.outcome_ok:
        return "expected" if result.expected_failure else "verified"
    return "skipped" if result.status is Status.SKIPPED else "other"


def _count(number: int, noun: str) -> str:
    return f"{number} {noun}{'' if number == 1 else 's'}"
