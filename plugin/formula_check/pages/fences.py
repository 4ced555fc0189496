"""Formula fence headers and page defaults -> validated option values (pure: no files, no TF).

A header is the text after ```` ```formula ````: ``key="value"`` pairs (single quotes or a
bare value without spaces also work). :data:`BLOCK_OPTIONS` defines every option: the
validator of :mod:`..planning.option_values` that reads its text, and the example and meaning
the docs show. :func:`parse_options` adds the option name and the page:line to a validator's
message, once.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from formula_check.errors import SpecError
from formula_check.model import MASK_CONVENTIONS, Location
from formula_check.planning.option_values import (
    Validator,
    assignments,
    block_id,
    boolean,
    call_words,
    card_sections,
    choice,
    did_you_mean,
    formula_mode,
    heatmaps,
    init_arguments,
    mask_dims,
    name,
    number,
    oracle_name,
    preset,
    regime_names,
    returns,
    seed,
    sizes,
    sweep,
    text,
    timeout,
    timing,
    weight_map,
)
from formula_check.planning.presets import PRESETS

_PAIR = re.compile(r"""([A-Za-z_][\w-]*)=(?:"([^"]*)"|'([^']*)'|([^\s"'=]+))(?=\s|$)""")


def parse_header(text: str, where: Location) -> dict[str, str]:
    """``id="sdpa" oracle='attention' seed=3`` -> ``{"id": "sdpa", ...}`` (values still text)."""
    values: dict[str, str] = {}
    position = 0
    while True:
        while position < len(text) and text[position].isspace():
            position += 1
        if position >= len(text):
            return values
        match = _PAIR.match(text, position)
        if match is None:
            rest = text[position:]
            raise SpecError(
                f'malformed formula header near {rest[:40]!r}: write options as key="value"',
                where,
            )
        key = match.group(1)
        if key in values:
            raise SpecError(f"option {key!r} is given twice", where)
        values[key] = next(g for g in match.groups()[1:] if g is not None)
        position = match.end()


@dataclass(frozen=True)
class BlockOption:
    """One option of a formula header: how its text is read, and how the docs present it.

    ``example`` is a value as a header writes it (``name="example"``); ``meaning`` is
    Markdown for the options table of ``docs/authoring.md``, whose links are relative to that
    page."""

    name: str
    read: Validator
    example: str
    meaning: str


