"""What the build asks of a worker (:class:`CheckRequest`, :class:`Cancel`,
:class:`Shutdown`), and what a worker says first (:class:`Hello`); see :mod:`.` for who
sends what."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from formula_check.messages.fields import Fields, Value, encode_values
from formula_check.model import frozen_map
from formula_check.results import Environment
from formula_check.wire import ProtocolError


@dataclass(frozen=True)
class Argument:
    """One argument of a call: an array sent with the request (by name), a value, or a list
    or tuple of arguments (``items``; a state list such as ``[memory, lengths, [None]]``),
    made afresh for every call so that code writing into it changes nothing of the next."""

    array: str = ""
    value: Value = None
    items: tuple[Argument, ...] | None = None
    sequence: str = "list"
    """What ``items`` become: ``list`` or ``tuple``."""

    def arrays(self) -> tuple[str, ...]:
        """The names of the arrays this argument passes, its items' included."""
        if self.items is not None:
            return tuple(name for item in self.items for name in item.arrays())
        return (self.array,) if self.array else ()

    def encode(self) -> dict[str, Any]:
        """``{"array": name}``, ``{"value": value}`` or ``{"items": [...], "sequence": ...}``."""
        if self.items is not None:
            return {"items": [item.encode() for item in self.items], "sequence": self.sequence}
        return {"array": self.array} if self.array else {"value": self.value}

    @classmethod
    def decode(cls, data: Any) -> Argument:
        """The argument ``data`` describes."""
        fields = Fields(data, "a call argument")
        if "items" in fields:
            sequence = fields.text("sequence")
            if sequence not in ("list", "tuple"):
                raise ProtocolError(f"a call argument's sequence is {sequence!r}")
            items = tuple(cls.decode(item) for item in fields.items("items"))
            return cls(items=items, sequence=sequence)
        if "array" in fields:
            return cls(array=fields.text("array"))
        return cls(value=fields.value("value"))


@dataclass(frozen=True)
class Call:
    """How to call an entry: positional and keyword arguments."""

    args: tuple[Argument, ...] = ()
    kwargs: Mapping[str, Argument] = field(default_factory=frozen_map)

    def arrays(self) -> tuple[str, ...]:
        """The names of the arrays the call passes, in order, nested ones included."""
        return tuple(name for arg in (*self.args, *self.kwargs.values()) for name in arg.arrays())

    def encode(self) -> dict[str, Any]:
        """The call as JSON."""
        return {
            "args": [arg.encode() for arg in self.args],
            "kwargs": {key: arg.encode() for key, arg in self.kwargs.items()},
        }

    @classmethod
    def decode(cls, data: Any) -> Call:
        """The call ``data`` describes."""
        fields = Fields(data, "a call")
        kwargs = fields.mapping("kwargs")
        return cls(
            tuple(Argument.decode(arg) for arg in fields.items("args")),
            frozen_map({str(key): Argument.decode(arg) for key, arg in kwargs.items()}),
        )


@dataclass(frozen=True)
class Calls:
    """How to call the entry as a function (given the weights too) and as a layer."""

    function: Call = Call()
    layer: Call = Call()

    def of(self, kind: str) -> Call:
        """The call for an entry of ``kind`` (``function``, ``layer`` or ``factory``)."""
        return self.function if kind == "function" else self.layer

    def encode(self) -> dict[str, Any]:
        """Both calls, as the header's ``function_call`` and ``layer_call``."""
        return {"function_call": self.function.encode(), "layer_call": self.layer.encode()}

    @classmethod
    def decode(cls, fields: Fields) -> Calls:
        """The calls among ``fields``."""
        return cls(
            Call.decode(fields.required("function_call")),
            Call.decode(fields.required("layer_call")),
        )


