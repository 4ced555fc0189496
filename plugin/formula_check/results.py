"""What one check found: the verdict on each compared array, the formula's, the timings,
shapes and failure, gathered in a :class:`CheckResult` (cached on disk as is), and the words
every face shows for them. Made by :mod:`.checking`, read by the cache, the cards and the
faces; the specs they answer are :mod:`.model`'s."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

from formula_check.model import Array, Expectation, Location, Status, frozen_map
from formula_check.sinks import Sink, for_sink

BOUND_WORDS = "its least"
"""How a tolerance from the one-draw bound describes itself (see :mod:`.oracles.tolerance`): a share
of it is at most the share of the full tolerance the same code would use."""


GRAPH_MODE = "tf.function"
"""The regime a verdict names when it judged what the code returned as a traced
``tf.function`` graph, on the standard inputs; ``tf.function, large logits`` on an input
regime's (:func:`graph_regime`)."""


def graph_regime(inputs: str) -> str:
    """The regime of the graph's outputs on the ``inputs`` regime's (empty: the standard)."""
    return f"{GRAPH_MODE}, {inputs}" if inputs else GRAPH_MODE


def _graphed(regime: str) -> str | None:
    """The inputs of a graph's regime (empty: the standard); None for an eager one."""
    if regime == GRAPH_MODE:
        return ""
    return regime.removeprefix(f"{GRAPH_MODE}, ") if regime.startswith(f"{GRAPH_MODE}, ") else None


def regime_words(regime: str) -> str:
    """``on the large logits inputs``; for the graph's outputs ``under tf.function``, and
    ``under tf.function on the large logits inputs``."""
    inputs = _graphed(regime)
    if inputs is None:
        return f"on the {regime} inputs"
    return f"under {GRAPH_MODE}" + (f" on the {inputs} inputs" if inputs else "")


@dataclass(frozen=True)
class Verdict:
    """How one compared array (e.g. attention ``output``) measured up against the oracle."""

    name: str
    ok: bool
    dims: tuple[str, ...]
    expected_shape: tuple[int, ...]
    actual_shape: tuple[int, ...]
    max_abs: float = 0.0
    max_rel: float = 0.0
    worst_index: tuple[int, ...] = ()
    worst_expected: float = 0.0
    worst_actual: float = 0.0
    n_bad: int = 0
    n_total: int = 0
    atol: float = 0.0
    """The largest tolerance of any element (all of them, for a fixed ``atol``)."""
    rtol: float = 0.0
    nonfinite: int = 0
    problem: str = ""
    max_index: tuple[int, ...] = ()
    """Where the largest |Δ| is; ``worst_index`` is the element furthest beyond (or
    nearest to) its own tolerance, which may be another one."""
    worst_allowed: float = 0.0
    """The tolerance of the element at ``worst_index``."""
    used: float = 0.0
    """The largest ``|Δ| / tolerance`` of any element: under 1 passes."""
    tolerance: str = ""
    """How the tolerance came about (derived from float32 rounding, or stated)."""
    regime: str = ""
    """The input regime compared (empty: the standard inputs), or the graph's: on the standard
    inputs :data:`GRAPH_MODE`, on a regime's :func:`graph_regime`."""
    hint: str = ""
    """What the difference looks like, where its cause is known (sines and cosines in halves)."""

    def share(self) -> str:
        """``23%`` of the tolerance used; ``at most 23%`` against the one-draw bound, which is
        never above the full tolerance."""
        share = f"{self.used:.0%}"
        return f"at most {share}" if BOUND_WORDS in self.tolerance else share

    def label(self) -> str:
        """``output``, or ``output (large logits)`` for another input regime."""
        return f"{self.name} ({self.regime})" if self.regime else self.name

    def summary(self) -> str:
        """One line saying what differed, in the oracle's dim names."""
        if self.problem and not self.ok:
            return f"{self.label()}: {self.problem}" + (f"; {self.hint}" if self.hint else "")
        if self.ok:
            return (
                f"{self.label()}: max |Δ| = {self.max_abs:.2g}, within tolerance "
                f"({self.share()} of it used)"
            )
        at = ", ".join(str(i) for i in self.max_index)
        worst = ", ".join(str(i) for i in self.worst_index)
        line = f"{self.label()}: max |Δ| = {self.max_abs:.2g} at ({at})"
        if worst != at:
            line += (
                f"; furthest beyond its tolerance: ({worst}), expected "
                f"{self.worst_expected:.6g}, got {self.worst_actual:.6g}, tolerance "
                f"{self.worst_allowed:.2g}"
            )
        else:
            line += (
                f" [expected {self.worst_expected:.6g}, got {self.worst_actual:.6g}], "
                f"tolerance there {self.worst_allowed:.2g}"
            )
        line += f"; {self.n_bad} of {self.n_total} elements out of tolerance"
        return f"{line}; {self.hint}" if self.hint else line


@dataclass(frozen=True)
class TimingStats:
    """Seconds over repeated runs; never a single-shot figure."""

    label: str
    median: float
    spread: float
    repeats: int
    first: float = 0.0

    def describe(self) -> str:
        """``1.23 ms ± 0.04`` (median ± half the inter-quartile range)."""
        return f"{format_seconds(self.median)} ± {format_seconds(self.spread)}"


