r"""A formula's own macros, expanded as TeX would before the formula is read.

A page may define shorthands in the formula itself: ``\newcommand{\sm}{\text{softmax}}``,
``\newcommand{\norm}[1]{\lVert #1 \rVert}``, ``\def\dk{d_k}``,
``\DeclareMathOperator{\softmax}{softmax}``. Each definition vanishes and each use becomes the
definition's tokens, its ``#1``...``#9`` replaced by the use's arguments (a braced group or one
token). A definition this module cannot read is :class:`NotExecutable`, never skipped: a
formula whose macros are not expanded is not the formula the reader sees.

Tokens of a body keep the columns they have in the definition, so that a mistake inside a
macro is shown where it is written, and letters written side by side stay one name.
"""

from __future__ import annotations

from collections.abc import Iterator

from formula_check.latex.errors import LatexError, NotExecutable
from formula_check.latex.lexer import Token

DEFINERS = frozenset({"newcommand", "renewcommand", "providecommand"})
OPERATORS = frozenset({"DeclareMathOperator"})
MAX_EXPANSIONS = 1_000
r"""The most macro uses one formula expands: far past a written formula, well before a macro
that uses itself (``\def\a{\a}``) would fill the memory."""

MAX_TOKENS = 20_000
"""The most tokens the expanded formula may hold: twice the longest source read (see
:data:`.limits.MAX_CHARACTERS`), whatever a macro that copies its argument makes of it."""

Macro = tuple[int, tuple[Token, ...]]
"""A macro's number of parameters and its body."""


class _Reader:
    """The definitions of one formula, and its tokens with every use expanded."""

    def __init__(self, tokens: list[Token], source: str) -> None:
        self.pending = list(reversed(tokens))  # a stack: expansions are pushed back on top
        self.source = source
        self.macros: dict[str, Macro] = {}
        self.expansions = 0
        self.out: list[Token] = []

    def next(self) -> Token:
        return self.pending.pop()

    def peek(self) -> Token:
        return self.pending[-1]

    def run(self) -> list[Token]:
        out = self.out
        while self.pending:
            token = self.next()
            if token.kind != "command":
                out.append(token)
            elif token.text in DEFINERS or token.text == "def":
                self._define(token)
            elif token.text in OPERATORS:
                self._operator(token)
            elif token.text in self.macros:
                self._expand(token)
            else:
                out.append(token)
        return out

    def _define(self, token: Token) -> None:
        self._star()
        name = self._name(token)
        count = self._count(token) if token.text != "def" else self._def_params(token)
        self.macros[name] = (count, tuple(self._group(token)))

    def _operator(self, token: Token) -> None:
        r"""``\DeclareMathOperator{\sm}{softmax}``: ``\sm`` is ``\operatorname{softmax}``."""
        self._star()
        name = self._name(token)
        letters = self._group(token)
        word = "".join(t.text for t in letters)
        if not letters or not all(t.kind in ("letter", "digit") for t in letters):
            raise _unreadable(token, "its operator's name must be a plain word")
        first, last = letters[0], letters[-1]
        self.macros[name] = (0, (Token("text", word, first.col, last.end),))

    def _star(self) -> None:
        if self.peek().text == "*":
            self.next()

    def _name(self, token: Token) -> str:
        braced = self.peek().text == "{"
        if braced:
            self.next()
        name = self.next()
        if name.kind != "command" or (braced and self.next().text != "}"):
            raise _unreadable(token, "the name it defines is not a command such as \\sm")
        return name.text

    def _count(self, token: Token) -> int:
        r"""The ``[2]`` of ``\newcommand{\f}[2]{…}``: how many parameters (0 without one)."""
        if self.peek().text != "[":
            return 0
        self.next()
        digit = self.next()
        if digit.kind != "digit" or digit.text == "0" or self.next().text != "]":
            raise _unreadable(token, "its number of parameters must be one digit, 1 to 9")
        if self.peek().text == "[":  # [default]: an optional first parameter
            raise _unreadable(token, "an optional parameter is not expanded")
        return int(digit.text)

    def _def_params(self, token: Token) -> int:
        r"""The ``#1#2`` of ``\def\f#1#2{…}``, numbered in order."""
        count = 0
        while self.peek().kind == "param":
            count += 1
            if self.next().text != f"#{count}":
                raise _unreadable(token, "its parameters must be #1, #2, … in order")
        return count

    def _group(self, token: Token) -> list[Token]:
        """The tokens of the braced group that comes next, without its braces."""
        if self.peek().text != "{":
            raise _unreadable(token, "its body must be braced")
        self.next()
        inside: list[Token] = []
        depth = 1
        while self.pending and self.peek().kind != "end":
            item = self.next()
            depth += {"{": 1, "}": -1}.get(item.text if item.kind == "symbol" else "", 0)
            if depth == 0:
                return inside
            inside.append(item)
        raise _unreadable(token, "its braces are never closed")

    def _argument(self, use: Token) -> list[Token]:
        """One argument of a use: a braced group's tokens, or one token."""
        if self.peek().kind == "end":
            raise LatexError(f"\\{use.text} needs more arguments", self.source, use.col)
        if self.peek().text == "{":
            return self._group(use)
        return [self.next()]

    def _expand(self, use: Token) -> None:
        self.expansions += 1
        if self.expansions > MAX_EXPANSIONS:
            raise NotExecutable(
                f"the macro \\{use.text} expands more than {MAX_EXPANSIONS:,} times (does it "
                "use itself?)"
            )
        count, body = self.macros[use.text]
        arguments = [self._argument(use) for _ in range(count)]
        size = sum(len(arguments[int(t.text[1:]) - 1]) if _bound(t, count) else 1 for t in body)
        if len(self.out) + len(self.pending) + size > MAX_TOKENS:
            raise NotExecutable(
                f"too long: its macros expand the formula past {MAX_TOKENS:,} tokens (\\{use.text})"
            )
        expanded = list(_substituted(body, arguments, use, self.source))
        self.pending.extend(reversed(expanded))


def _bound(token: Token, count: int) -> bool:
    """Whether ``token`` is a parameter the macro has (``#2`` of a macro of two)."""
    return token.kind == "param" and int(token.text[1:]) <= count


def _substituted(
    body: tuple[Token, ...], arguments: list[list[Token]], use: Token, source: str
) -> Iterator[Token]:
    for token in body:
        if token.kind != "param":
            yield token
            continue
        number = int(token.text[1:])
        if number > len(arguments):
            raise LatexError(
                f"\\{use.text} has {len(arguments)} parameters, its body uses {token.text}",
                source,
                token.col,
            )
        yield from arguments[number - 1]


def _unreadable(token: Token, why: str) -> NotExecutable:
    return NotExecutable(f"the definition \\{token.text} at column {token.col + 1}: {why}")


def expand_macros(tokens: list[Token], source: str) -> list[Token]:
    r"""``tokens`` without the formula's macro definitions, each use of them replaced by the
    definition's body; the ``end`` token stays last."""
    return _Reader(tokens, source).run()
