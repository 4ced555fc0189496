"""The symbol table: what each written name means, its named dims, and where its values live.

Declarations (read by :func:`.declarations.parse_symbols`) are short and readable, one per
line or separated by ``;``::

    Q: [b, n, d_k] = q                       a tensor read from the array "q"
    M: [b, n, m] = additive(mask)            a boolean keep mask as 0 / -1e9 logits
    W_i^Q: [d_model, depth] for i < h = W_q  a family: W_q's last axis cut into h blocks
    pos: range(n)                            an index grid 0 .. n-1
    i: range(d_model / 2)
    PE: output [n, d_model]                  an output assigned cell by cell (PE_{(pos, 2i)})
    d_model = h * depth                      concatenating h blocks of depth gives d_model
    c: scalar = 0.5                          a constant
    d = d_k                                  d is another name of dim d_k (or of a symbol)

Every named dim also reads as its size: ``d_k`` in a formula is the size of dim ``d_k``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace

import numpy as np

from formula_check.latex.errors import EvaluationError, LatexError
from formula_check.model import Array, frozen_map

Loader = Callable[[Mapping[str, Array], Mapping[str, int]], Array]
MASKED_LOGIT = -1e9


@dataclass(frozen=True)
class Symbol:
    """A declared name. ``core`` trailing dims take part in matrix products (2 for a matrix,
    1 for a vector, 0 for a scalar or a grid of scalars); the leading ones broadcast by name."""

    name: str
    dims: tuple[str, ...]
    core: int
    load: Loader
    keys: tuple[str, ...] = ()
    origin: str = ""


@dataclass(frozen=True)
class TableFunction:
    """A named function that keeps its argument's shape, e.g. LayerNorm over the last axis."""

    name: str
    apply: Callable[[Array, Mapping[str, Array]], Array]
    keys: tuple[str, ...] = ()


@dataclass(frozen=True)
class SymbolTable:
    """Everything a formula may name; see the module docstring for the declaration syntax."""

    symbols: Mapping[str, Symbol] = field(default_factory=frozen_map)
    indices: Mapping[str, str] = field(default_factory=frozen_map)
    products: Mapping[str, str] = field(default_factory=frozen_map)
    outputs: Mapping[str, tuple[str, ...]] = field(default_factory=frozen_map)
    functions: Mapping[str, TableFunction] = field(default_factory=frozen_map)
    aliases: Mapping[str, str] = field(default_factory=frozen_map)
    """Other names of dims: ``d`` for ``d_k`` reads as d_k's size, and names d_k's axis in a
    shape (``\\mathbb{R}^{n \\times d}``). An alias of a symbol is a copy of the symbol."""

    @property
    def dims(self) -> frozenset[str]:
        """Every named dim; each also reads as its size."""
        named = {d for s in self.symbols.values() for d in s.dims}
        named |= {d for dims in self.outputs.values() for d in dims}
        named |= set(self.indices.values()) | set(self.products.values())
        named |= {part for key in self.products for part in key.split("*")}
        return frozenset(d for d in named - set(self.indices) if not d.isdigit())

    @property
    def names(self) -> frozenset[str]:
        """Every name a run of letters may split into."""
        return frozenset(self.symbols) | self.dims | frozenset(self.aliases)

    def dim_of(self, name: str) -> str:
        """The dim ``name`` means: itself, or the dim it is an alias of."""
        return self.aliases.get(name, name)

    def over(self, base: SymbolTable) -> SymbolTable:
        """``base`` with this table's declarations added; where both declare a name, this
        table's wins. A block's ``symbols=`` lies over its oracle's own table this way."""
        return SymbolTable(
            frozen_map({**base.symbols, **self.symbols}),
            frozen_map({**base.indices, **self.indices}),
            frozen_map({**base.products, **self.products}),
            frozen_map({**base.outputs, **self.outputs}),
            frozen_map({**base.functions, **self.functions}),
            frozen_map({**base.aliases, **self.aliases}),
        ).resolved()

    def resolved(self) -> SymbolTable:
        """Each alias of a symbol made a copy of it, each alias of a dim kept; an alias of
        anything else is an error in its declaration."""
        symbols = dict(self.symbols)
        dims: dict[str, str] = {}
        for name, target in self.aliases.items():
            if name in self.symbols and self.symbols[name].origin != f"alias of {target}":
                written = f"{name} = {target}"
                raise LatexError(
                    f"{name} is declared, so it cannot also be another name", written, 0
                )
            if target in self.symbols:
                symbols[name] = replace(
                    self.symbols[target], name=name, origin=f"alias of {target}"
                )
            elif target in self.dims or target in self.aliases:
                dims[name] = self.aliases.get(target, target)
            else:
                written = f"{name} = {target}"
                message = (
                    f"{target} is neither a declared symbol nor a dim, so {name} cannot name it"
                )
                raise LatexError(message, written, len(name) + 3)
        return replace(self, symbols=frozen_map(symbols), aliases=frozen_map(dims))

    def extended(self, *symbols: Symbol, **functions: TableFunction) -> SymbolTable:
        """A copy with more symbols and functions."""
        return replace(
            self,
            symbols=frozen_map({**self.symbols, **{s.name: s for s in symbols}}),
            functions=frozen_map({**self.functions, **functions}),
        )


# Loaders ----------------------------------------------------------------------------------


def array_loader(key: str, dims: tuple[str, ...]) -> Loader:
    """Read ``arrays[key]`` as float64, checking its rank."""

    def load(arrays: Mapping[str, Array], sizes: Mapping[str, int]) -> Array:
        if key not in arrays:
            raise EvaluationError(f"no array named {key!r} was given")
        array = np.asarray(arrays[key], dtype=np.float64)
        if array.ndim != len(dims):
            raise EvaluationError(f"{key} has shape {array.shape}, expected ({', '.join(dims)})")
        return array

    return load


def additive_mask_loader(key: str, dims: tuple[str, ...]) -> Loader:
    """A boolean keep mask as additive logits: 0 where kept, -1e9 where masked; 0 if absent."""

    def load(arrays: Mapping[str, Array], sizes: Mapping[str, int]) -> Array:
        shape = tuple(sizes[d.rstrip("'")] for d in dims)  # n' is a second axis of size n
        if key not in arrays:
            return np.zeros(shape)
        keep = np.asarray(arrays[key], dtype=bool).reshape(shape)
        return np.where(keep, 0.0, MASKED_LOGIT)

    return load


def family_loader(key: str, count: str, dims: tuple[str, ...]) -> Loader:
    """``arrays[key]``'s last axis cut into ``sizes[count]`` blocks, stacked on a leading axis."""
    whole = array_loader(key, dims)

    def load(arrays: Mapping[str, Array], sizes: Mapping[str, int]) -> Array:
        array = whole(arrays, sizes)
        blocks = array.reshape((*array.shape[:-1], sizes[count], -1))
        return np.moveaxis(blocks, -2, 0)

    return load


def grid_loader(dim: str, divisor: int) -> Loader:
    """``0, 1, ..., sizes[dim] / divisor - 1``."""

    def load(arrays: Mapping[str, Array], sizes: Mapping[str, int]) -> Array:
        return np.arange(sizes[dim] // divisor, dtype=np.float64)

    return load


def constant_loader(value: float) -> Loader:
    """A constant scalar."""

    def load(arrays: Mapping[str, Array], sizes: Mapping[str, int]) -> Array:
        return np.asarray(value)

    return load
