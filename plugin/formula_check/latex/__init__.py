r"""LaTeX formulas as written, compiled into float64 NumPy functions and checked against oracles.

A hand-written recursive-descent compiler: lexer -> parser (syntax tree) -> lowering (names,
types with named dims) -> NumPy evaluation. Index notation (``x_i``, ``\sum_j``, ``y_i = …``)
lowers to reductions over named axes (see :mod:`.indices`), and a formula may be split into
statements that use one another (see :mod:`.where`). An oracle's ``axis`` param places a
formula whose indices name no axis (see :mod:`.along`). Anything outside the executable subset
raises :class:`NotExecutable`, and so does text the grammar cannot read
(:class:`UnreadableLatexError`); mistakes in what was read raise :class:`LatexError` with a column
and a caret.
"""

from __future__ import annotations

from formula_check.latex.agreement import (
    FormulaAgreement,
    check_against_oracle,
    compare_with_oracle,
    compile_for_oracle,
)
from formula_check.latex.compiler import CompiledFormula, compile_formula
from formula_check.latex.declarations import parse_symbols
from formula_check.latex.defaults import default_definitions, default_symbols
from formula_check.latex.errors import (
    NOT_EXECUTABLE,
    EvaluationError,
    LatexError,
    NotExecutable,
    UnreadableLatexError,
)
from formula_check.latex.symbols import SymbolTable

__all__ = [
    "NOT_EXECUTABLE",
    "CompiledFormula",
    "EvaluationError",
    "FormulaAgreement",
    "LatexError",
    "NotExecutable",
    "SymbolTable",
    "UnreadableLatexError",
    "check_against_oracle",
    "compare_with_oracle",
    "compile_for_oracle",
    "compile_formula",
    "default_definitions",
    "default_symbols",
    "parse_symbols",
]
