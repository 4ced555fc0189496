"""Option text -> typed values: one small validator per kind of value (pure: no files, no TF).

Each validator turns an option's text into a typed value or raises :class:`ValueError` with
a message that says what would have been accepted; :func:`..pages.fences.parse_options` adds the
option's name and the page:line, once. :data:`..pages.fences.OPTIONS` says which option reads
its text with which validator.
"""

from __future__ import annotations

import difflib
import re
import threading
from collections.abc import Callable, Iterable
from typing import Any

from formula_check.errors import FormulaCheckError
from formula_check.model import CARD_SECTIONS, VALUE_HEATMAPS, Scalar, TimingSpec
from formula_check.oracles import all_oracles, get_oracle
from formula_check.planning.presets import PRESETS

Validator = Callable[[str], Any]

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_WEIGHT_NAME = re.compile(r"[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*")
"""An oracle's weight: ``W_q``, or a composite's part's, ``attn.W_q``."""
_BLOCK_ID = re.compile(r"[^\W_][\w.-]*")  # any script's letters: ids may be Chinese
_WEIGHT_PATH = re.compile(r"[A-Za-z_]\w*(?:\[-?\d+\])*(?:\.[A-Za-z_]\w*(?:\[-?\d+\])*)*")
_TRUE = frozenset({"true", "yes", "on", "1"})
_FALSE = frozenset({"false", "no", "off", "0"})
_EMPTY = frozenset({"none", "off", "-"})


def did_you_mean(word: str, candidates: Iterable[str]) -> str:
    """``; did you mean 'oracle'?`` for a near miss, else an empty string."""
    close = difflib.get_close_matches(word, list(candidates), n=1, cutoff=0.6)
    return f"; did you mean {close[0]!r}?" if close else ""


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


LONGEST_WAIT = threading.TIMEOUT_MAX
"""The most seconds a snippet may be given (about 292 years): the longest wait Python's clocks
and locks take. A longer one overflows them where the check process waits for its answer."""


def timeout(value: str) -> float:
    """Seconds a snippet may run: a number more than 0 and at most :data:`LONGEST_WAIT`."""
    seconds = number(value, positive=True)
    if seconds > LONGEST_WAIT:
        raise ValueError(f"expected at most {LONGEST_WAIT:.3g} seconds, the longest wait there is")
    return seconds


def regime_names(value: str) -> tuple[str, ...]:
    """Input regimes by name, separated by commas (``large values``), each once; ``none``
    for the standard inputs only."""
    if value.strip().lower() in _EMPTY:
        return ()
    names = tuple(" ".join(part.split()) for part in value.split(","))
    if not all(names):
        raise ValueError("expected regime names separated by commas, or none")
    twice = sorted({name for name in names if names.count(name) > 1})
    if twice:
        raise ValueError(f"regime {twice[0]!r} is named twice")
    return names


def boolean(value: str) -> bool:
    """``true``/``false`` (also yes/no, on/off, 1/0)."""
    lowered = value.strip().lower()
    if lowered in _TRUE:
        return True
    if lowered in _FALSE:
        return False
    raise ValueError("expected true or false")


FORMULA_MODES = ("on", "off", "required")
"""How a block's formula is checked: compiled and compared (``on``); not at all (``off``);
compiled and compared, and the block fails when the formula cannot be (``required``)."""


def formula_mode(value: str) -> str:
    """``on``, ``off`` or ``required``; the words :func:`boolean` takes stand for on and off."""
    lowered = value.strip().lower()
    if lowered in FORMULA_MODES:
        return lowered
    try:
        return "on" if boolean(lowered) else "off"
    except ValueError:
        hint = did_you_mean(lowered, FORMULA_MODES)
        raise ValueError(f"expected one of {', '.join(FORMULA_MODES)}{hint}") from None


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


def _pairs(value: str, names: re.Pattern[str] = _NAME) -> list[tuple[str, str]]:
    pairs = []
    for token in value.replace(",", " ").split():
        key, sep, item = token.partition("=")
        if not sep or not names.fullmatch(key) or not item:
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