@dataclass(frozen=True)
class RegimeRequest:
    """One input regime: the same code on other inputs, sent under ``prefix``."""

    name: str
    prefix: str
    calls: Calls
    resized: bool = False
    """At sizes of its own (a layer, built for the check's sizes, cannot run it)."""
    weight_scale: float = 1.0

    def encode(self) -> dict[str, Any]:
        """The regime as JSON."""
        return {
            "name": self.name,
            "prefix": self.prefix,
            "resized": self.resized,
            "weight_scale": self.weight_scale,
            **self.calls.encode(),
        }

    @classmethod
    def decode(cls, data: Any) -> RegimeRequest:
        """The regime ``data`` describes."""
        fields = Fields(data, "a regime")
        return cls(
            fields.text("name"),
            fields.text("prefix"),
            Calls.decode(fields),
            fields.flag("resized", False),
            fields.number("weight_scale", 1.0),
        )


@dataclass(frozen=True)
class TimingRun:
    """One timed run: the entry built with ``init``, called on the arrays under ``prefix``."""

    label: str
    prefix: str
    init: Mapping[str, Value]
    calls: Calls
    eager_only: bool = False
    size: int = 0

    def encode(self) -> dict[str, Any]:
        """The run as JSON."""
        return {
            "label": self.label,
            "prefix": self.prefix,
            "eager_only": self.eager_only,
            "init": encode_values(self.init),
            **self.calls.encode(),
            "size": self.size,
        }

    @classmethod
    def decode(cls, data: Any) -> TimingRun:
        """The run ``data`` describes."""
        fields = Fields(data, "a timing run")
        return cls(
            fields.text("label"),
            fields.text("prefix"),
            fields.values("init"),
            Calls.decode(fields),
            fields.flag("eager_only", False),
            fields.integer("size", 0),
        )


AUTO_REPEATS = (3, 5, 0.25)
"""``repeats=0``: at least 3 and at most 5 timed runs; a 4th and a 5th only while the runs so
far are not :func:`steady` and add up to less than a quarter of a second. Runs that agree
give the same median from three as from five, and the card shows their spread and count; a
call's budget buys it as many runs as its own duration allows (a fast function its five
while they disagree, a layer of tens of milliseconds no more than the budget). A stated
``repeats=N`` is N exactly, steady or not."""

STEADY = 0.05
"""Runs are steady when their spread (half their interquartile range, as a card shows it) is
at most this fraction of their median."""


def median_and_spread(samples: Sequence[float]) -> tuple[float, float]:
    """The median of ``samples`` and their spread, half the interquartile range: the figures
    a card shows for a timed run. Quartiles interpolate linearly between the sorted samples
    (NumPy's default ``percentile``), in plain Python: a check's process, forked afresh for
    each check, would pay NumPy's first ``percentile`` call (milliseconds) on every check."""
    ordered = sorted(samples)
    if not ordered:
        raise ValueError("no samples to sum up")
    q1, median, q3 = (_quantile(ordered, q) for q in (0.25, 0.5, 0.75))
    return median, (q3 - q1) / 2


def _quantile(ordered: Sequence[float], q: float) -> float:
    position = (len(ordered) - 1) * q
    below = int(position)
    above = min(below + 1, len(ordered) - 1)
    return ordered[below] + (position - below) * (ordered[above] - ordered[below])


def steady(samples: Sequence[float]) -> bool:
    """Whether ``samples`` agree to within :data:`STEADY` (judged as the card sums them up:
    the spread of their quartiles, so one run slower than the rest does not decide it)."""
    median, spread = median_and_spread(samples)
    return spread <= STEADY * median


def enough_runs(samples: Sequence[float], fewest: int, most: int, budget: float) -> bool:
    """Whether an adaptive count of runs stops at ``samples``: at ``most``; else, once
    ``fewest`` are in, when they are :func:`steady` or add up to ``budget`` seconds."""
    if len(samples) >= most:
        return True
    return len(samples) >= fewest and (sum(samples) >= budget or steady(samples))


