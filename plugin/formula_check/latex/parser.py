r"""Tokens -> statements: a recursive-descent parser for the executable subset of LaTeX math.

Grammar (juxtaposition binds like ``\cdot``; ``/`` is left-associative at the same level)::

    document   := statement (separator statement)* separator?
    separator  := (',' | ';' | '.' | '\\' | \text{where|and|with} | break)+
    statement  := expression ('=' expression)? shape?
    shape      := '\in' '\mathbb' '{R}' ('^' script)?   (dims as factors of '\times')
    expression := ('+' | '-')? term (('+' | '-') term)*
    term       := unary (('\cdot' | '\times' | '*' | '/' | '\odot')? unary)*
    unary      := '-' unary | postfix
    postfix    := atom (('_' | '^') script)*
    atom       := number | word | word args | function args | '\frac' script script
                | '\sqrt' ('[' expression ']')? script | '(' expression ')'
                | '{' expression ('\over' expression)? '}' | '\dots' | greek | bigop
    bigop      := ('\sum' | '\prod' | '\max' | '\min') limits term
    limits     := ('_' index | '^' script)*        (an index once, an upper limit at most once)
    index      := letter | '{' letters (',' letters)* ('=' expression)? '}'
    args       := ('(' | '[' | '\{') expression (',' expression)* (')' | ']' | '\}')
    script     := '{' expression (',' expression)* '}' | letter | digit | command atom

A big operator's body runs to the end of its term: ``\sum_j a_j b_j + c`` sums ``a_j b_j``.
A ``break`` (``\quad``, a line break) separates statements only where an equation stands on
each side of it (see :func:`statement_breaks`); elsewhere it is space.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from contextlib import contextmanager

from formula_check.latex.breaks import is_separator_word, statement_breaks
from formula_check.latex.conditions import split_condition
from formula_check.latex.errors import LatexError, NotExecutable, UnreadableLatexError
from formula_check.latex.lexer import Token, tokenize
from formula_check.latex.limits import MAX_NESTING, check_depth, within_stack
from formula_check.latex.macros import expand_macros
from formula_check.latex.nodes import (
    Apply,
    BigOp,
    Binary,
    Dots,
    Expr,
    Neg,
    Num,
    Script,
    Statement,
    Tuple,
    Word,
)

RELATIONS = frozenset(
    {
        "<",
        ">",
        "\\le",
        "\\ge",
        "\\leq",
        "\\geq",
        "\\lt",
        "\\gt",
        "\\neq",
        "\\ne",
        "\\approx",
        "\\sim",
        "\\in",
        "\\to",
        "\\rightarrow",
        "\\propto",
        "\\equiv",
    }
)
"""Relations: a formula that states one is outside the executable subset, not wrong."""

FUNCTIONS = frozenset({"sin", "cos", "tan", "exp", "log", "ln", "tanh", "max", "min"})
BIG_OPS = frozenset({"sum", "prod", "max", "min"})
GREEK = frozenset(
    {
        *("alpha", "beta", "gamma", "delta", "epsilon", "varepsilon", "zeta", "eta", "theta"),
        *("kappa", "lambda", "mu", "nu", "xi", "pi", "rho", "sigma", "tau", "phi", "varphi"),
        *("chi", "psi", "omega", "Gamma", "Delta", "Theta", "Lambda", "Sigma", "Phi", "Psi"),
        "Omega",
    }
)
PRODUCTS = {"cdot": "mul", "times": "mul", "*": "mul", "odot": "odot", "/": "/"}
CLOSERS = {"(": ")", "[": "]", "\\{": "\\}"}
DOTS = frozenset({"dots", "ldots", "cdots"})
TRANSPOSE = frozenset({"top", "intercal", "mathsf"})
ACCENTS = frozenset(
    {"hat", "widehat", "tilde", "widetilde", "bar", "overline", "vec", "dot", "ddot", "check"}
)
"""Decorations that make a new name: ``\\hat{y}`` is a symbol of its own, never ``y``."""
SUBSCRIPTED = frozenset({"softmax", "Softmax", "SoftMax"})
"""Functions a subscript may follow: ``\\mathrm{softmax}_k(x)`` runs along ``k``."""


class Parser:
    """One pass over the tokens of ``source``; every error names its column."""

    def __init__(self, source: str) -> None:
        self.source = source
        tokens, self.condition = split_condition(expand_macros(tokenize(source), source), source)
        self.tokens = statement_breaks(tokens)
        self.pos = 0
        self.depth = 0

    @contextmanager
    def nested(self) -> Iterator[None]:
        """One group deeper: past :data:`MAX_NESTING`, the formula is not checked."""
        if self.depth >= MAX_NESTING:
            raise NotExecutable(
                f"too deep: the formula is nested deeper than {MAX_NESTING} levels (from "
                f"column {self.peek().col + 1})"
            )
        self.depth += 1
        try:
            yield
        finally:
            self.depth -= 1

    # Token plumbing -----------------------------------------------------------------------

    def peek(self) -> Token:
        return self.tokens[self.pos]

    def advance(self) -> Token:
        token = self.tokens[self.pos]
        self.pos = min(self.pos + 1, len(self.tokens) - 1)
        return token

    def at(self, *texts: str) -> bool:
        token = self.peek()
        return token.kind in ("symbol", "command") and token.text in texts

    def expect(self, text: str) -> Token:
        if not self.at(text):
            raise self.error(f"expected {text!r}")
        return self.advance()

    def error(self, message: str, token: Token | None = None) -> LatexError:
        token = token or self.peek()
        found = "the end of the formula" if token.kind == "end" else repr(token.text)
        return LatexError(f"{message}, found {found}", self.source, token.col)

    # Statements ---------------------------------------------------------------------------

    def document(self) -> tuple[Statement, ...]:
        statements = [self.statement()]
        while self.separator() and self.peek().kind != "end":
            statements.append(self.statement())
        if self.peek().kind != "end":
            if self.peek().text in RELATIONS:
                # An inequality or membership is a statement about values, not a computation.
                raise NotExecutable(
                    f"the relation {self.peek().text!r} is outside the executable subset"
                )
            raise self.error("expected an operator or the end of the formula")
        if self.condition:
            statements[-1] = dataclasses.replace(statements[-1], condition=self.condition)
        return tuple(statements)

    def separator(self) -> bool:
        found = False
        while (
            self.at(",", ";", ".", "\\\\")
            or self.is_separator_word(self.peek())
            or self.peek().kind == "break"
        ):
            self.advance()
            found = True
        return found

    @staticmethod
    def is_separator_word(token: Token) -> bool:
        return is_separator_word(token)

    def statement(self) -> Statement:
        col = self.peek().col
        first = self.expression()
        if not self.at("="):
            return Statement(None, first, col, self.shape())
        self.advance()
        rhs = self.expression()
        if self.at("="):  # a = b = c: which side is the definition is anyone's guess
            raise NotExecutable(
                "a chain of equalities (a = b = c) is outside the executable subset: write one "
                "equation per statement, or the one the code computes"
            )
        return Statement(first, rhs, col, self.shape())

    def at_shape(self) -> bool:
        r"""Whether ``\in \mathbb{R}`` follows: a shape, not a relation."""
        following = self.tokens[self.pos + 1] if self.pos + 1 < len(self.tokens) else None
        return self.at("in") and following is not None and following.text == "mathbb"

    def shape(self) -> tuple[Expr, ...] | None:
        r"""The dims of ``\in \mathbb{R}^{n \times d}``: ``(n, d)``; None when none follows."""
        if not self.at_shape():
            return None
        self.advance()
        self.advance()
        braced = self.at("{")
        if braced:
            self.advance()
        if self.peek().text != "R":
            raise NotExecutable("membership of a set other than \\mathbb{R} is not a shape")
        self.advance()
        if braced:
            self.expect("}")
        if not self.at("^"):
            return ()
        self.advance()
        return _factors(self.script())

    # Expressions --------------------------------------------------------------------------

    def expression(self) -> Expr:
        token = self.peek()
        sign = self.advance().text if self.at("+", "-") else "+"
        node = self.term()
        if sign == "-":
            node = Neg(node, token.col)
        while self.at("+", "-"):
            op = self.advance()
            node = Binary(op.text, node, self.term(), op.col)
        return node

    def term(self) -> Expr:
        node = self.unary()
        while True:
            token = self.peek()
            if self.at(*PRODUCTS):
                self.advance()
                right = self.unary()
                node = Binary(PRODUCTS[token.text], node, right, token.col)
            elif self.starts_atom(token):
                right = self.unary()
                node = Binary("mul", node, right, token.col)
            else:
                return node

    def starts_atom(self, token: Token) -> bool:
        if token.kind in ("letter", "digit", "note"):  # a note: refused where it stands
            return True
        if token.kind == "text":
            return not self.is_separator_word(token)
        if token.kind == "command":  # \over ends the group's numerator: see nested_atom
            return token.text not in PRODUCTS and token.text != "over" and not self.at_shape()
        return token.text in ("(", "[", "\\{", "{")

    def unary(self) -> Expr:
        if self.at("-"):
            col = self.advance().col
            with self.nested():
                return Neg(self.unary(), col)
        return self.postfix()

    def postfix(self) -> Expr:
        node = self.atom()
        sub: Expr | None = None
        sup: Expr | None = None
        while self.at("_", "^"):
            mark = self.advance()
            if (sub if mark.text == "_" else sup) is not None:
                raise self.error(f"double {'sub' if mark.text == '_' else 'super'}script", mark)
            if mark.text == "_":
                sub = self.script()
            else:
                sup = self.script()
        if self.at("'"):
            raise NotExecutable("primes (x') name no executable operation")
        return node if sub is None and sup is None else Script(node, sub, sup, _col(node))

    def script(self) -> Expr:
        token = self.peek()
        if self.at("{"):
            self.advance()
            items = self.items("}")
            return items[0] if len(items) == 1 else Tuple(items, token.col)
        if token.kind == "letter":
            return Word(self.advance().text, token.col)
        if token.kind == "digit":
            return Num(float(token.text), self.advance().text, token.col)
        if token.kind in ("text", "command"):
            return self.atom()
        raise self.error("expected a script")

    def items(self, close: str) -> tuple[Expr, ...]:
        items = [self.expression()]
        while self.at(","):
            self.advance()
            items.append(self.expression())
        self.expect(close)
        return tuple(items)

    # Atoms --------------------------------------------------------------------------------

    def atom(self) -> Expr:
        with self.nested():
            return self.nested_atom()

    def nested_atom(self) -> Expr:
        token = self.peek()
        if token.kind == "digit":
            return self.number()
        if token.kind in ("letter", "text"):
            return self.word()
        if self.at("{"):
            self.advance()
            inner = self.expression()
            if self.at("over"):  # {a \over b}: TeX's own fraction, of the whole group
                mark = self.advance()
                inner = Binary("/", inner, self.expression(), mark.col)
            self.expect("}")
            return inner
        if self.at(*CLOSERS):
            items = self.arguments()
            return items[0] if len(items) == 1 else Tuple(items, token.col)
        if token.kind == "command":
            return self.command()
        if token.kind == "note":  # \text{(row-wise)}: set aside only after the equation
            raise LatexError("upright text must be a plain word", self.source, token.col)
        raise self.error("expected a value")

    def number(self) -> Num:
        first = self.peek()
        text = ""
        while self.peek().kind == "digit" or (self.at(".") and self.next_is_digit()):
            text += self.advance().text
        if text.count(".") > 1:  # 1.5.2: a version, or two numbers run together
            raise self.error(f"{text!r} is not a number (more than one decimal point)", first)
        return Num(float(text), text, first.col)

    def next_is_digit(self) -> bool:
        return self.tokens[self.pos + 1].kind == "digit"

    def word(self) -> Expr:
        first = self.advance()
        if first.kind == "text":
            return self.maybe_apply(Word(first.text, first.col, upright=True))
        text, end = first.text, first.end
        while self.peek().kind == "letter" and self.peek().col == end:
            token = self.advance()
            text, end = text + token.text, token.end
        word = Word(text, first.col)
        if text in SUBSCRIPTED:
            return self.maybe_apply(word)
        return self.maybe_apply(word) if self.at("(") else word

    def maybe_apply(self, func: Word) -> Expr:
        r"""``func(args)``, ``\mathrm{softmax}_k(args)``, or ``func`` alone."""
        sub = self.function_subscript(func)
        if not self.at(*CLOSERS):
            return func
        return Apply(func, self.arguments(), func.col, sub)

    def function_subscript(self, func: Word) -> Expr | None:
        """The subscript of ``softmax_k(...)``; none (and nothing read) unless arguments follow."""
        if func.text not in SUBSCRIPTED or not self.at("_"):
            return None
        mark = self.pos
        self.advance()
        sub = self.script()
        if self.at(*CLOSERS):
            return sub
        self.pos = mark
        return None

    def arguments(self) -> tuple[Expr, ...]:
        opener = self.advance()
        return self.items(CLOSERS[opener.text])

    def command(self) -> Expr:  # noqa: PLR0911  (one line per kind of command)
        token = self.advance()
        name = token.text
        if name in ("frac", "dfrac", "tfrac"):
            return Binary("/", self.script(), self.script(), token.col)
        if name == "sqrt":
            if self.at("["):  # \sqrt[n]{x} is x^{1/n}
                self.advance()
                degree = self.expression()
                self.expect("]")
                root = Binary("/", Num(1.0, "1", token.col), degree, token.col)
                return Script(self.script(), None, root, token.col)
            return Apply(Word("sqrt", token.col, upright=True), (self.script(),), token.col)
        if name in BIG_OPS and (name in ("sum", "prod") or self.at("_")):
            return self.big_op(token)
        if name in FUNCTIONS:
            return self.function(Word(name, token.col, upright=True))
        if name in DOTS:
            return Dots(token.col)
        if name in ACCENTS:
            return self.accented(token)
        if name in GREEK:  # \sigma(x): applied, an activation unless \sigma is declared
            word = Word(f"\\{name}", token.col)
            return self.maybe_apply(word) if self.at("(") else word
        if name in TRANSPOSE:
            if name == "mathsf":  # \mathsf{T}
                self.script()
            return Word("⊤", token.col)
        raise NotExecutable(f"\\{name} is outside the executable subset")

    def accented(self, token: Token) -> Expr:
        r"""``\hat{y}``: a name of its own, applied when arguments follow (``\hat{f}(x)``)."""
        inner = self.script()
        if not isinstance(inner, Word):
            raise NotExecutable(f"\\{token.text} over an expression names no value")
        word = Word(f"\\{token.text}{{{inner.text}}}", token.col)
        return self.maybe_apply(word) if self.at("(") else word

    def big_op(self, token: Token) -> BigOp:
        r"""``\sum_{j=1}^{m} body``: the index once, the upper limit at most once."""
        indices: tuple[Word, ...] = ()
        lower: Expr | None = None
        upper: Expr | None = None
        while self.at("_", "^"):
            mark = self.advance()
            if mark.text == "_" and not indices:
                indices, lower = self.sum_index(token.text)
            elif mark.text == "^" and upper is None:
                upper = self.script()
            else:
                raise self.error(f"double {'sub' if mark.text == '_' else 'super'}script", mark)
        if not indices:
            message = f"\\{token.text} needs its index below it, as in \\{token.text}_j"
            raise LatexError(message, self.source, token.col)
        return BigOp(token.text, indices, lower, upper, self.term(), token.col)

    def sum_index(self, op: str) -> tuple[tuple[Word, ...], Expr | None]:
        r"""``j``, ``{j}``, ``{i,j}``, ``{ij}`` or ``{j=1}``: the indices, and the lower limit,
        of ``\op`` (``sum``, ``max``, ...)."""
        if self.peek().kind == "letter":  # _jx: the subscript is j alone, as TeX reads it
            token = self.advance()
            return (Word(token.text, token.col),), None
        self.expect("{")
        indices = self.index_letters()
        while self.at(","):
            self.advance()
            indices += self.index_letters()
        lower = None
        if self.at("="):
            self.advance()
            lower = self.expression()
        token = self.peek()
        relation = f"\\{token.text}" if token.kind == "command" else token.text
        if relation in RELATIONS:
            raise NotExecutable(
                f"\\{op} under a condition ({relation}) is outside the executable subset"
            )
        self.expect("}")
        return indices, lower

    def index_letters(self) -> tuple[Word, ...]:
        """A run of adjacent letters, one index each: ``ij`` is ``i`` and ``j``."""
        if self.peek().kind != "letter":
            raise self.error("expected an index letter, as in \\sum_j")
        letters = [self.advance()]
        while self.peek().kind == "letter" and self.peek().col == letters[-1].end:
            letters.append(self.advance())
        return tuple(Word(t.text, t.col) for t in letters)

    def function(self, func: Word) -> Expr:
        r"""``\sin(x)``, ``\max\{0, x\}``, or an undelimited argument: ``\sin x``."""
        if self.at(*CLOSERS):
            return Apply(func, self.arguments(), func.col)
        return Apply(func, (self.postfix(),), func.col)


def _factors(node: Expr) -> tuple[Expr, ...]:
    r"""``n \times d`` as ``(n, d)``: the dims of a shape, in order."""
    if isinstance(node, Binary) and node.op == "mul":
        return (*_factors(node.left), *_factors(node.right))
    return (node,)


def _col(node: Expr) -> int:
    return node.col


def parse(source: str) -> tuple[Statement, ...]:
    """The statements of ``source``; raises :class:`UnreadableLatexError` where the text cannot be
    read (any error of the lexer, the macros or the grammar), or :class:`NotExecutable`."""
    if not source.strip():
        raise LatexError("the formula is empty", source, 0)
    with within_stack(source):
        try:
            statements = Parser(source).document()
        except LatexError as exc:
            raise UnreadableLatexError(exc.message, exc.source, exc.column) from None
    check_depth(statements, source)
    return statements
