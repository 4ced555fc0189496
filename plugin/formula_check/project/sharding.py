"""``formula-check check --shard i/n``: which blocks one CI runner of n checks.

Each block gets a weight, the seconds its last check took (read from an earlier JSON report,
``--timings``); a block the report does not know gets the median of the known ones. The
blocks are laid end to end in a fixed order, each as long as its weight, and the line is cut
into n equal lengths: a block belongs to the shard its midpoint falls in.

The order is that of a SHA-256 of each block's identity (its page and id), not page order.
It decides nothing about what a block computes; it only has to stay put when the site
changes. Two properties follow.

*Balance.* A shard's total lies within one block's weight of the site's total over n.

*Stability.* Adding a block of weight ``t`` lengthens the line by ``t`` and moves cut ``k``
by ``k·t/n``; a block before the new one keeps its midpoint, a block after it moves by
``t``. So at each of the n - 1 cuts the blocks that change shard are those whose midpoint
lies in a window less than ``t`` wide, and each moves to a neighbouring shard, whatever the
size of the site: a block no longer than its neighbours moves one or two at each cut
(``tests/test_shards.py`` holds the bound). Removing a block is the same move backwards.
Because the hash spreads new blocks evenly along the line, a whole new section added at once
lengthens each shard's stretch about as much as it moves the cuts: most blocks stay where
they were, which they would not in page order, where a section lands in one place.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import re
import statistics
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path

from formula_check.errors import FormulaCheckError

UNKNOWN_WEIGHT = 1.0
"""Every block's weight when no time at all is known: shards of equal block counts."""
SHORTEST = 1e-3
"""The least weight a block gets (seconds): a block of no time still has a place of its own."""


class ShardError(FormulaCheckError):
    """A ``--shard`` or ``--timings`` the run cannot use."""


@dataclasses.dataclass(frozen=True)
class Shard:
    """Shard ``index`` (from 1) of ``count``."""

    index: int
    count: int

    def __str__(self) -> str:
        return f"{self.index}/{self.count}"


_SHARD = re.compile(r"(\d+)/(\d+)")


def parse_shard(text: str) -> Shard:
    """``2/4`` -> shard 2 of 4; the index counts from 1."""
    found = _SHARD.fullmatch(text.strip())
    if found is None:
        raise ShardError(f"--shard {text!r}: expected I/N, e.g. 2/4 (I from 1 to N)")
    index, count = int(found[1]), int(found[2])
    if not 1 <= index <= count:
        raise ShardError(f"--shard {text!r}: I must be from 1 to N ({count})")
    return Shard(index, count)


def identities(places: Sequence[tuple[str, str]]) -> list[str]:
    """Each block's identity from its ``(page, id)``, in the order given (page order): a
    repeated id on a page gets ``#2``, ``#3``... by its rank, so no two blocks share one."""
    seen: Counter[tuple[str, str]] = Counter()
    found = []
    for place in places:
        seen[place] += 1
        page, block_id = place
        rank = seen[place]
        found.append(f"{page}\0{block_id}" + (f"#{rank}" if rank > 1 else ""))
    return found


def _order_key(identity: str) -> tuple[str, str]:
    return hashlib.sha256(identity.encode()).hexdigest(), identity


LONGEST = 86400.0
"""The longest time a timings file may give a block: a larger one (infinity, 1e308, whose sum
would overflow) is no time a block took, and the block gets the median instead."""


def weights(identities: Sequence[str], seconds: Mapping[str, float]) -> list[float]:
    """Each block's weight: its known seconds, else the median of the known ones."""
    known = [seconds[name] for name in identities if name in seconds]
    fill = statistics.median(known) if known else UNKNOWN_WEIGHT
    return [max(seconds.get(name, fill), SHORTEST) for name in identities]


def assign(identities: Sequence[str], weights: Sequence[float], count: int) -> list[int]:
    """The shard (from 0) of each block; see the module's docstring."""
    order = sorted(range(len(identities)), key=lambda i: _order_key(identities[i]))
    total = sum(weights)
    shards = [0] * len(identities)
    done = 0.0
    for i in order:
        middle = done + weights[i] / 2
        shards[i] = min(int(middle * count / total), count - 1) if total else 0
        done += weights[i]
    return shards


def split(places: Sequence[tuple[str, str]], seconds: Mapping[str, float], count: int) -> list[int]:
    """The shard (from 0) of each block (``(page, id)``, page order) of a run in ``count``."""
    names = identities(places)
    return assign(names, weights(names, seconds), count)


def chosen(
    places: Sequence[tuple[str, str]], seconds: Mapping[str, float], shard: Shard
) -> list[bool]:
    """Whether each block (``(page, id)``, page order) belongs to ``shard``."""
    return [found == shard.index - 1 for found in split(places, seconds, shard.count)]


def read_timings(path: Path) -> dict[str, float]:
    """Each block's seconds (by identity) from a JSON report ``formula-check check --json``
    or ``merge`` wrote, or ``formula-check-report.json`` of a build."""
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
        blocks = document["blocks"]
        places = [(str(block["page"]), str(block["id"])) for block in blocks]
        seconds = [block.get("seconds") for block in blocks]
    except OSError as exc:
        raise ShardError(f"--timings {path}: cannot read: {exc.strerror}") from None
    except (ValueError, KeyError, TypeError) as exc:
        raise ShardError(
            f"--timings {path}: not a formula-check JSON report ({type(exc).__name__}: {exc})"
        ) from None
    return {
        name: float(value)
        for name, value in zip(identities(places), seconds, strict=True)
        if isinstance(value, (int, float)) and 0 <= value <= LONGEST
    }