_TIME_UNITS = (("s", 1.0), ("ms", 1e3), ("µs", 1e6))
"""Each unit, and how many of it make a second."""


def format_seconds(seconds: float, *, tick: bool = False) -> str:
    """Human units for a duration: ``1.23 ms``, ``12 µs`` (whole microseconds below a
    millisecond). ``tick``: a label on a time axis, four significant digits at most
    (``100 µs``, ``2 ms``, ``1 s``; ``ns`` below a microsecond), a value a hair under a round
    one (rounding error) labelled in the round one's unit."""
    slack = 1 - 1e-9 if tick else 1.0
    for unit, per_second in _TIME_UNITS:
        size = 1 / per_second
        if tick and seconds >= size * slack:
            return f"{seconds / size:.4g} {unit}"
        if not tick and (seconds >= size or unit == "µs"):
            return f"{seconds * per_second:{'.0f' if unit == 'µs' else '.2f'}} {unit}"
    return f"{seconds / 1e-9:.4g} ns"


def largest_index(values: Array) -> tuple[int, ...]:
    """The index of the largest value (the first, among equals); ``()`` when empty."""
    if not values.size:
        return ()
    import numpy as np

    flat = int(np.argmax(values))
    return tuple(int(i) for i in np.unravel_index(flat, values.shape))


@dataclass(frozen=True)
class ShapeInfo:
    """The shape of one tensor the check touched, with the oracle's dim names."""

    name: str
    role: Literal["input", "weight", "output"]
    shape: tuple[int, ...]
    dims: tuple[str, ...] = ()

    def describe(self) -> str:
        """``q (b, n, d_k) = (2, 5, 16)``."""
        shape = "(" + ", ".join(str(s) for s in self.shape) + ")"
        if self.dims and len(self.dims) == len(self.shape):
            return f"{self.name} ({', '.join(self.dims)}) = {shape}"
        return f"{self.name} {shape}"


@dataclass(frozen=True)
class SnippetFailure:
    """An exception raised by the snippet (or while loading it), with its line."""

    type: str
    message: str
    location: Location | None = None
    traceback: str = ""


@dataclass(frozen=True)
class Environment:
    """What the snippet ran on."""

    tf_version: str = ""
    keras_version: str = ""
    device: str = ""
    threads: int = 0


@dataclass(frozen=True)
class SweepPoint:
    """One size of a scaling sweep: the size and the snippet's median time."""

    size: int
    median: float
    spread: float


FormulaState = Literal["agrees", "differs", "invalid", "not_executable"]


@dataclass(frozen=True)
class FormulaVerdict:
    """The formula as written, compiled and compared with the oracle (float64, rtol 1e-10)."""

    state: FormulaState
    compiled: str = ""
    max_abs: float = 0.0
    message: str = ""
    required: bool = False
    """The block's formula had to be checked (``formula="required"``): not checked fails it."""

    @property
    def failed(self) -> bool:
        """Does this verdict fail the block (a formula that disagrees or does not compile, or
        one that could not be checked where it is required)?"""
        return self.state in {"differs", "invalid"} or (self.unchecked and self.required)

    @property
    def unchecked(self) -> bool:
        """Was the formula left unchecked (outside what the compiler reads, or too long)?"""
        return self.state == "not_executable"

    def summary(self) -> str:
        """One line for logs: ``formula: ...``."""
        if self.state == "agrees":
            return f"formula agrees with the oracle (max |Δ| = {self.max_abs:.2g})"
        # a log line stays one line; the card shows the caret
        first_line = self.message.split("\n", 1)[0]
        if self.unchecked:
            required = " (formula: required)" if self.required else ""
            return f"formula not checked{required}: {first_line}"
        return f"formula: {first_line}"


