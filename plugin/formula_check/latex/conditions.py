r"""A trailing side condition: ``y_i = … \quad \forall i``, ``… \text{for all } i``, a
range ``\quad (i = 1, \dots, n)`` or a note ``\quad \text{(row-wise)}``.

Papers end an equation with the range it holds over. The condition states nothing the
compiled function computes (index notation already runs over every ``i``), so it is set
aside, and the compiled form names it, so that a reader of the card sees what was not read.
Only a condition at the top level, after the equation, is set aside: ``\forall`` anywhere
else stays in the formula, where the parser says it is outside the executable subset.
"""

from __future__ import annotations

from formula_check.latex.breaks import CLOSING, OPENERS
from formula_check.latex.lexer import Token

QUANTIFIERS = frozenset({"forall"})
FOR_WORDS = frozenset({"for", "for all", "for each", "for every", "for any"})
r"""Upright words that open a condition (``\text{for all } i``)."""
LEADING = frozenset({",", ";"})
"""Punctuation before a condition, set aside with it."""
RELATIONS = frozenset({"=", "<", ">", "le", "leq", "ge", "geq", "lt", "gt", "in", "ne", "neq"})
r"""What a range after the equation states: ``(i = 1, \dots, n)``, ``(i \le n)``."""
DOTS = frozenset({"dots", "ldots", "cdots"})
ENDS = frozenset({",", ".", ";"})


def _opens_condition(tokens: list[Token], at: int) -> bool:
    r"""Whether ``tokens[at]`` opens a trailing condition or note: ``\forall``, ``\text{for
    all}``, upright text that is no word (``\text{(row-wise)}``), or, after a wide space, a
    parenthesis stating a range that closes the formula (``\quad (i = 1, \dots, n)``)."""
    token = tokens[at]
    if token.kind == "command":
        return token.text in QUANTIFIERS
    if token.kind == "note":  # the last thing written: a note inside the equation is refused
        return all(later.text in ENDS for later in tokens[at + 1 : -1])
    if token.kind == "text":
        return " ".join(token.text.lower().split()) in FOR_WORDS
    return _trailing_group(tokens, at)[0] == "range"


def _trailing_group(tokens: list[Token], at: int) -> tuple[str, int]:
    r"""What a parenthesis at ``at``, after a wide space and closing the formula, states: a
    ``range`` (``(i = 1, \dots, n)``, ``(i \le n)``), a ``definition`` (``(\sigma =
    \sqrt{\sigma^2 + \epsilon})``, a statement the formula uses), or nothing (``""``);
    and where it closes."""
    if tokens[at].text != "(" or tokens[at - 1].kind != "break":
        return "", at
    depth, said = 0, set[str]()
    for later, token in enumerate(tokens[at:], start=at):
        if token.kind == "symbol" and token.text in OPENERS:
            depth += 1
        elif token.kind == "symbol" and token.text in CLOSING:
            depth -= 1
            if depth == 0:
                if not all(t.text in ENDS for t in tokens[later + 1 : -1]) or not said & RELATIONS:
                    return "", later
                ranged = said & (RELATIONS - {"="}) or said & DOTS
                return ("range" if ranged else "definition"), later
        elif depth == 1 and token.kind in ("symbol", "command"):
            said.add(token.text)
    return "", at


def split_condition(tokens: list[Token], source: str) -> tuple[list[Token], str]:
    """``tokens`` without a trailing side condition (the ``end`` token kept), and the
    condition as written (empty when there is none). A trailing definition in parentheses
    loses them, and is a statement of its own."""
    depth = 0
    for at, token in enumerate(tokens):
        if depth == 0 and at > 0 and _opens_condition(tokens, at):
            return _cut(tokens, at, source)
        kind, close = _trailing_group(tokens, at) if depth == 0 and at > 0 else ("", at)
        if kind == "definition":
            return [*tokens[:at], *tokens[at + 1 : close], *tokens[close + 1 :]], ""
        if token.kind == "symbol" and token.text in OPENERS:
            depth += 1
        elif token.kind == "symbol" and token.text in CLOSING:
            depth = max(0, depth - 1)
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