_OPENS = {"[": "]", "(": ")"}


def _init_tokens(value: str) -> list[str]:
    """``a=[1, 2] b=none`` -> ``["a=[1, 2]", "b=none"]``: spaces and commas separate pairs
    except inside brackets."""
    tokens: list[str] = []
    current, closing = "", ""
    for char in value:
        if closing:
            current += char
            closing = "" if char == closing else closing
        elif char in _OPENS:
            current, closing = current + char, _OPENS[char]
        elif char in " ,\t\n":
            tokens, current = [*tokens, current] if current else tokens, ""
        else:
            current += char
    if closing:
        raise ValueError(f"unclosed {'[' if closing == ']' else '('} in {value!r}")
    return [*tokens, current] if current else tokens


def init_value(item: str) -> Any:
    """A constructor argument: a scalar (see :func:`scalar`), ``none`` (None), or a list
    ``[1, 2]`` or tuple ``(1, 2)`` (``(3,)``: one item) of those, taken as written."""
    if item.lower() == "none":
        return None
    if item[:1] in _OPENS:
        if item[-1:] != _OPENS[item[0]]:
            raise ValueError(f"{item!r} must end with {_OPENS[item[0]]!r}")
        parts = [part.strip() for part in item[1:-1].split(",")]
        if parts and not parts[-1]:  # a trailing comma: (3,)
            parts.pop()
        if not all(parts) or any(part[:1] in _OPENS for part in parts):
            raise ValueError(f"{item!r}: a list or tuple of numbers, names, true/false or none")
        items = [None if part.lower() == "none" else scalar(part) for part in parts]
        return items if item[0] == "[" else tuple(items)
    return scalar(item)


def init_arguments(value: str) -> dict[str, Any]:
    """``d_model=d_model axis=[-1] rates=(0.1, 0.2) center=false dropout=none``: constructor
    keywords, each value as :func:`init_value` reads it."""
    arguments: dict[str, Any] = {}
    for token in _init_tokens(value):
        key, sep, item = token.partition("=")
        if not sep or not _NAME.fullmatch(key) or not item:
            raise ValueError(f"expected name=value pairs separated by spaces, got {token!r}")
        if key in arguments:
            raise ValueError(f"{key} given twice")
        arguments[key] = init_value(item)
    return arguments


def weight_map(value: str) -> dict[str, str]:
    """``W_q=wq.kernel b_q=wq.bias`` -> oracle weight name -> attribute path on the layer."""
    result = {}
    for key, path in _pairs(value, _WEIGHT_NAME):
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


_CALL_TOKEN = re.compile(r"[\[\]()]|[^\s\[\]()]+")
_CLOSING = {"[": "]", "(": ")"}


def call_words(value: str) -> tuple[str, ...]:
    """``x [memory lengths [none]] training=false`` -> its words, each bracket a word of its
    own: ``[...]`` passes a list, ``(...)`` a tuple, nested as deep as the code needs (a
    decoder's state list); ``key=[...]`` passes one by keyword."""
    tokens = tuple(_CALL_TOKEN.findall(value))
    if not tokens:
        raise ValueError("expected at least one word")
    open_: list[str] = []
    keywords: set[str] = set()
    for index, token in enumerate(tokens):
        upto = spoken_call(tokens[: index + 1])
        keyword, sep, _ = token.partition("=")
        if sep and not open_:  # a second value would drop the first without a word
            if keyword in keywords:
                raise ValueError(f"{keyword}= is given twice; Python passes a keyword once")
            keywords.add(keyword)
        if token in _CLOSING:
            open_.append(token)
        elif token in _CLOSING.values():
            if not open_:
                raise ValueError(f"{upto!r}: {token!r} closes nothing")
            if _CLOSING[open_[-1]] != token:
                raise ValueError(f"{upto!r}: {token!r} cannot close {open_[-1]!r}")
            open_.pop()
        elif token.endswith("=") and tokens[index + 1 : index + 2] not in (("[",), ("(",)):
            raise ValueError(f"{token!r} gives no value: write {token}name or {token}[...]")
    if open_:
        raise ValueError(f"{open_[-1]!r} is never closed: add {_CLOSING[open_[-1]]!r}")
    return tokens


