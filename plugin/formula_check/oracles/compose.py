"""Composite oracles built from others: a layer as a sequence of sublayers over named streams.

An encoder layer is multi-head attention, a residual sum and a layer normalisation, then a
feed-forward network, a sum and a normalisation: each a builtin oracle already. A composite
says which oracle each step applies, to which streams (named tensors: the inputs, then what
earlier steps wrote), under which prefix its weights go (``attn`` gives ``attn.W_q``), and
where its output goes::

    def layout(params):
        return (
            *residual(MULTIHEAD, "attn", {"q": "x", "k": "x", "v": "x"}, norm="norm1",
                      placement=params["norm"], params={"variant": "self"}),
            *residual(FFN, "ffn", {"x": "x"}, norm="norm2", placement=params["norm"]),
            Rename("x", "output"),
        )

    ENCODER = compose("my_encoder", "My encoder layer", latex, layout=layout,
                      inputs=(X,), outputs=(tensor("output", "b n d_model"),),
                      dims={...}, params={"norm": "post", "epsilon": 1e-6})

Each step's oracle computes in the precision it is given, so the composite's float32 draws
(the derived tolerance) are its parts' own, and its parts' ``derive`` checks its sizes.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from formula_check.errors import OracleError
from formula_check.model import Array, Scalar, frozen_map
from formula_check.oracles.base import Oracle, Regime, TensorSpec
from formula_check.oracles.layers import LAYER_NORM
from formula_check.oracles.tensors import given, positive_sizes


@dataclass(frozen=True)
class Apply:
    """Apply ``oracle`` to streams: ``reads`` maps each of its inputs to a stream, its
    weights are the composite's ``prefix.name``, its ``output`` is written to ``into``.

    ``params`` are fixed for this step (``variant="self"``) over the block's; ``masked``:
    the block's mask goes to this step; ``shows`` names results of the step (its attention
    ``weights``, its ``hidden`` layer) that the composite returns too, under new names."""

    oracle: Oracle
    prefix: str
    reads: Mapping[str, str]
    into: str
    params: Mapping[str, Scalar] = field(default_factory=frozen_map)
    masked: bool = False
    shows: Mapping[str, str] = field(default_factory=frozen_map)

    def weight(self, spec: TensorSpec) -> TensorSpec:
        """The composite's name for one of the step's weights: ``attn.W_q``."""
        name = f"{self.prefix}.{spec.name}" if self.prefix else spec.name
        return TensorSpec(name, spec.dims, spec.description, spec.optional, spec.default)


@dataclass(frozen=True)
class Add:
    """``into = first + second``: a residual connection."""

    first: str
    second: str
    into: str


@dataclass(frozen=True)
class Rename:
    """``into = stream``: gives a stream the name of an output."""

    stream: str
    into: str


Step = Apply | Add | Rename
Layout = Callable[[Mapping[str, Any]], Sequence[Step]]
"""The steps of a composite for the block's params (and sizes): the norm's placement may
reorder them; their weights must be the same for every params."""

PLACEMENTS = ("post", "pre")
"""Where a residual sublayer normalises: after the sum (post-LN, the paper's) or before the
sublayer (pre-LN)."""


def residual(
    oracle: Oracle,
    prefix: str,
    reads: Mapping[str, str],
    *,
    norm: str,
    placement: str,
    stream: str = "x",
    params: Mapping[str, Scalar] | None = None,
    masked: bool = False,
    shows: Mapping[str, str] | None = None,
) -> tuple[Step, ...]:
    """``stream`` becomes ``LayerNorm(stream + sublayer(stream))`` (``post``) or
    ``stream + sublayer(LayerNorm(stream))`` (``pre``), the norm's weights under ``norm``.

    ``reads`` maps the sublayer's inputs to streams; those that read ``stream`` read the
    normalised one under pre-LN (a cross-attention's context is left as it is)."""
    if placement not in PLACEMENTS:
        raise OracleError(f"param norm must be one of 'post', 'pre', got {placement!r}")
    out = f"{prefix}.output"
    fixed = frozen_map(params or {})
    showing = frozen_map(shows or {})
    if placement == "post":
        return (
            Apply(oracle, prefix, reads, out, fixed, masked, showing),
            Add(stream, out, f"{prefix}.sum"),
            Apply(LAYER_NORM, norm, {"x": f"{prefix}.sum"}, stream),
        )
    normed = f"{norm}.output"
    moved = {name: normed if read == stream else read for name, read in reads.items()}
    return (
        Apply(LAYER_NORM, norm, {"x": stream}, normed),
        Apply(oracle, prefix, moved, out, fixed, masked, showing),
        Add(stream, out, stream),
    )


def composite_weights(steps: Sequence[Step]) -> tuple[TensorSpec, ...]:
    """Every step's weights under its prefix, in the order the steps first use them."""
    found: dict[str, TensorSpec] = {}
    for step in steps:
        if isinstance(step, Apply):
            for spec in step.oracle.weights:
                named = step.weight(spec)
                found.setdefault(named.name, named)
    return tuple(found.values())


def run_steps(
    steps: Sequence[Step],
    inputs: Sequence[TensorSpec],
    arrays: Mapping[str, Array],
    params: Mapping[str, Any],
) -> dict[str, Array]:
    """Every stream after the steps ran, and the results the steps show. A step's oracle
    gets its own inputs and weights (an optional weight left out stays out: its default is
    its oracle's), the block's params with its own over them, and the mask if it takes it."""
    streams: dict[str, Array] = {spec.name: given(arrays, spec) for spec in inputs}
    shown: dict[str, Array] = {}
    for step in steps:
        if isinstance(step, Add):
            streams[step.into] = streams[step.first] + streams[step.second]
        elif isinstance(step, Rename):
            streams[step.into] = streams[step.stream]
        else:
            part = {name: streams[read] for name, read in step.reads.items()}
            for spec in step.oracle.weights:
                named = step.weight(spec).name
                if named in arrays:
                    part[spec.name] = arrays[named]
            if step.masked and "mask" in arrays:
                part["mask"] = arrays["mask"]
            result = step.oracle.compute(part, {**params, **step.params})
            streams[step.into] = result["output"]
            shown.update({new: result[old] for old, new in step.shows.items()})
    return {**shown, **streams}


def _parts(steps: Sequence[Step]) -> list[Apply]:
    return [step for step in steps if isinstance(step, Apply)]


def _known_dims(oracle: Oracle) -> set[str]:
    shaped = (*oracle.inputs, *oracle.weights, *oracle.outputs)
    return set(oracle.dims) | {d for t in shaped for d in t.dims if not d.isdigit()}


def compose(
    name: str,
    title: str,
    latex: str,
    *,
    layout: Layout,
    inputs: tuple[TensorSpec, ...],
    outputs: tuple[TensorSpec, ...],
    dims: Mapping[str, int],
    params: Mapping[str, Scalar] | None = None,
    summary: str = "",
    heatmaps: tuple[str, ...] = (),
    mask_dims: tuple[str, ...] | None = None,
    regimes: tuple[Regime, ...] | None = None,
) -> Oracle:
    """An oracle that runs ``layout``'s steps: its weights are its steps' under their
    prefixes, its outputs are streams (or results a step shows) of the same names, its
    derived dims (a head width) are its parts', and each part's ``derive`` checks the sizes
    it sees, so a composite of multi-head attention honours a stated ``depth`` as
    ``multihead`` does."""
    defaults = frozen_map(params or {})
    steps = layout(defaults)
    weights = composite_weights(steps)
    derived = tuple(dict.fromkeys(d for p in _parts(steps) for d in p.oracle.derived_dims))

    def compute(arrays: Mapping[str, Array], given_params: Mapping[str, Any]) -> dict[str, Array]:
        ran = run_steps(layout({**defaults, **given_params}), inputs, arrays, given_params)
        missing = [spec.name for spec in outputs if spec.name not in ran]
        if missing:
            raise OracleError(f"oracle {name!r}: no step writes {', '.join(missing)}")
        return ran

    return Oracle(
        name=name,
        title=title,
        latex=latex,
        compute=compute,
        inputs=inputs,
        outputs=outputs,
        dims=dims,
        weights=weights,
        params=defaults,
        heatmaps=heatmaps,
        mask_dims=mask_dims,
        summary=summary,
        derive=_deriving(name, layout, defaults, weights, dims),
        regimes=regimes,
        derived_dims=derived,
    )


def _deriving(
    name: str,
    layout: Layout,
    defaults: Mapping[str, Any],
    weights: tuple[TensorSpec, ...],
    dims: Mapping[str, int],
) -> Callable[[dict[str, int], Mapping[str, Any]], dict[str, int]]:
    """A composite's ``derive``: each part resolves the sizes it sees, as it would alone, and
    a dim of the composite's own that a part derives (a head width) is taken from it."""

    def derive(sizes: dict[str, int], block: Mapping[str, Any]) -> dict[str, int]:
        sizes = positive_sizes(sizes, block)
        chosen = layout({**defaults, **block})
        if {w.name for w in composite_weights(chosen)} != {w.name for w in weights}:
            raise OracleError(f"oracle {name!r}: its steps' weights change with its params")
        for part in _parts(chosen):
            known = _known_dims(part.oracle)
            seen = {dim: size for dim, size in sizes.items() if dim in known}
            resolved = part.oracle.resolve_dims(seen, {**block, **part.params})
            for dim, size in resolved.items():
                if dim in dims and dim not in sizes:
                    sizes[dim] = size
        return sizes

    return derive
