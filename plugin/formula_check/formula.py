"""The third side of a check: the LaTeX as written, compiled and compared with the oracle.

Code ≈ oracle says the code implements the reference; formula ≈ oracle says the page states
the same reference. Together they tie the formula a reader sees to the code that runs.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from .latex import (
    CompiledFormula,
    EvaluationError,
    LatexError,
    NotExecutable,
    check_against_oracle,
    compile_formula,
    default_symbols,
    parse_symbols,
)
from .model import Array, CheckSpec, FormulaVerdict


def judge_formula(
    spec: CheckSpec, arrays: Mapping[str, Array], params: Mapping[str, Any]
) -> FormulaVerdict | None:
    """Compile ``spec.latex`` and compare it with the oracle on the check's own arrays.

    Functions the page defined earlier (``\\text{Attention}(Q, K, V) = ...``) are used first.
    When one of them cannot live in this formula (its body names a symbol this oracle does not
    declare, such as a LayerNorm's mean), the oracle's own definition is used instead and the
    card says so.
    """
    if not spec.check_formula or not spec.latex.strip():
        return None
    page = _definitions(spec, params)
    verdict = _judge(spec, arrays, params, page)
    if page and verdict.state in {"invalid", "not_executable"}:
        retry = _judge(spec, arrays, params, {})
        if retry.state in {"agrees", "differs"}:
            names = ", ".join(sorted(page))
            note = f"the page's {names} could not be used here; the oracle's own definition was"
            return dataclasses.replace(retry, compiled=f"{retry.compiled}\n({note})")
    return verdict


def _judge(
    spec: CheckSpec,
    arrays: Mapping[str, Array],
    params: Mapping[str, Any],
    definitions: Mapping[str, CompiledFormula],
) -> FormulaVerdict:
    try:
        symbols = parse_symbols(spec.symbols) if spec.symbols.strip() else None
        agreement = check_against_oracle(
            spec.latex, spec.oracle, arrays, params, symbols=symbols, definitions=definitions
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
    """Functions defined by earlier blocks on the page, each compiled with its own oracle's
    symbols (a block whose formula does not compile is reported on its own card)."""
    found: dict[str, CompiledFormula] = {}
    for oracle, latex, _where in spec.definitions:
        table = default_symbols(oracle, params)
        if table is None:
            continue
        try:
            compiled = compile_formula(latex, table, definitions=found)
        except (LatexError, NotExecutable):
            continue
        if compiled.definition is not None:
            found[compiled.definition.name] = compiled
    return found
