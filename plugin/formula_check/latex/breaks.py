r"""Where a statement ends when nothing but space separates two: ``\quad``, a line break.

Books set equations side by side (``A = … \qquad B = …``) or one a line, with no comma.
The lexer turns a wide space and a line break into a ``break`` token; this module keeps a
break, as a separator, only where it stands between two statements, and drops it elsewhere,
where it is only space (``\text{softmax}(x) \quad V`` is one product).
"""

from __future__ import annotations

from dataclasses import dataclass, field

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
    scan = _Statements(tokens)
    for at, token in enumerate(tokens):
        if token.kind == "break":
            scan.space(token)
        else:
            scan.word(at, token)
    return scan.kept


@dataclass
class _Statements:
    """The scan's state: the tokens kept, the group depth, what the statement so far holds,
    and a break held back until the statement after it shows an ``=``."""

    tokens: list[Token]
    kept: list[Token] = field(default_factory=list)
    depth: int = 0
    has_equals: bool = False
    has_shape: bool = False
    pending: tuple[int, Token] | None = None
    """A break, and where in ``kept`` it would go."""
    equals_after: bool = False

    def settle(self) -> None:
        """The statement after the held break ends: the break stays if it held an ``=``."""
        if self.pending is not None and self.equals_after:
            self.kept.insert(*self.pending)
        self.pending = None

    def space(self, token: Token) -> None:
        """A break: kept after a shape, held back after an equation, dropped in a group."""
        if self.depth:
            return
        self.settle()
        if self.has_shape:
            self.kept.append(token)
            self.has_equals = self.has_shape = False
        self.pending = (len(self.kept), token) if self.has_equals else None
        self.equals_after = False

    def word(self, at: int, token: Token) -> None:
        """Any other token, kept; outside every group it may end or mark the statement."""
        if not self.depth:
            self.mark(at, token)
        if token.kind == "symbol" and token.text in OPENERS:
            self.depth += 1
        elif token.kind == "symbol" and token.text in CLOSING:
            self.depth = max(0, self.depth - 1)
        self.kept.append(token)

    def mark(self, at: int, token: Token) -> None:
        r"""What a token outside every group says of the statement: its end, an ``=``, or a
        shape (``\in \mathbb``)."""
        stop = token.kind == "symbol" and token.text in STOPS
        if token.kind == "end" or stop or is_separator_word(token):
            self.settle()
            self.has_equals = self.has_shape = False
        elif token.kind == "symbol" and token.text == "=":
            self.equals_after = self.equals_after or self.pending is not None
            self.has_equals = True
        elif token.text == "in" and self.tokens[at + 1].text == "mathbb":
            self.has_shape = True


def is_separator_word(token: Token) -> bool:
    r"""Whether ``token`` is a word that separates statements: ``\text{where}``."""
    return token.kind == "text" and token.text.lower() in SEPARATOR_WORDS
