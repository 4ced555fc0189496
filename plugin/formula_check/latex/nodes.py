"""The syntax tree of a formula as written: what the parser makes, before any name is known."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Num:
    """A number literal such as ``10000`` or ``0.5``."""

    value: float
    text: str
    col: int


@dataclass(frozen=True)
class Word:
    r"""A run of adjacent letters (``QK``, ``pos``), a Greek letter (``\gamma``) or upright text.

    Upright words (``\text{softmax}``) are names as a whole; italic runs may be products of
    several declared names and are split later, against the symbol table.
    """

    text: str
    col: int
    upright: bool = False


@dataclass(frozen=True)
class Script:
    """``base_sub^sup``: a name's index or superscript, a transpose, or a power."""

    base: Expr
    sub: Expr | None
    sup: Expr | None
    col: int


@dataclass(frozen=True)
class Apply:
    r"""A name followed by a delimited argument list: ``\text{softmax}(x)``, ``\max\{0, x\}``."""

    func: Word
    args: tuple[Expr, ...]
    col: int
    sub: Expr | None = None
    r"""``\mathrm{softmax}_k(…)``: the index or dim the function runs along."""


@dataclass(frozen=True)
class Binary:
    r"""``left op right``; ``op`` is ``+``, ``-``, ``/``, ``mul`` (juxtaposition, ``\cdot``) or
    ``odot`` (element-wise product)."""

    op: str
    left: Expr
    right: Expr
    col: int


@dataclass(frozen=True)
class Neg:
    """A leading minus."""

    operand: Expr
    col: int


@dataclass(frozen=True)
class Dots:
    r"""``\dots``: only meaningful between the first and last member of a family."""

    col: int


@dataclass(frozen=True)
class Tuple:
    """``(pos, 2i)``: an index tuple in a subscript."""

    items: tuple[Expr, ...]
    col: int


@dataclass(frozen=True)
class BigOp:
    r"""``\sum_{j=1}^{m} body``, ``\prod_j``, ``\max_j``, ``\min_j``: ``op`` over each of
    ``indices``, the ``lower`` and ``upper`` limits as written (``j=1``, ``m``) or None."""

    op: str
    indices: tuple[Word, ...]
    lower: Expr | None
    upper: Expr | None
    body: Expr
    col: int


Expr = Num | Word | Script | Apply | Binary | Neg | Dots | Tuple | BigOp


@dataclass(frozen=True)
class Statement:
    r"""``lhs = rhs``, or a bare ``rhs``; ``shape`` holds the dims of a trailing
    ``\in \mathbb{R}^{n \times d}`` (a bare name with a shape declares that name's dims)."""

    lhs: Expr | None
    rhs: Expr
    col: int
    shape: tuple[Expr, ...] | None = None
    condition: str = ""
    r"""A side condition written after it and set aside (``\forall i``), as written."""

    @property
    def declares(self) -> bool:
        r"""Whether this statement only states a name's shape: ``Q \in \mathbb{R}^{n \times d}``."""
        return self.lhs is None and self.shape is not None and isinstance(self.rhs, Word | Script)