@dataclass(frozen=True)
class TimingRequest:
    """The timing runs of a check, each repeated ``repeats`` times (``0``: as
    :data:`AUTO_REPEATS` says) after ``warmup`` untimed runs, eagerly and after the trace
    under ``tf.function``; eagerly, a call the check itself made of the same runner counts
    as one of them (``worker.timing_runs``)."""

    runs: tuple[TimingRun, ...]
    warmup: int = 1
    repeats: int = 0

    def encode(self) -> dict[str, Any]:
        """The timing as JSON."""
        runs = [run.encode() for run in self.runs]
        return {"warmup": self.warmup, "repeats": self.repeats, "runs": runs}

    @classmethod
    def decode(cls, data: Any) -> TimingRequest:
        """The timing ``data`` describes."""
        fields = Fields(data, "a timing request")
        return cls(
            tuple(TimingRun.decode(run) for run in fields.items("runs")),
            fields.integer("warmup", 1),
            fields.integer("repeats", 0),
        )


@dataclass(frozen=True)
class CheckRequest:
    """Run one block's code: concrete, every array made and every argument decided."""

    root: str
    calls: Calls
    source: str = ""
    filename: str = ""
    """The name the inline source is compiled under; empty for a module."""
    module: str = ""
    """The project module to import instead of ``source``."""
    entry: str = ""
    """The name to check; empty: the last function or class the snippet defines."""
    kind: str = "auto"
    init: Mapping[str, Value] = field(default_factory=frozen_map)
    init_sources: Mapping[str, Mapping[str, str]] = field(default_factory=frozen_map)
    """Where each keyword of ``init`` came from: its ``origin``, and ``said``, in words."""
    weights: Mapping[str, str] = field(default_factory=frozen_map)
    """The weight map: a name of the formula's to an attribute path of the layer."""
    perturb: bool = True
    seed: int = 0
    page_folder: str = ""
    attribute_outputs: Mapping[str, str] = field(default_factory=frozen_map)
    """Outputs the code keeps on the layer instead of returning them (d2l's
    ``attention_weights``): an output's name to its attribute path, read after each call."""
    preset_weights: tuple[str, ...] = ()
    """The weight map's names whose paths a preset gave, to be read under the one sub-layer
    that holds them when the layer itself does not (a wrapper's ``self.mha``)."""
    regimes: tuple[RegimeRequest, ...] = ()
    timing: TimingRequest | None = None
    time_limit: float | None = None
    """Seconds the worker gives the check before it stops it (set by the pool)."""
    artifact: Mapping[str, str] = field(default_factory=frozen_map)
    """An exported artifact to load instead of a snippet: its ``format`` (``saved_model``,
    ``keras``, ``tflite``), ``path``, ``signature`` and ``weights_from``; empty for code."""
    unreadable: tuple[str, ...] = ()
    """Folders the check's process may not read a file of (the cache: set by the engine),
    where the kernel confines it (:mod:`..runtime.confinement`)."""

    def with_time_limit(self, seconds: float) -> CheckRequest:
        """The same request, to be stopped after ``seconds``."""
        return dataclasses.replace(self, time_limit=seconds)

    def encode(self) -> dict[str, Any]:
        """The request's header."""
        header: dict[str, Any] = {
            "op": "check",
            "root": self.root,
            "source": self.source,
            "filename": self.filename,
            "module": self.module,
            "entry": self.entry,
            "kind": self.kind,
            "init": encode_values(self.init),
            "init_sources": {key: dict(said) for key, said in self.init_sources.items()},
            "weights": dict(self.weights),
            "perturb": self.perturb,
            "seed": self.seed,
            "page_folder": self.page_folder,
            "attribute_outputs": dict(self.attribute_outputs),
            "preset_weights": list(self.preset_weights),
            "artifact": dict(self.artifact),
            "unreadable": list(self.unreadable),
            **self.calls.encode(),
            "regimes": [regime.encode() for regime in self.regimes],
        }
        if self.timing is not None:
            header["timing"] = self.timing.encode()
        if self.time_limit is not None:
            header["time_limit"] = self.time_limit
        return header

    @classmethod
    def decode(cls, header: Mapping[str, Any]) -> CheckRequest:
        """The request ``header`` describes."""
        fields = Fields(header, "a check request")
        timing = fields.optional("timing")
        sources = fields.mapping("init_sources")
        return cls(
            root=fields.text("root"),
            calls=Calls.decode(fields),
            source=fields.text("source"),
            filename=fields.text("filename"),
            module=fields.text("module"),
            entry=fields.text("entry"),
            kind=fields.text("kind", "auto"),
            init=fields.values("init"),
            init_sources=frozen_map(
                {
                    str(k): Fields(v, "a keyword's source").texts_by_name()
                    for k, v in sources.items()
                }
            ),
            weights=Fields(fields.mapping("weights"), "a weight map").texts_by_name(),
            perturb=fields.flag("perturb", True),
            seed=fields.integer("seed", 0),
            page_folder=fields.text("page_folder"),
            attribute_outputs=Fields(
                fields.mapping("attribute_outputs"), "attribute outputs"
            ).texts_by_name(),
            preset_weights=fields.texts("preset_weights"),
            regimes=tuple(RegimeRequest.decode(r) for r in fields.items("regimes")),
            timing=TimingRequest.decode(timing) if timing else None,
            time_limit=fields.optional_number("time_limit"),
            artifact=Fields(fields.mapping("artifact"), "an artifact").texts_by_name(),
            unreadable=fields.texts("unreadable"),
        )