BLOCK_OPTIONS: tuple[BlockOption, ...] = (
    BlockOption(
        "id",
        block_id,
        "sdpa",
        "Name of the block in logs, in the report and as the card's anchor "
        "([`#fc-sdpa`](guide/attention.md#fc-sdpa), which MkDocs' anchor validation checks "
        "like any other). Unique per page. Default: the page name and the block's position, "
        "such as `authoring-3`.",
    ),
    BlockOption(
        "oracle",
        oracle_name,
        "attention",
        "The reference formula to compare with. See [Oracles](oracles.md).",
    ),
    BlockOption(
        "code",
        text,
        "docs/snippets/attention.py:scaled_dot_product_attention",
        "Take the code from a project file, or from a module "
        '(`code="my_model.layers:FeedForward"`), instead of the next `python` fence.',
    ),
    BlockOption(
        "entry",
        name,
        "MultiHeadAttention",
        "The function or class to call. Default: the last function or class the snippet defines.",
    ),
    BlockOption(
        "kind",
        choice("auto", "function", "layer", "factory", "builder"),
        "layer",
        "How to call the entry: `function`, `layer`, `factory`, `builder`, or `auto` (the "
        "default; see [below](#how-your-code-is-called)).",
    ),
    BlockOption(
        "dims",
        sizes,
        "b=2 n=5 m=7 d_k=16 d_v=12",
        "Sizes of the named dimensions of the test tensors. Unnamed ones keep the oracle's "
        "defaults.",
    ),
    BlockOption(
        "mask",
        choice("none", "padding", "causal", "both"),
        "causal",
        "Pass an attention mask: `none`, `padding`, `causal` or `both`.",
    ),
    BlockOption(
        "mask_convention",
        choice(*MASK_CONVENTIONS),
        "keep",
        "How the mask is encoded: `additive` (default), `keep`, `keep-float`, `neg-inf`, "
        "`neg-large` or `lengths` (valid lengths). See [Masks](#masks).",
    ),
    BlockOption(
        "init",
        init_arguments,
        "d_model=d_model num_heads=h",
        "Constructor arguments for a layer or factory. A value that names a dimension becomes"
        " that dimension's size; `true`, `false` and `none` are Python's, and `[1, 2]` and "
        "`(1, 2)` a list and a tuple.",
    ),
    BlockOption(
        "weights",
        weight_map,
        "W_q=wq.kernel b_q=wq.bias",
        "Where a layer keeps each of the oracle's weights. See [Weight maps](#weight-maps).",
    ),
    BlockOption(
        "call",
        call_words,
        "q v key=k attention_mask=mask",
        "Call the entry with these arguments instead of the oracle's order. See [Calling "
        "differently](#calling-differently).",
    ),
    BlockOption(
        "returns",
        returns,
        "output _",
        "Names of the returned values, in order; `_` skips one; `weights=attention_weights` "
        "reads an output the layer keeps on an attribute. See [What is "
        "compared](#what-is-compared).",
    ),
    BlockOption(
        "params",
        assignments,
        "epsilon=1e-3",
        "Scalar parameters of the oracle, such as `variant=self`, `norm=pre`, `axis=1` or "
        "`base=1000`.",
    ),
    BlockOption(
        "atol",
        number,
        "1e-4",
        "Absolute tolerance, in place of the one derived from float32 rounding (see "
        "[Verdicts](verdicts.md#how-the-tolerance-is-derived)); the other of the two is then "
        "`1e-5`.",
    ),
    BlockOption("rtol", number, "1e-4", "Relative tolerance, likewise."),
    BlockOption(
        "seed",
        seed,
        "3",
        "Seed of the generated inputs, weights and masks, and of TensorFlow's own random "
        "state (default `0`).",
    ),
    BlockOption(
        "timeout",
        timeout,
        "5",
        "Seconds the snippet may run (default: the plugin's `timeout`).",
    ),
    BlockOption(
        "expect",
        choice("verified", "mismatch", "error", "timeout", "fail"),
        "mismatch",
        "The block is wrong on purpose: `verified`, `mismatch`, `error`, `timeout`, or `fail`"
        " (any of the three failures). See [Expected "
        "failures](verdicts.md#expected-failures).",
    ),
    BlockOption(
        "perturb",
        boolean,
        "false",
        "Whether a layer's weights are moved away from their initial values before the check "
        "(default `true`).",
    ),
    BlockOption(
        "timing",
        timing,
        "repeats=7 warmup=2",
        "Time the snippet (default: on, 1 untimed warm-up run, then 3 to 5 timed runs: a 4th "
        "and a 5th only while the runs so far disagree, their spread more than 5 % of their "
        "median, and add up to less than a quarter of a second; `repeats=N` is exactly N runs; "
        "the card shows the median and spread of the runs made, and their count), eagerly and "
        "under `tf.function` (whose first call, the trace, is timed on its own, before its "
        "warm-up); `off` skips it. Under `tf.function`, AutoGraph converts the snippet's"
        " `if` and `for` on tensors, as it would in your own module; code that cannot be "
        "traced (say, it calls `.numpy()`) keeps its eager timing and the card says why. The "
        "plugin option `timing: false` (or `--no-timing`) turns timing off for the whole "
        "site, whatever a block says.",
    ),
    BlockOption(
        "timing_dims",
        sizes,
        "n=512 d_model=512",
        "Time at these sizes instead of the small check sizes.",
    ),
    BlockOption(
        "heatmaps",
        heatmaps,
        "weights hidden",
        "Which value heatmaps to draw: `weights`, `output`, `hidden`, or `none`. Default: the"
        " oracle's choice.",
    ),
    BlockOption(
        "open",
        card_sections,
        "heatmaps",
        "Card sections drawn open, for prose that speaks of them: `heatmaps`, `scaling`, "
        "`shapes`, `timings`, `printed`, or `all`. Default: all closed.",
    ),
    BlockOption(
        "sweep",
        sweep,
        "64 128 256 512",
        "Also time the code at each of these sizes and plot time against size (not when "
        "timing is off).",
    ),
    BlockOption("sweep_dim", name, "n", "The dimension the sweep varies (default `n`)."),
    BlockOption(
        "regimes",
        regime_names,
        "none",
        "Which of the oracle's [input regimes](verdicts.md#traps-the-inputs-are-built-to-catch)"
        " the block is also checked on, by name, separated by commas (`large values`), or "
        "`none` for its standard inputs only. Default: all of them. The card says the choice.",
    ),
    BlockOption(
        "preset",
        preset,
        "keras-mha",
        "Settings for checking one of Keras' own layers: `keras-mha`, `keras-layer-norm`, "
        "`keras-dense`. On a layer that holds that layer in an attribute, the preset's weight "
        "map applies under it, found when exactly one sub-layer has its weights; "
        "`keras-mha@mha` names it. Published layers built of Keras' own have theirs: "
        "`tf-tutorial-attention`, `tf-tutorial-encoder-layer`, `tf-tutorial-decoder-layer`, "
        "`tf-tutorial-positional-embedding`, `keras-example-transformer-block`, "
        "`keras-example-token-position-embedding` (see [Oracles](oracles.md)).",
    ),
    BlockOption(
        "mask_dims",
        mask_dims,
        "b 1 n m",
        "The axes of the mask as the code takes it: the oracle's batch, query and key axes "
        "(any of them, in any order) plus literal `1`s for broadcast axes, such as `b 1 m` or "
        "`n m`; for valid lengths `b` or `b n`. An axis left out must be one the mask does "
        "not vary along. Default: the oracle's mask shape. See [Masks](#masks).",
    ),
    BlockOption(
        "symbols",
        text,
        "A: [b, n, d_k] = q",
        "Declare the names the formula uses, when they differ from the oracle's. See [The "
        "formula as written](#the-formula-as-written).",
    ),
    BlockOption(
        "formula",
        formula_mode,
        "required",
        "Compile and compare the LaTeX itself (default: the plugin's `formula`, `on`); `off` "
        "checks only the code; `required` fails the block when its formula cannot be checked "
        "(see [Formulas that are not checked](#formulas-that-are-not-checked)).",
    ),
    BlockOption(
        "skip",
        text,
        "needs a GPU",
        "Do not run the block; its card shows the reason and the status `skipped`.",
    ),
)
"""Every option a formula header (or a page's ``formula_check:`` front matter) may set, in
the order the docs list them."""

