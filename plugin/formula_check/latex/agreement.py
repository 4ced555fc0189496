"""Formula vs oracle: compile the LaTeX as written and compare its values with the oracle's."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from formula_check.latex.along import compile_along
from formula_check.latex.compiler import CompiledFormula
from formula_check.latex.declarations import parse_symbols
from formula_check.latex.defaults import default_definitions, default_symbols
from formula_check.latex.errors import LatexError, NotExecutable
from formula_check.latex.limits import within_stack
from formula_check.latex.shapes import base
from formula_check.latex.symbols import SymbolTable
from formula_check.model import Array, frozen_map
from formula_check.oracles import Oracle, get_oracle
from formula_check.results import largest_index

RTOL = 1e-10
ATOL = 1e-12


@dataclass(frozen=True)
class FormulaAgreement:
    """How far the formula as written is from the oracle, output by output; the worst wins."""

    ok: bool
    max_abs: float
    max_rel: float
    compiled: str
    message: str
    output: str = "output"
    worst: tuple[int, ...] = ()


def _sizes(
    oracle: Oracle, arrays: Mapping[str, Array], params: Mapping[str, Any]
) -> dict[str, int]:
    """Every dim size: integer params first, then read off the arrays' shapes."""
    sizes = {k: int(v) for k, v in params.items() if isinstance(v, int) and not isinstance(v, bool)}
    for spec in (*oracle.inputs, *oracle.weights):
        shape = np.shape(arrays[spec.name]) if spec.name in arrays else ()
        if len(shape) == len(spec.dims):
            for dim, size in zip(spec.dims, shape, strict=True):
                sizes.setdefault(dim, int(size))
    return sizes


def _aligned(value: Array, dims: tuple[str, ...], target: tuple[str, ...]) -> Array | None:
    """``value`` with its axes in ``target`` order by dim name; None if the dims differ."""
    bases = [base(d) for d in dims]
    if sorted(bases) != sorted(target) or len(set(bases)) != len(bases):
        return None
    return np.transpose(value, [bases.index(d) for d in target])


def _agreement(
    name: str, value: Array, expected: Array, compiled: str, rtol: float, atol: float
) -> FormulaAgreement:
    if value.shape != expected.shape:
        message = f"{name}: the formula gives shape {value.shape}, the oracle {expected.shape}"
        return FormulaAgreement(False, float("inf"), float("inf"), compiled, message, name)
    diff = np.abs(value - expected)
    worst = largest_index(diff)
    max_abs = float(diff.max(initial=0.0))
    max_rel = float((diff / np.maximum(np.abs(expected), 1e-300)).max(initial=0.0))
    ok = bool(np.all(diff <= atol + rtol * np.abs(expected)))
    verdict = "agrees with" if ok else "differs from"
    message = f"{name}: the formula {verdict} the oracle, max |Δ| = {max_abs:.3g} at {worst}"
    return FormulaAgreement(ok, max_abs, max_rel, compiled, message, name, worst)


def compare_with_oracle(
    compiled: CompiledFormula,
    oracle: Oracle,
    arrays: Mapping[str, Array],
    params: Mapping[str, Any],
    *,
    rtol: float = RTOL,
    atol: float = ATOL,
    expected: Mapping[str, Array] | None = None,
) -> FormulaAgreement:
    """Evaluate ``compiled`` and ``oracle`` on the same arrays, the weights the code ran
    with, but for the optional weights :func:`_left_out` names: those take the oracle's
    defaults. ``expected``: the oracle's outputs on ``arrays`` and ``params`` when the caller
    has them already; used only where the oracle runs on ``arrays`` as they are."""
    unused = _left_out(compiled, oracle, arrays, params)
    if expected is None or unused:
        expected = oracle.compute({k: v for k, v in arrays.items() if k not in unused}, params)
    result = compiled.evaluate(arrays, _sizes(oracle, arrays, params))
    values = result if isinstance(result, dict) else {compiled.outputs[0].name: result}
    names = {s.name for s in oracle.outputs}
    agreements = []
    for name, value in values.items():
        target = name if name in names else "output"
        aligned = _aligned(value, compiled.output_dims[name], oracle.tensor(target).dims)
        shown = f"{name} ({', '.join(compiled.output_dims[name])})"
        if aligned is None:
            message = f"{shown} does not have the oracle's dims {oracle.tensor(target).dims}"
            return FormulaAgreement(False, np.inf, np.inf, compiled.describe(), message, name)
        agreements.append(
            _agreement(name, aligned, np.asarray(expected[target]), compiled.describe(), rtol, atol)
        )
    return max(agreements, key=lambda a: (not a.ok, a.max_abs))


