"""Collect parsed declaration lines into a :class:`SymbolTable` (syntax: see ``symbols``)."""

from __future__ import annotations

import re

from ..model import frozen_map
from .errors import LatexError
from .symbols import (
    _DECLARATIONS,
    Symbol,
    SymbolTable,
    additive_mask_loader,
    array_loader,
    constant_loader,
    family_loader,
    grid_loader,
    parse_name,
)


class Declarations:
    """Accumulates declarations; every error points into the declaration text."""

    def __init__(self, source: str) -> None:
        self.source = source
        self.symbols: dict[str, Symbol] = {}
        self.indices: dict[str, str] = {}
        self.products: dict[str, str] = {}
        self.outputs: dict[str, tuple[str, ...]] = {}

    def add(self, line: str, col: int) -> None:
        for kind, pattern in _DECLARATIONS.items():
            match = pattern.match(line)
            if match:
                getattr(self, f"_{kind}")(match, col)
                return
        raise LatexError(
            f"cannot read declaration {line!r}; write e.g. 'Q: [b, n, d_k] = q'", self.source, col
        )

    def table(self) -> SymbolTable:
        return SymbolTable(
            frozen_map(self.symbols),
            frozen_map(self.indices),
            frozen_map(self.products),
            frozen_map(self.outputs),
        )

    def _name(self, match: re.Match[str], col: int) -> str:
        name = parse_name(match.group("name"), self.source, col)
        if name in self.symbols or name in self.outputs:
            raise LatexError(f"{name} is declared twice", self.source, col)
        return name

    def _dims(self, match: re.Match[str], col: int) -> tuple[str, ...]:
        dims = tuple(d.strip() for d in match.group("dims").split(","))
        if not all(re.fullmatch(r"\w+", d) for d in dims):
            raise LatexError("dims are names separated by commas: [b, n, d_k]", self.source, col)
        # A square matrix's second d_model is d_model': axes are told apart by name.
        return tuple(d + "'" * dims[:at].count(d) for at, d in enumerate(dims))

    def _tensor(self, match: re.Match[str], col: int) -> None:
        name, dims = self._name(match, col), self._dims(match, col)
        key = match.group("key") or name
        index, count = match.group("index"), match.group("count")
        if index:
            self.indices[index] = count
            load = family_loader(key, count, dims)
            self._put(
                Symbol(name, (index, *dims), min(2, len(dims)), load, (key,), f"{key}[{index}]")
            )
        elif match.group("additive"):
            load = additive_mask_loader(key, dims)
            self._put(Symbol(name, dims, min(2, len(dims)), load, (key,), f"additive({key})"))
        else:
            self._put(Symbol(name, dims, min(2, len(dims)), array_loader(key, dims), (key,), key))

    def _range(self, match: re.Match[str], col: int) -> None:
        name, dim = self._name(match, col), match.group("dim")
        divisor = int(match.group("divisor") or 1)
        origin = f"range({dim}{f' / {divisor}' if divisor > 1 else ''})"
        self._put(Symbol(name, (name,), 0, grid_loader(dim, divisor), (), origin))

    def _output(self, match: re.Match[str], col: int) -> None:
        self.outputs[self._name(match, col)] = self._dims(match, col)

    def _scalar(self, match: re.Match[str], col: int) -> None:
        name = self._name(match, col)
        value = float(match.group("value"))
        self._put(Symbol(name, (), 0, constant_loader(value), (), match.group("value")))

    def _product(self, match: re.Match[str], col: int) -> None:
        self.products[f"{match.group('count')}*{match.group('part')}"] = match.group("whole")

    def _put(self, symbol: Symbol) -> None:
        self.symbols[symbol.name] = symbol