@dataclass(frozen=True)
class Cancel:
    """Stop the check now running (the worker answers ``cancelled``, or that it runs on)."""

    def encode(self) -> dict[str, Any]:
        """The header."""
        return {"op": "cancel"}


@dataclass(frozen=True)
class Shutdown:
    """End the worker."""

    def encode(self) -> dict[str, Any]:
        """The header."""
        return {"op": "shutdown"}


def decode_request(header: Mapping[str, Any]) -> CheckRequest | Cancel | Shutdown:
    """What the build asked of a worker."""
    op = Fields(header, "a request").text("op")
    if op == "cancel":
        return Cancel()
    if op == "shutdown":
        return Shutdown()
    if op == "check":
        return CheckRequest.decode(header)
    raise ProtocolError(f"unknown request {op!r}")


@dataclass(frozen=True)
class Hello:
    """A worker's first message: TensorFlow imported (or not: ``error`` says why), and what
    it runs on."""

    ok: bool
    error: str = ""
    tf_version: str = ""
    keras_version: str = ""
    device: str = ""
    threads: int = 0
    warmed_up: bool = False
    """It ran a small check of its own, so its check processes start warm."""
    scratch: str = ""
    """Its private temporary folder."""

    @property
    def environment(self) -> Environment:
        """What a check in this worker runs on, as a result shows it."""
        return Environment(self.tf_version, self.keras_version, self.device, self.threads)

    def encode(self) -> dict[str, Any]:
        """The header."""
        if not self.ok:
            return {"op": "hello", "ok": False, "error": self.error}
        return {
            "op": "hello",
            "ok": True,
            "tf_version": self.tf_version,
            "keras_version": self.keras_version,
            "device": self.device,
            "threads": self.threads,
            "warmed_up": self.warmed_up,
            "scratch": self.scratch,
        }

    @classmethod
    def decode(cls, header: Mapping[str, Any]) -> Hello:
        """The hello ``header`` says."""
        fields = Fields(header, "a hello")
        return cls(
            ok=fields.flag("ok", False),
            error=fields.text("error"),
            tf_version=fields.text("tf_version"),
            keras_version=fields.text("keras_version"),
            device=fields.text("device"),
            threads=fields.integer("threads", 0),
            warmed_up=fields.flag("warmed_up", False),
            scratch=fields.text("scratch"),
        )