def _left_out(
    compiled: CompiledFormula,
    oracle: Oracle,
    arrays: Mapping[str, Array],
    params: Mapping[str, Any],
) -> set[str]:
    """The optional weights given that the formula may leave out: those the oracle's own
    formula leaves out too, as a paper's multi-head attention leaves out its projections'
    biases. A weight the oracle's own formula names (LayerNorm's gamma and beta) is part of what
    the page states: a formula without it is compared with the weights the code ran with,
    and differs. An oracle whose own formula cannot be compiled (a composite's) lets no
    weight be left out."""
    unnamed = {s.name for s in oracle.weights if s.optional and s.name in arrays}
    unnamed -= compiled.keys
    if not unnamed:
        return unnamed
    try:
        own = compile_for_oracle(oracle.latex, oracle.name, params)
    except (LatexError, NotExecutable):
        return set()
    return unnamed - own.keys


def compile_for_oracle(
    latex: str,
    oracle_name: str,
    params: Mapping[str, Any],
    *,
    symbols: SymbolTable | None = None,
    definitions: Mapping[str, CompiledFormula] = frozen_map(),
) -> CompiledFormula:
    """Compile ``latex`` against ``symbols`` (default: the oracle's own table), with the
    oracle's own definitions under the page's, along the oracle's ``axis`` where the formula's
    indices name none (see :mod:`.along`). Raises ``LatexError`` or ``NotExecutable``."""
    oracle = get_oracle(oracle_name)
    own = oracle_symbols(oracle, params)
    if symbols is not None:
        table = symbols.over(own or SymbolTable())
    elif own is not None:
        table = own
    else:
        raise NotExecutable(
            f"no symbols are declared for oracle {oracle_name!r}: declare the formula's names "
            "with symbols= on the block, or in the oracle's symbols"
        )
    known = {**default_definitions(oracle_name, params), **definitions}
    return compile_along(latex, table, known, oracle, params)


def oracle_symbols(oracle: Oracle, params: Mapping[str, Any]) -> SymbolTable | None:
    """The names an oracle's formula may use without declaring them: a builtin's own table,
    or the declarations an oracle of one's own carries in its ``symbols`` (the syntax of a
    block's ``symbols=``); None when it has neither."""
    builtin = default_symbols(oracle.name, params)
    declared = oracle.symbols
    if not declared.strip():
        return builtin
    table = parse_symbols(declared)
    return table.over(builtin) if builtin is not None else table.resolved()


def check_against_oracle(
    latex: str,
    oracle_name: str,
    arrays: Mapping[str, Array],
    params: Mapping[str, Any],
    *,
    symbols: SymbolTable | None = None,
    definitions: Mapping[str, CompiledFormula] = frozen_map(),
) -> FormulaAgreement:
    """Compile ``latex`` (see :func:`compile_for_oracle`) and compare it with the oracle.
    Raises ``LatexError`` or ``NotExecutable``."""
    compiled = compile_for_oracle(
        latex, oracle_name, params, symbols=symbols, definitions=definitions
    )
    with within_stack(latex):  # evaluating and describing recurse over the compiled form
        return compare_with_oracle(compiled, get_oracle(oracle_name), arrays, params)
