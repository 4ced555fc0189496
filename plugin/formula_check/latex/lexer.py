r"""LaTeX math source -> tokens with 0-based columns.

Spacing (``\,``, ``\quad``), delimiter sizing (``\left``, ``\Big``) and font commands that
keep a letter a letter (``\mathbf``) carry no meaning for the value, so they vanish here.
Upright text (``\text{softmax}``) becomes one ``text`` token: it names a function or a word.
Size commands (``\Large``) vanish with the braces of the group they enlarge, which may hold
a whole equation. A wide space (``\quad``, ``\hspace{1em}``) or a line break becomes a
``break`` token: the parser takes it for the end of a statement only between two equations
written side by side.

Presentation commands (colour, boxes, phantoms, kerns, labels) are read as a reader sees the
formula (see :mod:`.presentation`). A ``#1`` is a macro's parameter (see :mod:`.macros`).
Upright text that is no plain word (``\text{(row-wise)}``) is a ``note`` token: a trailing
note is set aside (see :mod:`.conditions`), and anywhere else the parser refuses it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

from formula_check.latex.errors import LatexError
from formula_check.latex.limits import check_length
from formula_check.latex.presentation import (
    COLOURING,
    FRAMING,
    HIDDEN,
    KEEPING,
    KERNS,
    SILENT,
    TEXT_BOXES,
    WIDE,
    dollars,
    group_end,
    skip_dimension,
    skip_optional,
)

TokenKind = Literal["letter", "digit", "symbol", "command", "text", "note", "break", "param", "end"]

SPACING = frozenset({",", ";", ":", "!", " ", "\n", ">"})
BREAKS = frozenset({"quad", "qquad"})
SIZES = frozenset(
    {"tiny", "scriptsize", "footnotesize", "small", "normalsize", "large", "Large", "LARGE"}
    | {"huge", "Huge"}
)
r"""Font sizes: ``\Large{x = y}`` and ``{\Large x = y}`` are ``x = y``."""
LIMITS = frozenset({"limits", "nolimits"})  # where \sum's limits are drawn, not what they are
LAYOUT = frozenset({"aligned", "align", "align*", "gathered", "gather", "gather*", "split"})
"""Environments that only line statements up (their ``&`` vanish, their ``\\\\`` separate)."""
SIZING = frozenset(
    f"{size}{side}"
    for size in ("left", "right", "middle", "big", "Big", "bigg", "Bigg")
    for side in ("", "l", "r", "m")
)
FONTS = frozenset({"mathbf", "boldsymbol", "bm", "mathit", "mathsf", "mathnormal"})
UPRIGHT = frozenset({"text", "mathrm", "operatorname", "textrm", "textnormal", "mbox", "textit"})
SYMBOLS = frozenset("+-*/=,;()[]{}^_|.'<>")
UNDERSCORES = ("{\\_}", "\\_")
"""An escaped underscore, braced or not: inside a name it is a letter of the name."""
STARRED = frozenset({"hspace", "tag"})
"""Commands whose ``*`` form is another command of the same kind."""
UNICODE = dict(
    re.findall(
        r"(\S):(\S+)",
        "α:alpha β:beta γ:gamma δ:delta ε:varepsilon ϵ:epsilon ζ:zeta η:eta θ:theta κ:kappa "
        "λ:lambda μ:mu ν:nu ξ:xi π:pi ρ:rho σ:sigma τ:tau φ:varphi ϕ:phi χ:chi ψ:psi ω:omega "
        "Γ:Gamma Δ:Delta Θ:Theta Λ:Lambda Σ:Sigma Φ:Phi Ψ:Psi Ω:Omega ·:cdot ×:times ⊙:odot "
        "√:sqrt ∑:sum ∏:prod −:- …:dots ⋯:cdots ⊤:top",
    )
)
r"""Characters a page may type for a command: ``γ`` is ``\gamma`` (``ε`` is ``\varepsilon``, as
the glyph is), ``·`` is ``\cdot``, ``−`` (a minus sign) is ``-``."""
ESCAPED = {"{": "\\{", "}": "\\}", "lbrace": "\\{", "rbrace": "\\}", "\\": "\\\\"}


@dataclass(frozen=True)
class Token:
    """One token: ``text`` is the character, the command name, or the upright word."""

    kind: TokenKind
    text: str
    col: int
    end: int


class _Lexer:
    def __init__(self, source: str) -> None:
        self.source = source
        self.pos = 0
        self.tokens: list[Token] = []
        self.hidden: set[int] = set()  # the closing braces of groups a size command opened

    def run(self) -> list[Token]:
        while self.pos < len(self.source):
            self._step()
        self.tokens.append(Token("end", "", len(self.source), len(self.source)))
        return self.tokens

    def _step(self) -> None:
        char, start = self.source[self.pos], self.pos
        self.pos += 1
        if start in self.hidden:
            return
        if char == "\n":
            self.tokens.append(Token("break", "\n", start, self.pos))
            return
        if char.isspace() or char in "&~":
            return
        if char == "%":  # a TeX comment runs to the end of the line
            newline = self.source.find("\n", self.pos)
            self.pos = len(self.source) if newline < 0 else newline
        elif self._joins_name(start):
            self._underscore(start)
        elif char == "\\":
            self._command(start)
        elif char.isascii() and char.isalpha():
            self.tokens.append(Token("letter", char, start, self.pos))
        elif char in "0123456789":  # "²" is a digit to str.isdigit, not to float
            self.tokens.append(Token("digit", char, start, self.pos))
        elif char in SYMBOLS:
            self.tokens.append(Token("symbol", char, start, self.pos))
        elif char in UNICODE:
            name = UNICODE[char]
            kind: TokenKind = "symbol" if name in SYMBOLS else "command"
            self.tokens.append(Token(kind, name, start, self.pos))
        elif char == "#" and self.source[self.pos : self.pos + 1] in tuple("123456789"):
            self.pos += 1
            self.tokens.append(Token("param", self.source[start : self.pos], start, self.pos))
        else:
            raise LatexError(f"unexpected character {char!r}", self.source, start)

    def _joins_name(self, start: int) -> bool:
        r"""Whether an escaped underscore (``\_`` or ``{\_}``) starts here, right after a letter:
        ``step{\_}num`` is one name, ``step_num``, as a paper prints a code identifier."""
        last = self.tokens[-1] if self.tokens else None
        if last is None or last.kind != "letter" or last.end != start:
            return False
        return any(self.source.startswith(form, start) for form in UNDERSCORES)

    def _underscore(self, start: int) -> None:
        """An escaped underscore as a letter of the name it joins (its columns kept whole, so
        the letters after it run on)."""
        form = next(form for form in UNDERSCORES if self.source.startswith(form, start))
        self.pos = start + len(form)
        self.tokens.append(Token("letter", "_", start, self.pos))

    def _command(self, start: int) -> None:
        name = self._command_name()
        if name in SPACING or name in FONTS or name in LIMITS or self._presentation(start, name):
            return
        if name in BREAKS:
            self.tokens.append(Token("break", name, start, self.pos))
            return
        if name in SIZES:
            self._hide_group()
            return
        if name in SIZING:
            if self.source.startswith(".", self.pos):  # \left. is an invisible delimiter
                self.pos += 1
            return
        if name in ("begin", "end"):
            environment = self._environment(start)
            if environment not in LAYOUT:  # \begin{cases}: the parser says it is not executable
                self.tokens.append(Token("command", f"{name}{{{environment}}}", start, self.pos))
            return
        if name in ESCAPED:
            self.tokens.append(Token("symbol", ESCAPED[name], start, self.pos))
        elif name in UPRIGHT:
            word = self._braced_word(start)
            plain = all(c.isalnum() or c in " -" for c in word)
            self.tokens.append(Token("text" if plain else "note", word, start, self.pos))
        else:
            self.tokens.append(Token("command", name, start, self.pos))

    def _hide_group(self) -> None:
        r"""Drop the braces of the group that starts here, if one does (``\Large{...}``)."""
        at = self.pos
        while at < len(self.source) and self.source[at].isspace():
            at += 1
        opened = self.source.startswith("{", at)
        if opened:
            depth, scan = 0, at
        elif self._opens_statement():  # {\Large x = y}: the group it stands first in
            depth, scan = 1, self.pos
            self.tokens.pop()
        else:
            return
        while scan < len(self.source):
            char = self.source[scan]
            if char == "\\":  # \{ and \} are delimiters, not braces
                scan += 2
                continue
            depth += {"{": 1, "}": -1}.get(char, 0)
            if depth == 0:
                self.hidden.add(scan)
                self.pos = at + 1 if opened else self.pos
                return
            scan += 1

    def _opens_statement(self) -> bool:
        r"""Whether the last token is a ``{`` that starts a statement (``{\Large x = y}``), not
        an argument (``\sqrt{\large x + y}`` keeps its braces)."""
        if not self.tokens or self.tokens[-1].text != "{":
            return False
        before = self.tokens[-2] if len(self.tokens) > 1 else None
        return before is None or before.kind == "break" or before.text in {",", ";", "\\\\"}

    def _command_name(self) -> str:
        end = self.pos
        while end < len(self.source) and self.source[end].isascii() and self.source[end].isalpha():
            end += 1
        end = max(end, min(self.pos + 1, len(self.source)))  # \, \{ \\: one character
        if self.source[self.pos : end] in STARRED and self.source.startswith("*", end):
            end += 1
        name, self.pos = self.source[self.pos : end], end
        return name

    def _presentation(self, start: int, name: str) -> bool:
        """Step over a command that only changes how the formula looks (see
        :mod:`.presentation`); whether ``name`` is one. What it keeps stays in the source."""
        source = self.source
        if name in KERNS:
            self.pos = skip_dimension(source, self.pos, start, name)
        elif name in WIDE:
            self.pos = group_end(source, self.pos, start, name)
            self.tokens.append(Token("break", name, start, self.pos))
        elif name in HIDDEN:
            self.pos = group_end(source, skip_optional(source, self.pos), start, name)
        elif name in COLOURING or name in FRAMING or name in KEEPING:
            self.pos = skip_optional(source, self.pos)
            for _ in range(2 if name in FRAMING else 1 if name in COLOURING else 0):
                self.pos = group_end(source, self.pos, start, name)
            if name in TEXT_BOXES:  # \colorbox{c}{$x$}: the dollars around its math vanish
                self.hidden.update(dollars(source, self.pos))
        return name in SILENT | KERNS | WIDE | HIDDEN | COLOURING | FRAMING | KEEPING

    def _environment(self, start: int) -> str:
        r"""The ``{name}`` after ``\begin`` or ``\end``."""
        while self.pos < len(self.source) and self.source[self.pos].isspace():
            self.pos += 1
        close = self.source.find("}", self.pos) if self.source.startswith("{", self.pos) else -1
        name = self.source[self.pos + 1 : close].strip() if close > 0 else ""
        if not name or not all(c.isascii() and (c.isalpha() or c == "*") for c in name):
            raise LatexError(
                "expected an environment's name, as in \\begin{aligned}", self.source, start
            )
        self.pos = close + 1
        return name

    def _braced_word(self, start: int) -> str:
        if self.source.startswith("*", self.pos):  # \operatorname* only moves limits
            self.pos += 1
        while self.pos < len(self.source) and self.source[self.pos].isspace():
            self.pos += 1
        if not self.source.startswith("{", self.pos):
            raise LatexError("expected '{' after an upright-text command", self.source, start)
        close = self.source.find("}", self.pos)
        word = self.source[self.pos + 1 : close].strip() if close > 0 else ""
        if not word:
            raise LatexError("upright text must be a plain word", self.source, start)
        self.pos = close + 1
        return word


def tokenize(source: str) -> list[Token]:
    """Every token of ``source``, ending with an ``end`` token at ``len(source)``; a source
    longer than :data:`~.limits.MAX_CHARACTERS` is refused before it is read."""
    check_length(source)
    return _Lexer(source).run()