OPTIONS: Mapping[str, Validator] = {option.name: option.read for option in BLOCK_OPTIONS}
"""Each option's validator, by name."""


def parse_options(raw: Mapping[str, str], where: Location) -> dict[str, Any]:
    """Validate every option; the problems, all of them, become one :class:`SpecError` at
    ``where`` (fixing one typo at a time, a build per typo, would be tedious)."""
    parsed: dict[str, Any] = {}
    problems: list[str] = []
    for key, value in raw.items():
        validator = OPTIONS.get(key)
        if validator is None:
            problems.append(f"unknown option {key!r}{did_you_mean(key, OPTIONS)}")
            continue
        try:
            parsed[key] = validator(value)
        except ValueError as exc:
            problems.append(f"option {key}={value!r}: {exc}")
    problems += _contradictions(parsed)
    if problems:
        raise SpecError("; ".join(problems), where)
    return parsed


def _contradictions(parsed: Mapping[str, Any]) -> list[str]:
    """Values of one header (or one page's defaults) that another of them would leave
    without effect: each stated value takes effect or is an error, never ignored."""
    problems = []
    timing = parsed.get("timing")
    if timing is not None and not timing[0]:
        problems += [
            f"{key}= cannot take effect: this block's timing is off"
            for key in ("timing_dims", "sweep")
            if key in parsed
        ]
    if parsed.get("mask") == "none":
        problems += [
            f"{key}= cannot take effect: mask is none"
            for key in ("mask_convention", "mask_dims")
            if key in parsed
        ]
    problems += _overridden_by_preset(parsed)
    return problems


_PRESET_FILLS = {"kind": "auto", "mask_convention": "additive"}
"""A block's value of these that a preset takes for "not given", and fills in."""


def _overridden_by_preset(parsed: Mapping[str, Any]) -> list[str]:
    """A value a preset would fill over, though the header states it (``kind="auto"`` with
    ``preset="keras-mha"``, whose kind is ``layer``)."""
    name = str(parsed.get("preset", "")).partition("@")[0]
    preset = PRESETS.get(name, {})
    return [
        f"{key}={parsed[key]!r} cannot take effect: preset {name} sets {key}={preset[key]!r}; "
        f"leave {key}= out, or drop the preset"
        for key, unset in _PRESET_FILLS.items()
        if parsed.get(key) == unset and key in preset and preset[key] != unset
    ]


def _yaml_text(value: object) -> str:
    # Front matter is YAML: `timing: off` arrives as False and `dims: {b: 2}` as a mapping.
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, Mapping):
        return " ".join(f"{k}={_yaml_text(v)}" for k, v in value.items())
    if isinstance(value, list | tuple):
        return " ".join(_yaml_text(v) for v in value)
    return str(value)


def page_defaults(meta: Mapping[str, Any] | None, where: Location) -> dict[str, str]:
    """The ``formula_check:`` mapping of a page's front matter, as header-style text values."""
    section = (meta or {}).get("formula_check")
    if section is None:
        return {}
    if not isinstance(section, Mapping):
        raise SpecError("front matter 'formula_check' must be a mapping of block options", where)
    if "id" in section:
        raise SpecError("front matter 'formula_check' cannot set 'id' (ids are per block)", where)
    return {str(key): _yaml_text(value) for key, value in section.items()}
