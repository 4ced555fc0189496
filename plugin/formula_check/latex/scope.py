"""What lowering shares: the scope a formula is lowered in, and the lowerer's interface.

:mod:`.lower` holds the lowerer itself; :mod:`.indices` (index notation), :mod:`.where`
(assignments) and :mod:`.calls` (``Name(args)``) lower their own syntax through the
:class:`Lowering` interface below, so that none of them imports :mod:`.lower` back.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import Protocol

from formula_check.latex.errors import LatexError
from formula_check.latex.ir import Named, Op
from formula_check.latex.nodes import Expr, Word
from formula_check.latex.shapes import Type
from formula_check.latex.symbols import SymbolTable
from formula_check.model import frozen_map


@dataclass
class Binding:
    """What one index ranges over: ``dim`` once known, first seen at ``col``; ``limit`` when
    the dim came from the upper limit of its sum."""

    dim: str | None
    col: int
    limit: bool = False


@dataclass
class Bindings:
    """The indices of one statement: the free ones, and a stack for each index a sum binds."""

    free: dict[str, Binding] = field(default_factory=dict)
    bound: dict[str, list[Binding]] = field(default_factory=dict)

    def get(self, letter: str, col: int) -> Binding:
        stack = self.bound.get(letter)
        return stack[-1] if stack else self.free.setdefault(letter, Binding(None, col))


@dataclass(frozen=True)
class Local:
    """``name_{indices} = rhs``: a statement that may be an intermediate."""

    name: str
    indices: tuple[Word, ...]
    rhs: Expr
    col: int

    @property
    def label(self) -> str:
        return self.name.lstrip("\\")


@dataclass
class Locals:
    """The assignments of one formula (or one inlined definition), each lowered once."""

    statements: dict[str, Local] = field(default_factory=dict)
    lowered: dict[str, Named] = field(default_factory=dict)
    running: list[str] = field(default_factory=list)
    used: list[str] = field(default_factory=list)

    def visible(self) -> set[str]:
        """The names that mean an assignment here (not the one being lowered)."""
        return set(self.statements) - set(self.running)


@dataclass(frozen=True)
class Definition:
    """``Name(params)_{indices} = body`` from an earlier block, inlined wherever
    ``Name(...)`` is called, with the block's other assignments (``where``) it may use."""

    name: str
    params: tuple[str, ...]
    body: Expr
    table: SymbolTable
    source: str
    where: tuple[Local, ...] = ()
    indices: tuple[Word, ...] | None = None


@dataclass(frozen=True)
class Scope:
    """What names mean while lowering one formula, or one inlined definition's body."""

    source: str
    table: SymbolTable
    definitions: Mapping[str, Definition] = field(default_factory=frozen_map)
    families: dict[str, Named] = field(default_factory=dict)
    params: Mapping[str, Op] = field(default_factory=frozen_map)
    renames: Mapping[str, str] = field(default_factory=frozen_map)
    caller: SymbolTable | None = None
    label: str = ""
    locals: Locals = field(default_factory=Locals)
    aliases: dict[str, str] = field(default_factory=dict)
    alias_names: frozenset[str] = frozenset()
    """``aliases``: what each upper limit's size (``@d``) turned out to be, shared by every
    scope of one compilation; ``alias_names``: the names that are such sizes here."""


class Lowering(Protocol):
    """The lowerer as the modules that lower one kind of syntax see it (:class:`.lower.Lowerer`)."""

    scope: Scope
    bindings: Bindings

    def lower(self, node: Expr) -> Op:
        """``node`` as a typed operation."""
        ...

    def nested(self, scope: Scope) -> Lowering:
        """A lowerer for another scope: an inlined definition's body."""
        ...

    def statement(self) -> AbstractContextManager[None]:
        """Lower one statement: its indices are its own."""
        ...

    def fail(self, message: str, col: int) -> LatexError:
        """An error at ``col`` of the scope's source."""
        ...

    def typed(self, rule: Callable[..., Type], col: int, *args: object) -> Type:
        """``rule(*args)``, a shape mismatch reported at ``col``."""
        ...

    def taken(self) -> frozenset[str]:
        """The letters that cannot be indices."""
        ...

    def vocabulary(self) -> frozenset[str]:
        """The names a written run may be read as here."""
        ...

    def name(self, word: Word, sub: Expr | None, sup: Expr | None) -> Op:
        """A written name, with its subscript and superscript."""
        ...

    def juxtapose(self, left: Op, right: Op, col: int) -> Op:
        """``left right``: a matrix product, or a scaling."""
        ...

    def elementwise(self, op: str, left: Op, right: Op, col: int) -> Op:
        """``left op right``, broadcast by name."""
        ...
