"""Immutable values that flow through the checker: page text -> blocks -> check specs (what
to run and how to judge it); the results they come to are :mod:`.results`'. Also how any of
them is written as plain data and checked when read back."""

from __future__ import annotations

import dataclasses
import enum
import functools
import re
import sys
import types
import typing
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Literal

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
    """Whether a dataclass (of this module or :mod:`.results`) holds, field by field, the
    types its annotations name: tuples item by item, ``X | None``, literals, enums and the
    dataclasses within. A result read back from a file is checked so before anything shows
    it."""
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
