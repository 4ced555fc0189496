"""How large a formula may be: far beyond any written formula, well within Python's stack.

The parser, the lowering, the evaluation and the compiled form's description all recurse
over the formula's syntax tree. A page may hold anything, so the size is checked up front and
a formula too big is not checked (:class:`NotExecutable`), never a ``RecursionError`` that
stops a build. Past a limit the formula is not wrong, only beyond the checker: it is "formula
not checked: too long", shown and counted, never a mismatch.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from formula_check.latex.errors import NotExecutable
from formula_check.latex.nodes import Apply, BigOp, Binary, Expr, Neg, Script, Statement, Tuple

MAX_CHARACTERS = 10_000
"""The longest formula read: a page's longest real formulas hold a few hundred characters."""

MAX_NESTING = 50
"""The most groups (braces, parentheses, fractions, scripts, signs) one inside another. The
parser spends about eight stack frames a level."""

MAX_DEPTH = 200
"""The deepest syntax tree compiled, where each term of a sum or product is one level deeper
than the one before it; the compiler spends two or three frames a level."""


def check_length(source: str) -> None:
    """:class:`NotExecutable` if ``source`` is longer than :data:`MAX_CHARACTERS`."""
    if len(source) > MAX_CHARACTERS:
        raise NotExecutable(
            f"too long: the formula is longer than {MAX_CHARACTERS:,} characters "
            f"({len(source):,}); split it into several blocks"
        )


def check_depth(statements: tuple[Statement, ...], source: str) -> None:
    """:class:`NotExecutable` if a node is deeper than :data:`MAX_DEPTH` (walked without
    recursion: the walk must not fail where the compiler would)."""
    stack: list[tuple[Expr, int]] = [
        (root, 1) for s in statements for root in (s.lhs, s.rhs) if root is not None
    ]
    while stack:
        node, depth = stack.pop()
        if depth > MAX_DEPTH:
            raise NotExecutable(
                f"too long: more than {MAX_DEPTH} operations nested one inside another (each "
                f"term of a long sum or product counts as one, from column {node.col + 1}); "
                "split it into statements or blocks"
            )
        stack.extend((child, depth + 1) for child in children(node))


def children(node: Expr) -> tuple[Expr, ...]:  # noqa: PLR0911  (one line per kind of node)
    """The nodes directly under ``node``."""
    match node:
        case Binary(left=left, right=right):
            return (left, right)
        case Neg(operand=operand):
            return (operand,)
        case Script(base=base, sub=sub, sup=sup):
            return tuple(part for part in (base, sub, sup) if part is not None)
        case Apply(func=func, args=args):
            return (func, *args)
        case Tuple(items=items):
            return items
        case BigOp(lower=lower, upper=upper, body=body):
            return tuple(part for part in (lower, upper, body) if part is not None)
    return ()


@contextmanager
def within_stack(source: str) -> Iterator[None]:
    """The safety net under the limits: a formula that still exhausts Python's stack (a
    page's definitions inlined into one another) is the formula's error."""
    try:
        yield
    except RecursionError:
        raise NotExecutable(
            "too deep: the formula is nested too deeply to check; simplify it or split it "
            "into blocks"
        ) from None