def spoken_call(tokens: Iterable[str]) -> str:
    """The words of ``call=`` as a user writes them: ``x [memory lengths] training=false``."""
    text = ""
    for token in tokens:
        glued = not text or text[-1] in "[(=" or token in _CLOSING.values()
        text += token if glued else f" {token}"
    return text


def returns(value: str) -> tuple[str, ...]:
    """``output weights`` -> names of what the code returns, in order; ``_`` skips one;
    ``weights=attention_weights`` reads an output the layer keeps on an attribute instead."""
    tokens = words(value)
    for word in tokens:
        output, sep, path = word.partition("=")
        if sep:
            if not _NAME.fullmatch(output) or not _WEIGHT_PATH.fullmatch(path):
                raise ValueError(
                    f"{word!r}: write an output kept on the layer as name=attribute, such as "
                    "weights=attention_weights"
                )
        elif word != "_" and not _NAME.fullmatch(word):
            raise ValueError(f"{word!r} is not an output name (use '_' to skip a value)")
    returned = [w for w in tokens if "=" not in w]
    kept = [w.partition("=")[0] for w in tokens if "=" in w]
    if any("=" in word for word in tokens[: len(returned)]):
        raise ValueError("list the returned values first, then the outputs kept on the layer")
    names = [*returned, *kept]
    repeated = sorted({n for n in names if n != "_" and names.count(n) > 1})
    if repeated:
        raise ValueError(f"{', '.join(repeated)} named twice")
    return tokens


def preset(value: str) -> str:
    """``keras-mha``, or ``keras-mha@mha``: a preset, and where the layer it is for sits
    inside the block's own layer (an attribute path)."""
    name_part, sep, path = value.partition("@")
    if name_part not in PRESETS:
        known = sorted(PRESETS)
        raise ValueError(f"expected one of {', '.join(known)}{did_you_mean(name_part, known)}")
    if sep and not _WEIGHT_PATH.fullmatch(path):
        raise ValueError(f"{path!r} must be an attribute path such as 'mha' or 'block.attention'")
    return value


def card_sections(value: str) -> tuple[str, ...]:
    """``heatmaps shapes`` -> the card sections drawn open; ``all`` -> every one."""
    if value.strip().lower() in _EMPTY:
        return ()
    if value.strip().lower() == "all":
        return CARD_SECTIONS
    tokens = words(value)
    for token in tokens:
        if token not in CARD_SECTIONS:
            hint = did_you_mean(token, CARD_SECTIONS)
            raise ValueError(
                f"unknown card section {token!r}{hint} (known: {', '.join(CARD_SECTIONS)}, all)"
            )
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
    """``off`` / ``on`` / ``repeats=7 warmup=2`` -> (enabled, warmup, repeats); repeats ``0``
    when none is stated (as many as the time allows, see :class:`~..model.TimingSpec`)."""
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
    """``b 1 n m``: the mask's axes as the code takes them: one to three of the oracle's mask
    axes (batch, query, key; which ones is checked when the block is planned), plus literal
    1s for broadcast axes."""
    parts = value.split()
    named = [p for p in parts if not p.isdigit()]
    if not 1 <= len(named) <= 3 or any(p.isdigit() and p != "1" for p in parts):
        raise ValueError(
            "expected the mask's axis names (batch, query, key: up to three) and optional 1s, "
            "e.g. 'b 1 n m', 'b 1 m' or 'b'"
        )
    if any(not _NAME.fullmatch(p) for p in named):
        raise ValueError("expected axis names such as 'b n m', and 1s")
    return " ".join(parts)
