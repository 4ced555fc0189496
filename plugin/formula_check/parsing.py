"""Formula fence headers and page defaults -> validated option values (pure: no files, no TF).

A header is the text after ```` ```formula ````: ``key="value"`` pairs (single quotes or a
bare value without spaces also work). Each option has one small validator that turns its
text into a typed value or raises :class:`ValueError` with a message that says what would
have been accepted; :func:`parse_options` adds the option name and the page:line, once.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from .errors import FormulaCheckError, SpecError
from .model import VALUE_HEATMAPS, Location, Scalar, TimingSpec
from .oracles import all_oracles, get_oracle
from .presets import PRESETS

Validator = Callable[[str], Any]

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_BLOCK_ID = re.compile(r"[^\W_][\w.-]*")  # any script's letters: ids may be Chinese
_WEIGHT_PATH = re.compile(r"[A-Za-z_]\w*(?:\[-?\d+\])*(?:\.[A-Za-z_]\w*(?:\[-?\d+\])*)*")
_PAIR = re.compile(r"""([A-Za-z_][\w-]*)=(?:"([^"]*)"|'([^']*)'|([^\s"'=]+))(?=\s|$)""")
_TRUE = frozenset({"true", "yes", "on", "1"})
_FALSE = frozenset({"false", "no", "off", "0"})
_EMPTY = frozenset({"none", "off", "-"})


def did_you_mean(word: str, candidates: Iterable[str]) -> str:
    """``; did you mean 'oracle'?`` for a near miss, else an empty string."""
    close = difflib.get_close_matches(word, list(candidates), n=1, cutoff=0.6)
    return f"; did you mean {close[0]!r}?" if close else ""


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


# -- small validators: text -> value, or ValueError saying what is accepted ----------------


def name(value: str) -> str:
    """A Python-style identifier (entry points, dim names)."""
    if not _NAME.fullmatch(value):
        raise ValueError("expected a name such as 'scaled_dot_product_attention'")
    return value


def block_id(value: str) -> str:
    """A block id: letters (any script), digits, ``_ . -``; the card's HTML id is ``fc-<id>``."""
    if not _BLOCK_ID.fullmatch(value):
        raise ValueError(
            "expected letters, digits, '_', '.' or '-', starting with a letter or digit"
        )
    return value


def text(value: str) -> str:
    """Any non-empty text."""
    if not value.strip():
        raise ValueError("expected a value, got nothing")
    return value.strip()


def integer(value: str, minimum: int = 0, maximum: int | None = None) -> int:
    """A whole number not below ``minimum`` (nor above ``maximum``, when given)."""
    try:
        number = int(value)
    except ValueError:
        raise ValueError("expected a whole number") from None
    if maximum is not None and not minimum <= number <= maximum:
        raise ValueError(f"expected a whole number from {minimum} to {maximum}")
    if number < minimum:
        raise ValueError(f"expected a whole number >= {minimum}")
    return number


SEED_LIMIT = 2**32 - 1
"""The largest seed: the check seeds TensorFlow, whose ``set_random_seed`` takes 32 bits."""


def seed(value: str) -> int:
    """A random seed TensorFlow accepts: a whole number from 0 to 2**32 - 1."""
    return integer(value, maximum=SEED_LIMIT)


def number(value: str, *, positive: bool = False) -> float:
    """A finite non-negative float (``1e-5``); ``positive`` also refuses zero."""
    try:
        result = float(value)
    except ValueError:
        raise ValueError("expected a number such as 1e-5") from None
    if not result >= 0 or result == float("inf") or (positive and result == 0):
        raise ValueError("expected a positive number" if positive else "expected a number >= 0")
    return result


def boolean(value: str) -> bool:
    """``true``/``false`` (also yes/no, on/off, 1/0)."""
    lowered = value.strip().lower()
    if lowered in _TRUE:
        return True
    if lowered in _FALSE:
        return False
    raise ValueError("expected true or false")


def choice(*allowed: str) -> Validator:
    """A validator accepting exactly one of ``allowed``."""

    def validate(value: str) -> str:
        if value not in allowed:
            hint = did_you_mean(value, allowed)
            raise ValueError(f"expected one of {', '.join(allowed)}{hint}")
        return value

    return validate


def scalar(value: str) -> Scalar:
    """``4`` -> 4, ``0.1`` -> 0.1, ``true`` -> True; anything else stays text (e.g. a dim name)."""
    lowered = value.lower()
    if lowered in {"true", "false"}:
        return lowered == "true"
    for kind in (int, float):
        try:
            return kind(value)
        except ValueError:
            pass
    return value


def _pairs(value: str) -> list[tuple[str, str]]:
    pairs = []
    for token in value.replace(",", " ").split():
        key, sep, item = token.partition("=")
        if not sep or not _NAME.fullmatch(key) or not item:
            raise ValueError(f"expected name=value pairs separated by spaces, got {token!r}")
        pairs.append((key, item))
    keys = [key for key, _ in pairs]
    repeated = sorted({key for key in keys if keys.count(key) > 1})
    if repeated:
        raise ValueError(f"{', '.join(repeated)} given twice")
    return pairs


