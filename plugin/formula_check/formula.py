"""The third side of a check: the LaTeX as written, compiled and compared with the oracle.

Code ≈ oracle says the code implements the reference; formula ≈ oracle says the page states
the same reference. Together they tie the formula a reader sees to the code that runs.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .latex import (
    CompiledFormula,
    EvaluationError,
    LatexError,
    NotExecutable,
    check_against_oracle,
    compile_formula,
    default_definitions,
    default_symbols,
    parse_symbols,
)
from .model import Array, CheckSpec, FormulaVerdict


def judge_formula(
    spec: CheckSpec, arrays: Mapping[str, Array], params: Mapping[str, Any]
) -> FormulaVerdict | None:
    """Compile ``spec.latex`` and compare it with the oracle on the check's own arrays."""
    if not spec.check_formula or not spec.latex.strip():
        return None
    try:
        symbols = parse_symbols(spec.symbols) if spec.symbols.strip() else None
        agreement = check_against_oracle(
            spec.latex,
            spec.oracle,
            arrays,
            params,
            symbols=symbols,
            definitions=_definitions(spec, params),
        )
    except NotExecutable as exc:
        return FormulaVerdict("not_executable", message=exc.reason)
    except LatexError as exc:
        return FormulaVerdict("invalid", message=f"{exc.message}\n{exc.caret()}")
    except EvaluationError as exc:
        return FormulaVerdict("invalid", message=str(exc))
    if agreement.ok:
        return FormulaVerdict("agrees", agreement.compiled, agreement.max_abs)
    where = ", ".join(str(i) for i in agreement.worst)
    return FormulaVerdict(
        "differs",
        agreement.compiled,
        agreement.max_abs,
        f"the formula as written differs from the oracle: {agreement.output} max |Δ| = "
        f"{agreement.max_abs:.3g} at ({where}); it computes {agreement.compiled}",
    )


def _definitions(spec: CheckSpec, params: Mapping[str, Any]) -> dict[str, CompiledFormula]:
    """Functions defined by earlier blocks on the page (``\\text{Attention}(Q, K, V) = ...``).

    The oracle's own definitions and table functions come first (the page's ``LayerNorm``
    block has symbols of its own, such as its mean, that a ``sublayer`` formula does not
    declare); the page adds the names they lack.
    """
    own_table = default_symbols(spec.oracle, params)
    builtin = set(default_definitions(spec.oracle, params)) | set(
        own_table.functions if own_table else ()
    )
    found: dict[str, CompiledFormula] = {}
    for oracle, latex in spec.definitions:
        table = default_symbols(oracle, params)
        if table is None:
            continue
        try:
            compiled = compile_formula(latex, table, definitions=found)
        except (LatexError, NotExecutable):
            continue  # that block's own card reports the problem
        if compiled.definition is not None and compiled.definition.name not in builtin:
            found[compiled.definition.name] = compiled
    return found