@dataclass(frozen=True)
class CheckResult:
    """Everything one check found. Immutable; cached on disk as is."""

    block_id: str
    location: Location
    oracle: str
    status: Status
    expect: Expectation = "verified"
    verdicts: tuple[Verdict, ...] = ()
    failure: SnippetFailure | None = None
    message: str = ""
    shapes: tuple[ShapeInfo, ...] = ()
    timings: tuple[TimingStats, ...] = ()
    environment: Environment = field(default_factory=Environment)
    arrays: Mapping[str, Array] = field(default_factory=frozen_map)
    sweep: tuple[SweepPoint, ...] = ()
    notes: tuple[str, ...] = ()
    stdout: str = ""
    cached: bool = False
    elapsed: float = 0.0
    formula: FormulaVerdict | None = None
    imports: tuple[str, ...] = ()
    """The project files the snippet imported or read (relative to the project folder): a
    change to any of them makes the check run again, and ``mkdocs serve`` watches them."""

    @property
    def formula_unchecked(self) -> bool:
        """Whether the block's formula went unchecked (outside what the compiler reads, or
        too long): the build's summary and the report count these, passed or failed."""
        return self.formula is not None and self.formula.unchecked

    @property
    def expected_failure(self) -> bool:
        """The author marked this block as known-bad code shown on purpose."""
        return self.expect != "verified"

    @property
    def outcome_ok(self) -> bool:
        """Did the check come out the way the author said it would?"""
        if self.expect == "verified":
            return self.status is Status.VERIFIED
        if self.expect == "fail":
            return self.status in {Status.MISMATCH, Status.ERROR, Status.TIMEOUT}
        return self.status.value == self.expect

    def headline(self) -> str:
        """The one line a log, a CLI or a pytest failure shows: a :attr:`.Sink.LINE`, whatever
        the snippet said (every face shows it as it is)."""
        return for_sink(self._headline(), Sink.LINE)

    def _headline(self) -> str:
        where = f"{self.location} [{self.block_id}]"
        detail = self.detail(brief=True)
        if self.expected_failure:
            if self.outcome_ok:
                return f"{where}: expected failure ({self.status.value}): {detail}"
            return f"{where}: expected {self.expect} but got {self.status.value}" + (
                f": {detail}" if self.status is not Status.VERIFIED else ""
            )
        return f"{where}: {self.status.value}: {detail}"

    def detail(self, *, brief: bool = False) -> str:
        """What happened, without the location. ``brief``: on one line, an error message
        without the wrapping TensorFlow and Keras add (see :func:`brief_message`)."""
        if self.status is Status.MISMATCH:
            return self._mismatch_detail()
        if self.failure is not None:
            message = brief_message(self.failure.message) if brief else self.failure.message
            return f"{self.failure.type}{self._failure_where()}: {message}"
        if self.message:
            return brief_message(self.message) if brief else self.message
        lines = [v.summary() for v in self.verdicts if not v.regime]
        if ran := self.regimes():
            lines.append(f"also within tolerance {_regimes_words(ran, 'on')}")
        return "; ".join(lines)

    def _mismatch_detail(self) -> str:
        """What differed: the standard inputs' verdicts, or else every regime's that failed."""
        failed = [v for v in self.verdicts if not v.ok]
        # where the standard inputs already differ, the other regimes only repeat it
        standard = [v for v in failed if not v.regime]
        bad = [v.summary() for v in standard or failed]
        others = list(dict.fromkeys(v.regime for v in failed if v.regime))
        if standard and others:
            bad.append(f"also differs {_regimes_words(others)}")
        if self.formula is not None and self.formula.failed:
            bad.append(self.formula.summary())
        return "; ".join(bad) or self.message

    def regimes(self) -> tuple[str, ...]:
        """The input regimes compared besides the standard inputs, in order (with
        :data:`GRAPH_MODE` where the code's graph was judged too)."""
        return tuple(dict.fromkeys(v.regime for v in self.verdicts if v.regime))

    def _failure_where(self) -> str:
        """`` (line 5)`` on the block's own page; `` (model/layers.py:5)`` in another file,
        where a bare line number would read as the page's; nothing at the block's own line,
        which the headline already names."""
        failed_at = self.failure.location if self.failure is not None else None
        if failed_at is None or failed_at == self.location:
            return ""
        if failed_at.path == self.location.path:
            return f" (line {failed_at.line})" if failed_at.line else ""
        return f" ({failed_at})"

    def max_abs_error(self) -> float:
        """The largest absolute error over all compared arrays (0 when none were compared)."""
        return max((v.max_abs for v in self.verdicts), default=0.0)


def _regimes_words(regimes: Sequence[str], on: str = "on the") -> str:
    """``on the large logits, masked inputs and under tf.function`` (``under tf.function on
    the standard, large logits inputs`` where the graph's were judged on a regime)."""
    inputs = [regime for regime in regimes if _graphed(regime) is None]
    graphed = [_graphed(regime) or "standard" for regime in regimes if _graphed(regime) is not None]
    said = [f"{on} {', '.join(inputs)} inputs"] if inputs else []
    if graphed:
        those = f" on the {', '.join(graphed)} inputs" if graphed != ["standard"] else ""
        said.append(f"under {GRAPH_MODE}{those}")
    return " and ".join(said)


_OP_NODE = re.compile(r"\{\{function_node [^{}]*\}\}\s*")

_KERAS_CALL = re.compile(r"^Exception encountered when calling .*$")
_KERAS_ARGUMENTS = re.compile(r"^(Call a|A)rguments received by ")


def brief_message(message: str) -> str:
    """An error message on one line, for a log line or a table cell: TensorFlow's
    ``{{function_node ...}}`` tag, and Keras' wrapping of an error raised in a layer's
    ``call`` (the ``Exception encountered when calling`` line and the arguments listed after
    it: the card shows every shape) are dropped; the lines left are joined. The card and the
    JSON report keep the message whole."""
    lines = [line.strip() for line in _OP_NODE.sub("", message).splitlines()]
    kept: list[str] = []
    for line in lines:
        if _KERAS_ARGUMENTS.match(line):
            break
        if line and not _KERAS_CALL.match(line):
            kept.append(line)
    return " ".join(kept) or " ".join(line for line in lines if line)