def sizes(value: str) -> dict[str, int]:
    """``b=2 n=5`` -> ``{"b": 2, "n": 5}``; every size a positive whole number."""
    result = {}
    for key, item in _pairs(value):
        try:
            result[key] = integer(item, minimum=1)
        except ValueError:
            raise ValueError(
                f"size of {key} must be a positive whole number, got {item!r}"
            ) from None
    return result


def assignments(value: str) -> dict[str, Scalar]:
    """``d_model=d_model num_heads=4 use_bias=false`` -> typed constructor/oracle arguments."""
    return {key: scalar(item) for key, item in _pairs(value)}


def weight_map(value: str) -> dict[str, str]:
    """``W_q=wq.kernel b_q=wq.bias`` -> oracle weight name -> attribute path on the layer."""
    result = {}
    for key, path in _pairs(value):
        if not _WEIGHT_PATH.fullmatch(path):
            raise ValueError(f"weight path {path!r} must look like 'wq.kernel' or 'layers[0].bias'")
        result[key] = path
    return result


def words(value: str) -> tuple[str, ...]:
    """``q k v mask=mask`` -> ``("q", "k", "v", "mask=mask")``."""
    tokens = tuple(value.split())
    if not tokens:
        raise ValueError("expected at least one word")
    return tokens


def returns(value: str) -> tuple[str, ...]:
    """``output weights`` -> names of what the code returns, in order; ``_`` skips one."""
    tokens = words(value)
    for word in tokens:
        if word != "_" and not _NAME.fullmatch(word):
            raise ValueError(f"{word!r} is not an output name (use '_' to skip a value)")
    return tokens


def heatmaps(value: str) -> tuple[str, ...]:
    """``weights hidden`` -> which value heatmaps to draw; ``none`` -> none at all."""
    if value.strip().lower() in _EMPTY:
        return ()
    tokens = words(value)
    for token in tokens:
        if token not in VALUE_HEATMAPS:
            hint = did_you_mean(token, VALUE_HEATMAPS)
            raise ValueError(
                f"unknown heatmap {token!r}{hint} (known: {', '.join(VALUE_HEATMAPS)})"
            )
    return tokens


def sweep(value: str) -> tuple[int, ...]:
    """``64 128 256`` -> sizes to time the code at (a scaling plot)."""
    try:
        return tuple(integer(token, minimum=1) for token in value.replace(",", " ").split())
    except ValueError:
        raise ValueError("expected positive whole numbers separated by spaces") from None


def timing(value: str) -> tuple[bool, int, int]:
    """``off`` / ``on`` / ``repeats=7 warmup=2`` -> (enabled, warmup, repeats)."""
    lowered = value.strip().lower()
    if lowered in _TRUE | _FALSE:
        return boolean(lowered), TimingSpec.warmup, TimingSpec.repeats
    settings = {"warmup": TimingSpec.warmup, "repeats": TimingSpec.repeats}
    for key, item in _pairs(value):
        if key not in settings:
            raise ValueError(f"unknown timing setting {key!r}; use repeats=N warmup=N or off")
        settings[key] = integer(item, minimum=1 if key == "repeats" else 0)
    return True, settings["warmup"], settings["repeats"]


def oracle_name(value: str) -> str:
    """A registered oracle (builtin or loaded from the ``oracles`` setting)."""
    try:
        get_oracle(value)
    except FormulaCheckError:
        known = sorted(o.name for o in all_oracles())
        raise ValueError(
            f"unknown oracle {value!r}{did_you_mean(value, known)} (known: {', '.join(known)})"
        ) from None
    return value


def mask_dims(value: str) -> str:
    """``b 1 n m``: the mask's axes as the code expects them (three names, plus literal 1s)."""
    parts = value.split()
    named = [p for p in parts if not p.isdigit()]
    if len(named) != 3 or any(p.isdigit() and p != "1" for p in parts):
        raise ValueError(
            "expected three axis names (batch, query, key) and optional 1s, e.g. 'b 1 n m'"
        )
    return " ".join(parts)


OPTIONS: Mapping[str, Validator] = {
    "id": block_id,
    "oracle": oracle_name,
    "code": text,
    "entry": name,
    "kind": choice("auto", "function", "layer", "factory"),
    "dims": sizes,
    "mask": choice("none", "padding", "causal", "both"),
    "mask_convention": choice("additive", "keep", "keep-float"),
    "init": assignments,
    "weights": weight_map,
    "call": words,
    "returns": returns,
    "params": assignments,
    "atol": number,
    "rtol": number,
    "seed": seed,
    "timeout": lambda value: number(value, positive=True),
    "expect": choice("verified", "mismatch", "error", "timeout", "fail"),
    "perturb": boolean,
    "timing": timing,
    "timing_dims": sizes,
    "heatmaps": heatmaps,
    "sweep": sweep,
    "sweep_dim": name,
    "preset": choice(*sorted(PRESETS)),
    "skip": text,
    "symbols": text,
    "formula": boolean,
    "mask_dims": mask_dims,
}
"""Every option a formula header (or a page's ``formula_check:`` front matter) may set."""


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
    if problems:
        raise SpecError("; ".join(problems), where)
    return parsed


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
