"""Declarations read into a :class:`SymbolTable` (the syntax: see :mod:`.symbols`)."""

from __future__ import annotations

import re

from formula_check.latex.errors import LatexError
from formula_check.latex.names import canonical_name
from formula_check.latex.parser import Parser
from formula_check.latex.symbols import (
    Symbol,
    SymbolTable,
    additive_mask_loader,
    array_loader,
    constant_loader,
    family_loader,
    grid_loader,
)
from formula_check.model import frozen_map

_NAME = r"(?P<name>[^:=]+?)\s*:\s*"
_DIMS = r"\[(?P<dims>[^\]]*)\]"
_DECLARATIONS: dict[str, re.Pattern[str]] = {
    "tensor": re.compile(
        _NAME + _DIMS + r"(?:\s*for\s+(?P<index>\w+)\s*<\s*(?P<count>\w+))?"
        r"(?:\s*=\s*(?P<additive>additive\()?(?P<key>\w+)\)?)?$"
    ),
    "range": re.compile(_NAME + r"range\(\s*(?P<dim>\w+)\s*(?:/\s*(?P<divisor>\d+)\s*)?\)$"),
    "output": re.compile(_NAME + r"output\s*" + _DIMS + "$"),
    "scalar": re.compile(_NAME + r"scalar\s*=\s*(?P<value>[-+0-9.eE]+)$"),
    "product": re.compile(r"(?P<whole>\w+)\s*=\s*(?P<count>\w+)\s*\*\s*(?P<part>\w+)$"),
    "alias": re.compile(r"(?P<name>[^:=]+?)\s*=\s*(?P<target>[^:=*\[\]]+?)$"),
}


def parse_symbols(text: str) -> SymbolTable:
    """A :class:`SymbolTable` from declarations; errors carry the column in ``text``."""
    collected = Declarations(text)
    for match in re.finditer(r"[^;\n]+", text):
        line = match.group().strip()
        if line and not line.startswith("#"):
            collected.add(line, match.start() + len(match.group()) - len(match.group().lstrip()))
    return collected.table()


def parse_name(text: str, source: str, col: int) -> str:
    """The canonical spelling of a declared name written in LaTeX (``W_i^Q``, ``d_{model}``)."""
    try:
        statements = Parser(text).document()
    except LatexError as error:
        raise LatexError(f"bad name {text!r}: {error.message}", source, col) from None
    name = canonical_name(statements[0].rhs) if len(statements) == 1 else None
    if name is None or statements[0].lhs is not None:
        raise LatexError(f"{text!r} is not a single name", source, col)
    return name


class Declarations:
    """Accumulates declarations; every error points into the declaration text."""

    def __init__(self, source: str) -> None:
        self.source = source
        self.symbols: dict[str, Symbol] = {}
        self.indices: dict[str, str] = {}
        self.products: dict[str, str] = {}
        self.outputs: dict[str, tuple[str, ...]] = {}
        self.aliases: dict[str, str] = {}

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
            aliases=frozen_map(self.aliases),
        )

    def _name(self, match: re.Match[str], col: int) -> str:
        name = parse_name(match.group("name"), self.source, col)
        if name in self.symbols or name in self.outputs or name in self.aliases:
            raise LatexError(f"{name} is declared twice", self.source, col)
        return name

    def _dims(self, match: re.Match[str], col: int) -> tuple[str, ...]:
        dims = tuple(d.strip() for d in match.group("dims").split(","))
        if not all(re.fullmatch(r"\w+", d) for d in dims):
            raise LatexError("dims are names separated by commas: [b, n, d_k]", self.source, col)
        dims = tuple(self.aliases.get(d, d) for d in dims)  # d = d_k; Q: [b, n, d]
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

    def _alias(self, match: re.Match[str], col: int) -> None:
        name = self._name(match, col)
        target = match.group("target")
        plain = re.fullmatch(r"\w+", target)  # a dim as dims are written: d_model
        at = col + match.start("target")
        self.aliases[name] = target if plain else parse_name(target, self.source, at)

    def _put(self, symbol: Symbol) -> None:
        self.symbols[symbol.name] = symbol
