"""Immutable values that flow through the checker: page text -> blocks -> checks -> results."""

from __future__ import annotations

import dataclasses
import enum
import functools
import re
import sys
import types
import typing
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Literal

from formula_check.sinks import Sink, for_sink
from formula_check.sinks import strip_ansi as strip_ansi  # noqa: PLC0414  (re-exported: its old home)

if TYPE_CHECKING:
    import numpy.typing as npt

    Array = npt.NDArray[Any]
else:
    # NumPy is not imported here: a build whose every check is cached never needs it (the
    # name is only ever an annotation).
    Array = Any
Scalar = int | float | bool | str


def frozen_map(items: Mapping[str, Any] | None = None) -> Mapping[str, Any]:
    """A read-only copy of ``items`` (results and specs never change after creation)."""
    return MappingProxyType(dict(items or {}))


_IN_CELL = re.compile(r"^(?P<file>.+\.ipynb):cell (?P<cell>[1-9][0-9]*)$")


@dataclass(frozen=True, order=True)
class Location:
    """Where something lives: a page (or file) path relative to the project, and a 1-based line.

    A notebook's cell is a page of its own, named ``analysis.ipynb:cell 7`` (:func:`in_cell`),
    and ``line`` counts within the cell. The cell is part of the path rather than a field of
    its own so that every location derived from a block's (a snippet's failure, a cached
    result placed again) keeps it."""

    path: str
    line: int = 0

    def __str__(self) -> str:
        if not self.line:
            return self.path
        return f"{self.path}:line {self.line}" if self.cell else f"{self.path}:{self.line}"

    @property
    def cell(self) -> int | None:
        """The notebook cell (counted from 1, from the top) this location is in, if any."""
        found = _IN_CELL.match(self.path)
        return int(found["cell"]) if found else None

    @property
    def file(self) -> str:
        """The file: the path, less a notebook's ``:cell N``."""
        found = _IN_CELL.match(self.path)
        return found["file"] if found else self.path


def in_cell(notebook: str, cell: int) -> str:
    """The page name of a notebook's cell: ``analysis.ipynb:cell 7``."""
    return f"{notebook}:cell {cell}"


class Status(str, enum.Enum):
    """The outcome of one check."""

    VERIFIED = "verified"
    MISMATCH = "mismatch"
    ERROR = "error"
    TIMEOUT = "timeout"
    SKIPPED = "skipped"


MaskKind = Literal["none", "padding", "causal", "both"]
MaskConvention = Literal["additive", "keep", "keep-float"]
MASK_CONVENTIONS = ("additive", "keep", "keep-float", "neg-inf", "neg-large", "lengths")
"""Every encoding a block's ``mask_convention`` may ask for (made by :mod:`.planning.masks`)."""
EntryKind = Literal["auto", "function", "layer", "factory", "builder"]
Expectation = Literal["verified", "mismatch", "error", "timeout", "fail"]


@dataclass(frozen=True)
class Snippet:
    """The code under test.

    ``origin`` is ``inline`` (text from a page), ``file`` (a file under the project),
    ``module`` (an importable module of the user's own package) or ``artifact`` (an exported
    SavedModel, ``.keras`` or ``.tflite`` file: ``artifact`` says which, and ``source`` lists
    its files' digests, so that re-exporting it changes the cache key). ``line_offset`` maps
    a line of ``source`` to the line of ``location`` it came from: page line = offset + line.
    """

    origin: Literal["inline", "file", "module", "artifact"]
    source: str
    location: Location
    entry: str | None = None
    module: str | None = None
    line_offset: int = 0
    artifact: Mapping[str, str] = field(default_factory=frozen_map)
    """An artifact's ``format``, ``path``, ``signature`` and ``weights_from`` (empty else)."""


@dataclass(frozen=True)
class TimingSpec:
    """How to time a snippet: repeats after warm-up, optionally at realistic sizes.
    ``repeats=0`` (none stated): as many as :data:`~formula_check.messages.AUTO_REPEATS`
    allows, stopping once the runs add up to its time budget."""

    enabled: bool = True
    warmup: int = 1
    repeats: int = 0
    dims: Mapping[str, int] = field(default_factory=frozen_map)


VALUE_HEATMAPS = ("weights", "output", "hidden")
"""Heatmaps a block may ask for; ``delta`` and the scaling plot appear whenever there is data.
Each is drawn from the code's values (``NAME`` in the result's arrays), the oracle's
(``NAME:oracle``), or both side by side, and its title says whose."""
CARD_SECTIONS = ("heatmaps", "scaling", "shapes", "timings", "printed")
"""The card's collapsible sections a block may open (``open=``), in the card's order."""


