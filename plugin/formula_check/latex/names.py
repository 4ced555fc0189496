"""Written names -> declared names: canonical spelling, and splitting runs like ``QK``.

A run of italic letters is a product of declared names; it must split in exactly one way.
A subscript or superscript belongs to the last name of the run (``QW_i^Q`` is ``Q`` times
``W_i^Q``), unless the superscript is a transpose or a power.
"""

from __future__ import annotations

from collections.abc import Collection, Iterator
from dataclasses import dataclass

from formula_check.latex.nodes import Expr, Num, Script, Word

TRANSPOSE_MARKS = frozenset({"T", "⊤"})


def script_text(node: Expr | None) -> str | None:
    r"""``k`` for ``_k``, ``model`` for ``_{\text{model}}``, ``1`` for ``_1``; else None."""
    if isinstance(node, Word):
        return node.text
    if isinstance(node, Num) and node.value.is_integer():
        return str(int(node.value))
    return None


def spell(base: str, sub: str | None, sup: str | None) -> str:
    """The canonical spelling: ``W_i^Q``, ``d_model``, ``W^O``."""
    return base + (f"_{sub}" if sub else "") + (f"^{sup}" if sup else "")


def as_written(base: str, sub: str | None, sup: str | None, *, upright: bool = False) -> str:
    r"""A name as LaTeX writes it, for messages: ``\alpha_{ij}``, ``W_1``, ``\text{head}_i``
    (the canonical spelling, ``\alpha_ij``, is no name a reader wrote)."""

    def script(mark: str, text: str | None) -> str:
        if not text:
            return ""
        return f"{mark}{text}" if len(text) == 1 else f"{mark}{{{text}}}"

    shown = f"\\text{{{base}}}" if upright else base
    return shown + script("_", sub) + script("^", sup)


def canonical_name(node: Expr) -> str | None:
    """The canonical spelling of a single written name, or None if ``node`` is not one."""
    if isinstance(node, Word):
        return node.text
    if isinstance(node, Script) and isinstance(node.base, Word):
        sub, sup = script_text(node.sub), script_text(node.sup)
        if (node.sub is None or sub) and (node.sup is None or sup):
            return spell(node.base.text, sub, sup)
    return None


@dataclass(frozen=True)
class Reading:
    """One way to read a written run: declared names left to right, then what ``^`` meant."""

    names: tuple[str, ...]
    transpose: bool = False
    power: bool = False


def splits(text: str, names: Collection[str]) -> Iterator[tuple[str, ...]]:
    """Every way of writing ``text`` as a sequence of ``names``."""
    if not text:
        yield ()
        return
    for end in range(1, len(text) + 1):
        if text[:end] in names:
            for rest in splits(text[end:], names):
                yield (text[:end], *rest)


def readings(
    word: Word, sub: Expr | None, sup: Expr | None, names: Collection[str]
) -> list[Reading]:
    """Every reading of ``word_sub^sup`` as declared names (upright words are never split)."""
    sub_text, sup_text = script_text(sub), script_text(sup)
    if sub is not None and sub_text is None:
        return []
    starts = [0] if word.upright else range(len(word.text))
    found: list[Reading] = []
    for start in starts:
        last = word.text[start:]
        for head in splits(word.text[:start], () if word.upright else names):
            found += _last_readings(head, last, sub_text, sup, sup_text, names)
    return found


def _last_readings(
    head: tuple[str, ...],
    last: str,
    sub: str | None,
    sup: Expr | None,
    sup_text: str | None,
    names: Collection[str],
) -> list[Reading]:
    found = []
    if sup is None or sup_text is not None:
        full = spell(last, sub, sup_text)
        if full in names:
            found.append(Reading((*head, full)))
    if sup is not None and spell(last, sub, None) in names:
        transpose = sup_text in TRANSPOSE_MARKS
        found.append(Reading((*head, spell(last, sub, None)), transpose, not transpose))
    return found


def stuck_at(text: str, names: Collection[str]) -> int:
    """How far ``text`` can be read as declared names: the offset of the first unknown letter."""
    reachable = {0}
    for start in range(len(text)):
        if start in reachable:
            reachable |= {
                end for end in range(start + 1, len(text) + 1) if text[start:end] in names
            }
    return max(reachable)
