r"""Where a statement ends when nothing but space separates two: ``\quad``, a line break.

Books set equations side by side (``A = … \qquad B = …``) or one a line, with no comma.
The lexer turns a wide space and a line break into a ``break`` token; this module keeps a
break, as a separator, only where it stands between two statements, and drops it elsewhere,
where it is only space (``\text{softmax}(x) \quad V`` is one product).
"""

from __future__ import annotations

from formula_check.latex.lexer import Token

SEPARATOR_WORDS = frozenset({"where", "and", "with"})
OPENERS = frozenset({"(", "[", "{", "\\{"})
CLOSING = frozenset({")", "]", "}", "\\}"})
STOPS = frozenset({",", ";", "\\\\"})


def statement_breaks(tokens: list[Token]) -> list[Token]:
    r"""``tokens`` without the breaks that are only space. A break outside every group stays,
    as a separator, after a shape (``Q \in \mathbb{R}^{n \times d} \qquad …``), and between
    two equations side by side: the statement before it and the one after it (up to the next
    separator) each hold an ``=``."""
    kept: list[Token] = []
    depth = 0
    has_equals = has_shape = False  # the statement so far
    pending: tuple[int, Token] | None = None  # a break, and where it would go
    equals_after = False

    def settle() -> None:
        nonlocal pending
        if pending is not None and equals_after:
            kept.insert(*pending)
        pending = None

    for at, token in enumerate(tokens):
        top = depth == 0
        if token.kind == "break":
            if top:
                settle()
                if has_shape:
                    kept.append(token)
                    has_equals = has_shape = False
                pending, equals_after = ((len(kept), token), False) if has_equals else (None, False)
            continue
        stop = token.kind == "symbol" and token.text in STOPS
        if top and (token.kind == "end" or stop or is_separator_word(token)):
            settle()
            has_equals = has_shape = False
        elif top and token.kind == "symbol" and token.text == "=":
            equals_after = equals_after or pending is not None
            has_equals = True
        elif top and token.text == "in" and tokens[at + 1].text == "mathbb":
            has_shape = True
        if token.kind == "symbol" and token.text in OPENERS:
            depth += 1
        elif token.kind == "symbol" and token.text in CLOSING:
            depth = max(0, depth - 1)
        kept.append(token)
    return kept


def is_separator_word(token: Token) -> bool:
    r"""Whether ``token`` is a word that separates statements: ``\text{where}``."""
    return token.kind == "text" and token.text.lower() in SEPARATOR_WORDS
