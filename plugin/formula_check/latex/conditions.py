r"""A trailing side condition: ``y_i = … \quad \forall i``, ``… \text{for all } i``.

Papers end an equation with the range it holds over. The condition states nothing the
compiled function computes (index notation already runs over every ``i``), so it is set
aside, and the compiled form names it, so that a reader of the card sees what was not read.
Only a condition at the top level, after the equation, is set aside: ``\forall`` anywhere
else stays in the formula, where the parser says it is outside the executable subset.
"""

from __future__ import annotations

from .breaks import CLOSING, OPENERS
from .lexer import Token

QUANTIFIERS = frozenset({"forall"})
FOR_WORDS = frozenset({"for", "for all", "for each", "for every", "for any"})
"""Upright words that open a condition (``\text{for all } i``)."""
LEADING = frozenset({",", ";"})
"""Punctuation before a condition, set aside with it."""


def _opens_condition(token: Token) -> bool:
    if token.kind == "command":
        return token.text in QUANTIFIERS
    return token.kind == "text" and " ".join(token.text.lower().split()) in FOR_WORDS


def split_condition(tokens: list[Token], source: str) -> tuple[list[Token], str]:
    """``tokens`` without a trailing side condition (the ``end`` token kept), and the
    condition as written (empty when there is none)."""
    depth = 0
    for at, token in enumerate(tokens):
        if token.kind == "symbol" and token.text in OPENERS:
            depth += 1
        elif token.kind == "symbol" and token.text in CLOSING:
            depth = max(0, depth - 1)
        elif depth == 0 and at > 0 and _opens_condition(token):
            return _cut(tokens, at, source)
    return tokens, ""


def _cut(tokens: list[Token], at: int, source: str) -> tuple[list[Token], str]:
    start = at
    while start > 0 and (
        tokens[start - 1].kind == "break"
        or (tokens[start - 1].kind == "symbol" and tokens[start - 1].text in LEADING)
    ):
        start -= 1
    last = tokens[-2]  # the token before ``end``
    written = " ".join(source[tokens[at].col : max(last.end, tokens[at].end)].split())
    return [*tokens[:start], tokens[-1]], written