@dataclass(frozen=True)
class CheckSpec:
    """Everything needed to check one formula block; the cache key is derived from it."""

    block_id: str
    location: Location
    oracle: str
    snippet: Snippet
    dims: Mapping[str, int] = field(default_factory=frozen_map)
    kind: EntryKind = "auto"
    mask: MaskKind = "none"
    mask_convention: MaskConvention = "additive"
    init: Mapping[str, Scalar] = field(default_factory=frozen_map)
    weights: Mapping[str, str] = field(default_factory=frozen_map)
    call: tuple[str, ...] | None = None
    returns: tuple[str, ...] | None = None
    params: Mapping[str, Scalar] = field(default_factory=frozen_map)
    atol: float | None = None
    rtol: float | None = None
    seed: int = 0
    timeout: float = 60.0
    expect: Expectation = "verified"
    perturb_weights: bool = True
    timing: TimingSpec = field(default_factory=TimingSpec)
    heatmaps: tuple[str, ...] | None = None
    """Which of :data:`VALUE_HEATMAPS` to draw; None: every one the result has data for."""
    open_sections: tuple[str, ...] = ()
    """Card sections drawn open (of :data:`CARD_SECTIONS`): the prose under the formula may
    speak of its heatmap, which is then in view without a click."""
    sweep: tuple[int, ...] = ()
    sweep_dim: str = "n"
    preset: str | None = None
    latex: str = ""
    skip: str = ""
    """When set, the block is not run; the reason is shown instead (status ``skipped``)."""
    symbols: str = ""
    """Symbol declarations for compiling ``latex`` (default: the oracle's own table)."""
    definitions: tuple[tuple[str, str, str], ...] = ()
    """``(oracle, latex, where)`` of the page's earlier blocks, whose ``Name(args) = ...``
    later formulas may call (``head_i = \text{Attention}(...)``); ``where`` is the defining
    block's ``page.md:LINE``."""
    check_formula: bool = True
    """Compile the LaTeX and compare it with the oracle (the third side of the check)."""
    formula_required: bool = False
    """A formula that cannot be compiled fails the block (``formula="required"``) instead of
    leaving it verified on its code alone, with "formula not checked"."""
    regimes: tuple[str, ...] | None = None
    """The oracle's input regimes the block is also checked on, by name (``regimes=``):
    ``()`` for the standard inputs only; ``None``: every regime of the oracle."""
    stated: tuple[str, ...] | None = None
    """The options the block's own header states, sorted (a tuple, so that the cache key is
    the same in every process); the others came from the page's defaults or are unset.
    ``None``: a spec made in code, every value of which is its own. A value the block
    states takes effect or is an error; a page default that cannot apply is left out."""
    notes: tuple[str, ...] = ()
    """What the card says of the page's defaults this block does not take, and why."""

    def states(self, option: str) -> bool:
        """Does the block itself give ``option`` (a name of a header option)?"""
        return self.stated is None or option in self.stated


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
        first_line = self.message.split("\n", 1)[
            0
        ]  # a log line stays one line; the card shows the caret
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
        if self.failure is not None:
            message = brief_message(self.failure.message) if brief else self.failure.message
            return f"{self.failure.type}{self._failure_where()}: {message}"
        if self.message:
            return brief_message(self.message) if brief else self.message
        lines = [v.summary() for v in self.verdicts if not v.regime]
        ran = list(dict.fromkeys(v.regime for v in self.verdicts if v.regime))
        if ran:
            lines.append(f"also within tolerance {_regimes_words(ran, 'on')}")
        return "; ".join(lines)

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


def to_plain(value: Any) -> Any:
    """Dataclasses, mappings, tuples and enums as plain JSON-able Python (arrays excluded)."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: to_plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, Mapping):
        return {str(k): to_plain(v) for k, v in value.items()}
    if isinstance(value, (tuple, list)):
        return [to_plain(v) for v in value]
    if isinstance(value, enum.Enum):
        return value.value
    if "numpy" in sys.modules:  # else no value can be a NumPy scalar
        import numpy  # (waits for another thread still importing it)

        if isinstance(value, numpy.generic):
            return value.item()
    return value


def well_typed(value: object) -> bool:
    """Whether a dataclass of this module holds, field by field, the types its annotations
    name: tuples item by item, ``X | None``, literals, enums and the dataclasses within. A
    result read back from a file is checked so before anything shows it."""
    return _conforms(value, type(value))


@functools.cache
def _hints(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)


def _conforms(value: object, hint: Any) -> bool:  # noqa: PLR0911  (one return per kind)
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if hint is Any:
        return True
    if origin is Literal:
        return any(type(value) is type(arg) and value == arg for arg in args)
    if origin in (types.UnionType, typing.Union):
        return any(_conforms(value, arg) for arg in args)
    if origin is tuple:
        if not isinstance(value, tuple):
            return False
        if len(args) == 2 and args[1] is Ellipsis:
            return all(_conforms(item, args[0]) for item in value)
        return len(value) == len(args) and all(map(_conforms, value, args))
    if origin is not None:  # a Mapping of arrays, say: the container, not its items
        return isinstance(value, origin)
    if hint in (int, float):  # JSON's numbers; a bool is an int to Python, not here
        return isinstance(value, int if hint is int else int | float) and type(value) is not bool
    if dataclasses.is_dataclass(hint):
        fields = _hints(hint)  # type: ignore[arg-type]
        return type(value) is hint and all(
            _conforms(getattr(value, field.name), fields[field.name])
            for field in dataclasses.fields(hint)
        )
    return isinstance(value, hint)
