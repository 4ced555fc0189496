"""From a block's spec to a concrete worker request: sizes, seeded arrays, call plans.

Pure: no TensorFlow, no processes. The same spec always gives the same request bytes.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from formula_check.errors import FormulaCheckError, OracleError, SpecError
from formula_check.messages import CheckRequest, RegimeRequest, TimingRequest, TimingRun
from formula_check.model import Array, CheckSpec, frozen_map
from formula_check.oracles import Oracle, get_oracle
from formula_check.oracles.base import KEEP_PARAM
from formula_check.planning import masks
from formula_check.planning.calls import call_plans, resolve_init
from formula_check.planning.presets import PRESETS, apply_preset, init_sources
from formula_check.planning.stated import dims_as_stated, inputs_the_call_passes, options_that_apply


@dataclass(frozen=True)
class PlannedRegime:
    """One input regime of a check: its name and its own sizes and float64 inputs (the
    weights and the mask are the standard inputs')."""

    name: str
    says: str
    sizes: Mapping[str, int]
    inputs: Mapping[str, Array]
    prefix: str
    weight_scale: float = 1.0


@dataclass(frozen=True)
class Plan:
    """Everything the engine needs to run one check and judge it."""

    spec: CheckSpec
    oracle: Oracle
    sizes: Mapping[str, int]
    params: Mapping[str, Any]
    inputs: Mapping[str, Array]  # float64, already rounded through float32
    weights: Mapping[str, Array]  # function snippets only; layers report their own
    keep: Array | None  # the logical mask for the oracle
    request: CheckRequest
    arrays: Mapping[str, Array]
    regimes: tuple[PlannedRegime, ...] = ()
    notes: tuple[str, ...] = ()
    """What the card says about the block's options (an input ``call=`` passes as another)."""
    artifact: Mapping[str, str] = field(default_factory=frozen_map)
    """What the worker found an exported artifact to be (its reply's ``artifact``): set when
    its reply is judged, so that the tolerance follows the artifact's precision."""


def plan_check(spec: CheckSpec, root: str, with_timing: bool = True) -> Plan:
    """Generate inputs, weights and mask for ``spec``, and the request that runs its code.

    A custom oracle whose sizes or inputs raise (its ``derive`` or ``generate``) fails its
    block with an :class:`OracleError`, as its ``compute`` does when judged; a builtin one
    raising is a bug of ours, and stays loud."""
    block, at = _preset_place(spec)
    spec = _preset_under(apply_preset(block), block, at)
    oracle = get_oracle(spec.oracle)
    try:
        return _planned(spec, oracle, root, with_timing, block)
    except MemoryError:
        raise SpecError(
            "not enough memory to make this check's inputs: use smaller dims", spec.location
        ) from None
    except FormulaCheckError:
        raise
    except Exception as exc:
        if oracle.builtin:
            raise
        raise OracleError(
            f"oracle {oracle.name!r} failed to make this block's sizes or inputs: "
            f"{type(exc).__name__}: {exc}",
            spec.location,
        ) from None


def _preset_place(spec: CheckSpec) -> tuple[CheckSpec, str]:
    """``preset="keras-mha@mha"``: the spec with the preset's name alone, and the place."""
    name, _, at = (spec.preset or "").partition("@")
    return (dataclasses.replace(spec, preset=name) if at else spec), at


def _preset_under(spec: CheckSpec, block: CheckSpec, at: str) -> CheckSpec:
    """The preset's weight paths under ``at``, the sub-layer the block names; the block's
    own map is as written."""
    if not at:
        return spec
    given = PRESETS[block.preset or ""].get("weights", {})
    weights = {
        name: f"{at}.{path}" if name in given and name not in block.weights else path
        for name, path in spec.weights.items()
    }
    return dataclasses.replace(spec, weights=frozen_map(weights))


def _preset_weights(block: CheckSpec, spec: CheckSpec) -> tuple[str, ...]:
    """The names whose paths the preset gave as they are (the block named no place for
    them), for the worker to find under the one sub-layer that holds them."""
    given = PRESETS.get(block.preset or "", {}).get("weights", {})
    return tuple(
        name
        for name, path in given.items()
        if name not in block.weights and spec.weights.get(name) == path
    )


def _planned(
    spec: CheckSpec, oracle: Oracle, root: str, with_timing: bool, block: CheckSpec
) -> Plan:
    """``block`` is the spec as written, before its preset was applied."""
    params: dict[str, Any] = {**oracle.params, **spec.params}
    sizes = oracle.resolve_dims(spec.dims, params)
    dims_as_stated(spec, oracle, sizes)
    options_that_apply(block)  # as written: a preset's settings serve blocks with masks too
    params.update(sizes)
    timed = with_timing and spec.timing.enabled
    numbers = _numbers(spec, oracle, sizes, "the check", MAX_NUMBERS, outputs=True)
    if timed:
        _timing_as_stated(spec, oracle, params)
        for label, dims, _ in _timing_variants(spec):
            left = MAX_NUMBERS - numbers
            numbers += _numbers(spec, oracle, oracle.resolve_dims(dims, params), label, left)
    rng = np.random.default_rng(spec.seed)
    singles: Singles = {}
    inputs = _round32(oracle.make_inputs(sizes, rng, params), singles)
    weights = _round32(oracle.make_weights(sizes, rng), singles)
    keep = _keep_mask(spec, oracle, sizes, rng)
    notes = inputs_the_call_passes(spec, oracle, inputs, has_mask=keep is not None)
    arrays = _check_arrays(spec, oracle, inputs, weights, keep, singles)
    regimes = _regimes(spec, oracle, sizes, params, inputs, numbers, keep, singles)
    arrays.update(_regime_arrays(regimes, weights, singles))
    timing = None
    if timed:
        timing, timing_arrays = _timing_runs(spec, oracle, params, sizes, has_mask=keep is not None)
        arrays.update(timing_arrays)
    request = dataclasses.replace(
        _request(spec, block, oracle, root, sizes, has_mask=keep is not None),
        regimes=tuple(_regime_request(spec, oracle, sizes, r, keep is not None) for r in regimes),
        timing=timing,
    )
    notes = (*spec.notes, *notes)  # the page's defaults it does not take, first
    return Plan(spec, oracle, sizes, params, inputs, weights, keep, request, arrays, regimes, notes)


def _timing_as_stated(spec: CheckSpec, oracle: Oracle, params: Mapping[str, Any]) -> None:
    """A size ``timing_dims=`` or ``sweep=`` states is the size timed: a dim the oracle
    derives from others (self-attention's ``m``), or one it does not have (``n``, the sweep's
    default), would leave every run at the same size."""
    shaped = (*oracle.inputs, *oracle.weights, *oracle.outputs)
    known = set(oracle.dims) | {dim for tensor in shaped for dim in tensor.dims}
    for label, dims, _ in _timing_variants(spec):
        sizes = oracle.resolve_dims(dims, params)
        swept = {spec.sweep_dim: dims[spec.sweep_dim]} if label.startswith("sweep") else {}
        for dim, size in {**spec.timing.dims, **swept}.items():
            option = "sweep" if dim in swept else "timing_dims"
            if dim not in sizes or dim not in known:  # resolve_dims keeps a dim it lacks
                listed = ", ".join(sorted(known & set(sizes)))
                raise SpecError(
                    f"{option}: oracle {oracle.name!r} has no dim {dim!r} to time at {size} "
                    f"(known: {listed}; sweep_dim= names the one a sweep "
                    "varies)",
                    spec.location,
                )
            if sizes[dim] != size:
                raise SpecError(
                    f"{option}: {dim}={size} cannot take effect: oracle {oracle.name!r} makes "
                    f"{dim} {sizes[dim]} from the other sizes and parameters",
                    spec.location,
                )


def _check_arrays(
    spec: CheckSpec,
    oracle: Oracle,
    inputs: Mapping[str, Array],
    weights: Mapping[str, Array],
    keep: Array | None,
    singles: Singles,
) -> dict[str, Array]:
    """The check's own arrays as the code gets them: float32, and the mask as it asks."""
    arrays = {f"in/{k}": _single(v, singles) for k, v in inputs.items()}
    arrays.update({f"wt/{k}": _single(v, singles) for k, v in weights.items()})
    if keep is not None:
        arrays["in/mask"] = _snippet_mask(spec, oracle, keep)
    return arrays


def _regime_arrays(
    regimes: tuple[PlannedRegime, ...], weights: Mapping[str, Array], singles: Singles
) -> dict[str, Array]:
    """Each regime's inputs under its prefix, and its weights where it scales them."""
    arrays: dict[str, Array] = {}
    for regime in regimes:
        if regime.weight_scale != 1.0:  # a function is given its weights: scaled, exactly
            arrays.update(
                {
                    f"{regime.prefix}wt/{k}": (v * regime.weight_scale).astype(np.float32)
                    for k, v in weights.items()
                }
            )
        arrays.update(
            {f"{regime.prefix}in/{k}": _single(v, singles) for k, v in regime.inputs.items()}
        )
    return arrays


def _request(
    spec: CheckSpec,
    block: CheckSpec,
    oracle: Oracle,
    root: str,
    sizes: Mapping[str, int],
    *,
    has_mask: bool,
) -> CheckRequest:
    """The request that runs the block's code at ``sizes`` (without regimes or timing)."""
    return CheckRequest(
        root=root,
        calls=call_plans(spec, oracle, sizes, has_mask=has_mask),
        source=spec.snippet.source,
        filename=_filename(spec),
        module=spec.snippet.module or "",
        entry=spec.snippet.entry or "",
        kind=spec.kind,
        init=resolve_init(spec.init, sizes),
        init_sources=init_sources(block, sizes),
        weights=frozen_map(spec.weights),
        perturb=spec.perturb_weights,
        seed=spec.seed,
        page_folder=_page_folder(spec),
        attribute_outputs=frozen_map(attribute_outputs(spec)),
        preset_weights=_preset_weights(block, spec),
        artifact=spec.snippet.artifact,
    )


def attribute_outputs(spec: CheckSpec) -> dict[str, str]:
    """``returns="output weights=attention_weights"``: the outputs the layer keeps on an
    attribute, by name, with the attribute's path."""
    kept = (word.partition("=") for word in spec.returns or () if "=" in word)
    return {name: path for name, _, path in kept}


def _regime_request(
    spec: CheckSpec,
    oracle: Oracle,
    sizes: Mapping[str, int],
    regime: PlannedRegime,
    has_mask: bool,
) -> RegimeRequest:
    return RegimeRequest(
        regime.name,
        regime.prefix,
        call_plans(spec, oracle, regime.sizes, has_mask=has_mask),
        resized=dict(regime.sizes) != dict(sizes),
        weight_scale=regime.weight_scale,
    )


def _regimes(
    spec: CheckSpec,
    oracle: Oracle,
    sizes: Mapping[str, int],
    params: Mapping[str, Any],
    inputs: Mapping[str, Array],
    numbers: int,
    keep: Array | None,
    singles: Singles,
) -> tuple[PlannedRegime, ...]:
    """The oracle's input regimes for this block (those its ``regimes=`` names, if it does),
    each seeded from the block's seed and its place among the oracle's: the same spec always
    gives the same inputs, and a regime chosen the same inputs as when all of them run."""
    planned = []
    for index, regime in enumerate(oracle.input_regimes(), start=1):
        if spec.regimes is not None and regime.name not in spec.regimes:
            continue
        rng = np.random.default_rng([spec.seed, index])
        resized = regime.sizes(sizes) if regime.sizes is not None else dict(sizes)
        # every regime holds inputs and outputs of its own: counted as the check's are
        numbers += _numbers(
            spec,
            oracle,
            resized,
            f"the {regime.name} regime",
            MAX_NUMBERS - numbers,
            outputs=True,
        )
        if regime.inputs is not None:
            given = {**params, KEEP_PARAM: keep} if keep is not None else params
            found = regime.inputs(inputs, resized, rng, given)
            if found is None:  # not for this block (a regime of masked keys, and no mask)
                continue
            made = found
        elif resized != dict(sizes):  # new sizes, and no word on inputs: fresh ones
            made = oracle.make_inputs(resized, rng, params)
        else:
            made = dict(inputs)
        planned.append(
            PlannedRegime(
                regime.name,
                regime.says,
                resized,
                _round32(made, singles),
                f"r{index}/",
                regime.weight_scale,
            )
        )
    return tuple(planned)


def _page_folder(spec: CheckSpec) -> str:
    """The project folder the block's page lies in (``docs``), where a check's writes would
    rebuild the site under ``mkdocs serve``; empty if the page is not in one."""
    parts = Path(spec.location.path).parts
    if len(parts) < 2 or Path(spec.location.path).is_absolute() or ".." in parts:
        return ""
    return parts[0]


MAX_NUMBERS = 2**26
"""The most numbers (inputs, weights, masks and the oracle's outputs, for the check and
its timing runs) one block may make in the building process: 64 Mi numbers, 512 MiB as
float64 (a few times that at the peak, with the float32 copies and the oracle's own
intermediates). Far beyond what a check needs, and far below what takes a machine down."""


def _numbers(
    spec: CheckSpec,
    oracle: Oracle,
    sizes: Mapping[str, int],
    what: str,
    limit: int,
    *,
    outputs: bool = False,
) -> int:
    """How many numbers ``what`` makes at ``sizes``; an error naming the block if more than
    ``limit`` (rather than a build killed for its memory)."""
    tensors = (*oracle.inputs, *oracle.weights, *(oracle.outputs if outputs else ()))
    count = sum(math.prod(t.shape(sizes)) for t in tensors)
    if spec.mask != "none":  # the logical mask, then the snippet's copy (as _keep_mask makes them)
        count += 2 * sizes.get("b", 1) * sizes.get("n", 1) * sizes.get("m", sizes.get("n", 1))
    if count > limit:
        given = " ".join(f"{name}={sizes[name]}" for name in sorted(sizes))
        raise SpecError(
            f"{what} would make {count:,} numbers ({count * 8 / 2**30:.1f} GiB) at {given}; "
            f"a block may make at most {MAX_NUMBERS:,} in all: use smaller dims",
            spec.location,
        )
    return count


def _filename(spec: CheckSpec) -> str:
    if spec.snippet.origin == "module":
        return ""
    return f"<snippet {spec.snippet.location.path}:{spec.snippet.location.line}>"


Singles = dict[int, tuple[Array, Array]]
"""The float32 arrays a plan's float64 ones were made from, by the float64 one's ``id``
(the float64 one kept with it, so that the id cannot be another array's)."""


def _round32(arrays: Mapping[str, Array], singles: Singles) -> dict[str, Array]:
    """The oracle sees exactly the float32 values the code sees, so rounding is not error.
    Each float32 array is kept in ``singles``: the code is sent it, not a second cast."""
    rounded = {}
    for name, value in arrays.items():
        single = np.asarray(value, dtype=np.float32)
        rounded[name] = single.astype(np.float64)
        singles[id(rounded[name])] = (rounded[name], single)
    return rounded


def _single(value: Array, singles: Singles) -> Array:
    """``value.astype(np.float32)``: the float32 array it was made from, when it was."""
    found = singles.get(id(value))
    if found is not None and found[0] is value:
        return found[1]
    single: Array = value.astype(np.float32)
    return single


def _keep_mask(
    spec: CheckSpec, oracle: Oracle, sizes: Mapping[str, int], rng: np.random.Generator
) -> Array | None:
    if spec.mask == "none":
        return None
    if oracle.mask_dims is None:
        raise SpecError(f"oracle {oracle.name!r} takes no mask (mask={spec.mask!r})", spec.location)
    m = sizes.get("m", sizes.get("n", 1))
    return masks.keep_mask(spec.mask, sizes["b"], sizes["n"], m, rng)


def _snippet_mask(spec: CheckSpec, oracle: Oracle, keep: Array) -> Array:
    """The mask as the code takes it: the block's ``mask_dims`` and ``mask_convention``."""
    assert oracle.mask_dims is not None  # _keep_mask made no mask otherwise
    given = spec.params.get("mask_dims")
    convention = str(spec.mask_convention)
    try:
        if isinstance(given, str):
            dims = tuple(given.split())
        else:
            dims = masks.default_dims(keep, convention, oracle.mask_dims)
        return masks.snippet_mask(keep, convention, dims, oracle.mask_dims)
    except SpecError as exc:
        raise SpecError(exc.message, spec.location) from None


def _timing_variants(spec: CheckSpec) -> list[tuple[str, dict[str, int], bool]]:
    """The timing runs at sizes of their own: ``(label, dims, eager only)``."""
    variants: list[tuple[str, dict[str, int], bool]] = []
    if spec.timing.dims:
        variants.append(("timing", dict(spec.timing.dims), False))
    for size in spec.sweep:
        dims = {**spec.dims, **spec.timing.dims, spec.sweep_dim: size}
        variants.append((f"sweep {spec.sweep_dim}={size}", dims, True))
    return variants


def _timing_runs(
    spec: CheckSpec,
    oracle: Oracle,
    params: Mapping[str, Any],
    sizes: Mapping[str, int],
    *,
    has_mask: bool,
) -> tuple[TimingRequest, dict[str, Array]]:
    runs: list[TimingRun] = []
    arrays: dict[str, Array] = {}
    if not spec.timing.dims:  # the check itself, on its own arrays
        init = resolve_init(spec.init, sizes)
        runs.append(
            TimingRun("check", "", init, call_plans(spec, oracle, sizes, has_mask=has_mask))
        )
    for index, (label, dims, eager_only) in enumerate(_timing_variants(spec)):
        run, made = _timing_variant(spec, oracle, params, index, dims)
        runs.append(dataclasses.replace(run, label=label, eager_only=eager_only))
        arrays.update(made)
    return TimingRequest(tuple(runs), spec.timing.warmup, spec.timing.repeats), arrays


def _timing_variant(
    spec: CheckSpec, oracle: Oracle, params: Mapping[str, Any], index: int, dims: Mapping[str, int]
) -> tuple[TimingRun, dict[str, Array]]:
    """The run at ``dims`` (labelled by the caller), and its arrays, seeded by its place."""
    sizes = oracle.resolve_dims(dims, params)
    rng = np.random.default_rng(spec.seed + 1 + index)
    prefix = f"t{index}/"
    made = {
        **{f"in/{k}": v for k, v in oracle.make_inputs(sizes, rng, params).items()},
        **{f"wt/{k}": v for k, v in oracle.make_weights(sizes, rng).items()},
    }
    keep = _keep_mask(spec, oracle, sizes, rng)
    if keep is not None:
        made["in/mask"] = _snippet_mask(spec, oracle, keep)
    arrays = {
        prefix + k: np.asarray(v).astype(np.float32) if np.asarray(v).dtype.kind == "f" else v
        for k, v in made.items()
    }
    run = TimingRun(
        "",
        prefix,
        resolve_init(spec.init, sizes),
        call_plans(spec, oracle, sizes, has_mask=keep is not None),
        size=sizes.get(spec.sweep_dim, 0),
    )
    return run, arrays
