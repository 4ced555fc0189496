"""What an oracle is: a float64 NumPy reference of one formula, with named dims and metadata."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from formula_check.lazy import numpy as np  # imported on first use
from formula_check.model import Array, Scalar, frozen_map

Compute = Callable[[Mapping[str, Array], Mapping[str, Any]], Mapping[str, Array]]
"""``compute(arrays, params) -> named arrays``.

``arrays`` holds every input and weight by name as float64 (plus ``mask``: a boolean *keep*
array shaped ``(b, n, m)`` when the block asks for a mask). ``params`` holds the oracle's
scalar parameters and every dim size. The result holds every declared output and any
intermediate worth a heatmap (e.g. FFN ``hidden``).
"""

Generator = Callable[
    [Mapping[str, int], "np.random.Generator", Mapping[str, Any]], "dict[str, Array]"
]
Reshape = Callable[
    [Mapping[str, Array], Mapping[str, int], "np.random.Generator", Mapping[str, Any]],
    "dict[str, Array] | None",
]

KEEP_PARAM = "_keep"
"""The parameter through which a regime's ``inputs`` sees the block's mask: the boolean keep
array, ``(b, n, m)``, True where a query may attend; absent when the block has no mask."""
Tolerance = Callable[[str, Mapping[str, int], float], "float | Array"]


@dataclass(frozen=True)
class TensorSpec:
    """A named tensor with named dims, e.g. ``q: (b, n, d_k)``.

    A dim written as a digit string (``"1"``) is a literal size-1 axis.
    ``optional`` weights may be left out of a layer's weight map; the oracle then uses
    ``default`` (``0.0`` for a bias, ``1.0`` for a LayerNorm gain).
    """

    name: str
    dims: tuple[str, ...]
    description: str = ""
    optional: bool = False
    default: float = 0.0

    def shape(self, sizes: Mapping[str, int]) -> tuple[int, ...]:
        """The concrete shape for the given dim sizes."""
        return tuple(int(d) if d.isdigit() else sizes[d] for d in self.dims)

    def signature(self) -> str:
        """``q: (b, n, d_k)``."""
        return f"{self.name}: ({', '.join(self.dims)})"


@dataclass(frozen=True)
class Regime:
    """A second set of inputs a block's code is also checked on, chosen where a formula is
    sensitive: large logits, where a weak mask constant leaks; wide activations, where a
    ReLU6 or a clip shows; rows of variance near ε. Judged with a tolerance derived for its
    own values.

    ``inputs(standard, sizes, rng, params)`` makes the regime's float64 inputs from the
    standard ones (same names and shapes), or returns ``None`` where the regime does not
    apply to the block (``params[KEEP_PARAM]`` is the block's mask, if it has one); ``sizes``
    maps the standard sizes to the regime's, for an oracle that computes from sizes alone
    (positions far along a sequence).
    """

    name: str
    says: str
    """What it is, for the card: ``logits of about ±64``."""
    inputs: Reshape | None = None
    sizes: Callable[[Mapping[str, int]], dict[str, int]] | None = None
    weight_scale: float = 1.0
    """Every weight times this (a power of two, so exactly): a layer's own are scaled in place
    for the regime's call and restored after, a function's are given scaled."""


def scaled(factor: float, says: str = "", name: str = "wide") -> Regime:
    """Every input multiplied by ``factor``: the wide regime."""

    def inputs(
        standard: Mapping[str, Array],
        sizes: Mapping[str, int],
        rng: np.random.Generator,
        params: Mapping[str, Any],
    ) -> dict[str, Array]:
        return {key: value * factor for key, value in standard.items()}

    return Regime(name, says or f"inputs × {factor:g}", inputs)


WIDE = scaled(10.0)
"""The regime of an oracle that declares none: every input ten times wider."""


@dataclass(frozen=True)
class Oracle:
    """A reference implementation of one formula, plus what a checker needs to drive it.

    ``inputs`` are passed to a function snippet first, in order; then ``size_args`` as ints
    (for formulas such as the positional encoding that take sizes, not tensors); then
    ``weights`` in order. A layer snippet gets only the inputs; its weights are read back
    through the block's weight map.
    """

    name: str
    title: str
    latex: str
    compute: Compute
    inputs: tuple[TensorSpec, ...]
    outputs: tuple[TensorSpec, ...]
    dims: Mapping[str, int]
    weights: tuple[TensorSpec, ...] = ()
    size_args: tuple[str, ...] = ()
    params: Mapping[str, Scalar] = field(default_factory=frozen_map)
    heatmaps: tuple[str, ...] = ()
    mask_dims: tuple[str, ...] | None = None
    atol: float = 1e-5
    rtol: float = 1e-5
    version: int = 1
    summary: str = ""
    derive: Callable[[dict[str, int], Mapping[str, Any]], dict[str, int]] | None = None
    generate: Generator | None = None
    tolerance: Tolerance | None = None
    source: str = "builtin"
    regimes: tuple[Regime, ...] | None = None
    """Input regimes checked after the standard one; ``None``: :data:`WIDE` for an oracle
    with inputs, none for one that computes from sizes alone; ``()``: the standard only."""
    derived_dims: tuple[str, ...] = ()
    """Dims that ``derive`` computes from the others unless a block states them (a head
    width follows ``d_model / h``): ``dims`` gives their size at the default sizes, but that
    default never outvotes a stated ``d_model``, and a stated size is used as written."""
    symbols: str = ""
    """The names its formula may use, in the syntax of a block's ``symbols=`` (``x: [b, n,
    d_model]; gamma: [d_model]``): an oracle of one's own declares them here once, rather than
    on every block (a builtin's table comes with the package)."""
    vector_hint: str = ""
    """Said after the code fails using an input as one number (a Python ``if`` or ``float()``
    on it), when code written for one value at a time is natural: how to write it for the
    whole array the check passes (a learning-rate schedule, which Keras calls step by step)."""

    @property
    def builtin(self) -> bool:
        """One of the package's own: trusted to compute from its arguments alone, and to
        write into none of them. The registry gives every other oracle a ``source`` of its
        own (:func:`.registry.register`)."""
        return self.source == "builtin"

    def input_regimes(self) -> tuple[Regime, ...]:
        """The regimes a block of this oracle is checked on besides the standard inputs."""
        if self.regimes is not None:
            return self.regimes
        return (WIDE,) if self.inputs else ()

    def tensor(self, name: str) -> TensorSpec:
        """The input, weight or output called ``name``."""
        for spec in (*self.inputs, *self.weights, *self.outputs):
            if spec.name == name:
                return spec
        raise KeyError(name)

    def signature(self) -> str:
        """``attention(q: (b, n, d_k), k: ..., v: ...) -> output: (b, n, d_v), ...``."""
        args = [t.signature() for t in self.inputs]
        args += [f"{s}: int" for s in self.size_args]
        args += [t.signature() for t in self.weights]
        outs = ", ".join(t.signature() for t in self.outputs)
        return f"{self.name}({', '.join(args)}) -> {outs}"

    def resolve_dims(self, given: Mapping[str, int], params: Mapping[str, Any]) -> dict[str, int]:
        """Default sizes overridden by ``given``, then derived dims filled in and validated."""
        defaults = {k: v for k, v in self.dims.items() if k not in self.derived_dims}
        sizes = {**defaults, **given}
        if self.derive is not None:
            sizes = self.derive(sizes, params)
        return sizes

    def make_inputs(
        self, sizes: Mapping[str, int], rng: np.random.Generator, params: Mapping[str, Any]
    ) -> dict[str, Array]:
        """Seeded float64 inputs; standard normal unless the oracle says otherwise."""
        if self.generate is not None:
            return self.generate(sizes, rng, params)
        return {t.name: rng.standard_normal(t.shape(sizes)) for t in self.inputs}

    def make_weights(self, sizes: Mapping[str, int], rng: np.random.Generator) -> dict[str, Array]:
        """Seeded float64 weights, scaled like a Glorot initialiser so values stay O(1)."""
        weights: dict[str, Array] = {}
        for spec in self.weights:
            shape = spec.shape(sizes)
            if len(shape) >= 2:
                drawn = rng.standard_normal(shape)
                drawn *= 1.0 / np.sqrt(shape[0])  # in place: the weights are large
                weights[spec.name] = drawn
            else:
                weights[spec.name] = spec.default + 0.1 * rng.standard_normal(shape)
        return weights
