r"""The third side of a check: the LaTeX as written, compiled and compared with the oracle.

Code ≈ oracle says the code implements the reference; formula ≈ oracle says the page states
the same reference. Together they tie the formula a reader sees to the code that runs.

A formula may call a function an earlier block of the page defined (``head_i =
\text{Attention}(...)``). Such a definition is used only if its own formula agrees with its
own oracle on this check's arrays; the card names each one used (``Attention from
docs/page.md:20``) and each one set aside, with the reason.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from formula_check.latex import (
    CompiledFormula,
    EvaluationError,
    FormulaAgreement,
    LatexError,
    NotExecutable,
    SymbolTable,
    UnreadableLatexError,
    compare_with_oracle,
    compile_for_oracle,
    parse_symbols,
)
from formula_check.latex.ir import Named, walk
from formula_check.latex.limits import within_stack
from formula_check.model import Array, CheckSpec
from formula_check.oracles import Oracle, get_oracle
from formula_check.results import FormulaVerdict

MASK_HINT = "the formula has no mask term; write `+ M` inside the softmax"


@dataclass(frozen=True)
class PageDefinition:
    """A function an earlier block defined and that agrees with its own oracle here."""

    name: str
    where: str
    oracle: str
    compiled: CompiledFormula


@dataclass(frozen=True)
class SetAside:
    """A definition not used here, and why (its formula differs from its own oracle, ...)."""

    name: str
    where: str
    reason: str


@dataclass(frozen=True)
class PageFunctions:
    """The page's definitions a formula may call: those in force, and those set aside."""

    usable: Mapping[str, PageDefinition]
    set_aside: Mapping[str, SetAside]

    @property
    def compiled(self) -> dict[str, CompiledFormula]:
        """The usable definitions, by name, as :func:`compile_formula` takes them."""
        return {name: found.compiled for name, found in self.usable.items()}


Known = tuple[Oracle, Mapping[str, Array]]
"""An oracle and its outputs on a check's own arrays and parameters, already computed."""


def judge_formula(
    spec: CheckSpec,
    arrays: Mapping[str, Array],
    params: Mapping[str, Any],
    *,
    known: Known | None = None,
) -> FormulaVerdict | None:
    """Compile ``spec.latex`` and compare it with the oracle on the check's own arrays.

    Functions the page defined earlier are used first. When one of them cannot live in this
    formula (its body names a symbol this oracle does not declare, such as a LayerNorm's
    mean), the oracle's own definition is used instead and the card says so. ``known``: the
    block's oracle and its outputs on ``arrays`` and ``params`` (the judge computed them for
    the code): compared with as they are, rather than computed again.
    """
    if not spec.check_formula or not spec.latex.strip():
        return None
    page = page_functions(spec, arrays, params)
    verdict = _judge(spec, arrays, params, page, known)
    if page.usable and verdict.state in {"invalid", "not_executable"}:
        retry = _judge(spec, arrays, params, PageFunctions({}, page.set_aside), known)
        if retry.state in {"agrees", "differs"}:
            names = _sources(page.usable[name] for name in sorted(page.usable))
            note = f"the page's {names} could not be used here; the oracle's own definition was"
            return _with_note(retry, note)
    # formula="required": a formula left unchecked fails its block (FormulaVerdict.failed)
    return dataclasses.replace(verdict, required=spec.formula_required)


def _judge(
    spec: CheckSpec,
    arrays: Mapping[str, Array],
    params: Mapping[str, Any],
    page: PageFunctions,
    known: Known | None,
) -> FormulaVerdict:
    try:
        symbols = parse_symbols(spec.symbols) if spec.symbols.strip() else None
        compiled, agreement = _compared(
            spec.latex, spec.oracle, arrays, params, symbols, page.compiled, known
        )
    except NotExecutable as exc:
        return _with_notes(FormulaVerdict("not_executable", message=exc.reason), page, spec.latex)
    except UnreadableLatexError as exc:  # outside what the compiler reads, as a prime or \int is
        said = f"the compiler cannot read this LaTeX: {exc.message}\n{exc.caret()}"
        return _with_notes(FormulaVerdict("not_executable", message=said), page, spec.latex)
    except LatexError as exc:
        verdict = FormulaVerdict("invalid", message=f"{exc.message}\n{exc.caret()}")
        return _with_notes(verdict, page, spec.latex)
    except EvaluationError as exc:
        return _with_notes(FormulaVerdict("invalid", message=str(exc)), page, spec.latex)
    return _verdict(spec, compiled, agreement, page)


def _verdict(
    spec: CheckSpec, compiled: CompiledFormula, agreement: FormulaAgreement, page: PageFunctions
) -> FormulaVerdict:
    """The verdict of a formula that compiled: the compiled form with a line naming each page
    definition it called (used or set aside), and for a difference, what may explain it."""
    called = calls(compiled)
    used = [page.usable[name] for name in sorted(called & set(page.usable))]
    notes = [_sources(used)] if used else []
    notes += [_set_aside_note(page, name) for name in sorted(called & set(page.set_aside))]
    shown = "\n".join([agreement.compiled, *(f"({note})" for note in notes)])
    if agreement.ok:
        return FormulaVerdict("agrees", shown, agreement.max_abs)
    where = ", ".join(str(i) for i in agreement.worst)
    hints = [MASK_HINT] if spec.mask != "none" and "mask" not in compiled.keys else []
    hints += [
        f"it uses {found.name} from {found.where}, which agrees with oracle {found.oracle!r} "
        "here, so the difference is in this formula"
        for found in used
    ]
    return FormulaVerdict(
        "differs",
        shown,
        agreement.max_abs,
        f"the formula as written differs from the oracle: {agreement.output} max |Δ| = "
        f"{agreement.max_abs:.3g} at ({where}); {''.join(f'{h}; ' for h in hints)}"
        f"it computes {agreement.compiled}",
    )


def _compared(
    latex: str,
    oracle: str,
    arrays: Mapping[str, Array],
    params: Mapping[str, Any],
    symbols: SymbolTable | None,
    definitions: Mapping[str, CompiledFormula],
    known: Known | None = None,
) -> tuple[CompiledFormula, FormulaAgreement]:
    """What :func:`~..latex.check_against_oracle` does, keeping the compiled formula: its
    calls name the definitions used, its keys tell whether it has a mask term. ``known``:
    outputs of an oracle on these very arrays and params, used if it is this one."""
    compiled = compile_for_oracle(latex, oracle, params, symbols=symbols, definitions=definitions)
    reference = get_oracle(oracle)
    expected = known[1] if known is not None and known[0] is reference else None
    with within_stack(latex):
        agreement = compare_with_oracle(compiled, reference, arrays, params, expected=expected)
    return compiled, agreement


def page_functions(
    spec: CheckSpec, arrays: Mapping[str, Array], params: Mapping[str, Any]
) -> PageFunctions:
    """The page's definitions this formula may call, each checked against its own oracle on
    this check's arrays. Page order: a later definition of a name replaces an earlier one,
    but only if it is usable. Definitions of names the formula never mentions (directly or
    through another definition) are not compiled: a long page pays only for what it calls."""
    needed = _needed(spec)
    usable: dict[str, PageDefinition] = {}
    set_aside: dict[str, SetAside] = {}
    for oracle, latex, where in spec.definitions:
        name = _defined_name(latex)
        if name not in needed:
            continue
        checked = _checked_definition(oracle, latex, where, arrays, params, usable)
        if isinstance(checked, PageDefinition):
            usable[checked.name] = checked
            set_aside.pop(checked.name, None)
        else:
            set_aside[name] = checked
    return PageFunctions(usable, set_aside)


def _checked_definition(
    oracle: str,
    latex: str,
    where: str,
    arrays: Mapping[str, Array],
    params: Mapping[str, Any],
    earlier: Mapping[str, PageDefinition],
) -> PageDefinition | SetAside:
    name = _defined_name(latex)
    definitions = {key: found.compiled for key, found in earlier.items()}
    try:
        own_params = {**get_oracle(oracle).params, **params}
        compiled, agreement = _compared(latex, oracle, arrays, own_params, None, definitions)
    except LatexError as exc:
        return SetAside(name, where, f"its formula does not compile: {exc.message}")
    except NotExecutable as exc:
        return SetAside(name, where, f"its formula is not executable: {exc.reason}")
    # Its oracle runs on arrays made for this block's oracle: whatever it raises on them (a
    # tensor it reads is missing, the shapes do not fit) means it cannot be checked here, and
    # the card says so.
    except Exception as exc:
        return SetAside(name, where, f"it cannot be checked on this block's arrays: {exc}")
    if compiled.definition is None:
        return SetAside(name, where, "its formula defines no function")
    if not agreement.ok:
        unmasked = "mask" in arrays and "mask" not in compiled.keys
        reason = (
            f"its formula differs from its oracle {oracle!r} on this block's arrays "
            f"(max |Δ| = {agreement.max_abs:.3g}{'; it has no mask term' if unmasked else ''})"
        )
        return SetAside(compiled.definition.name, where, reason)
    return PageDefinition(compiled.definition.name, where, oracle, compiled)


_DEFINED = re.compile(
    r"\\(?:text|textrm|mathrm|operatorname)\{(\w+)\}\s*\([^)]*\)\s*(?:_\s*(?:\{[^{}]*\}|\w)\s*)?="
)
"""``\\text{Attention}(Q, K, V) =``, or with the output's indices, ``\\text{softmax}(x)_i =``:
the function a definition block defines."""


def _defined_name(latex: str) -> str:
    match = _DEFINED.search(latex)
    return match.group(1) if match else ""


def _needed(spec: CheckSpec) -> set[str]:
    """Names of page definitions the formula may call, directly or through one another."""
    by_name: dict[str, list[str]] = {}
    for _oracle, latex, _where in spec.definitions:
        by_name.setdefault(_defined_name(latex), []).append(latex)
    by_name.pop("", None)
    needed: set[str] = set()
    texts = [spec.latex]
    while texts:
        text = texts.pop()
        for name in set(by_name) - needed:
            if re.search(rf"(?<!\w){re.escape(name)}(?!\w)", text, re.IGNORECASE):
                needed.add(name)
                texts += by_name[name]
    return needed


def calls(compiled: CompiledFormula) -> set[str]:
    """The functions ``compiled`` inlined, at any depth (``Attention`` in ``head_i``)."""
    roots = [op for out in compiled.outputs for op in (out.op, *out.index)]
    # a family (head_i) is Named too, but has no args
    return {op.label for op in walk(*roots) if isinstance(op, Named) and op.args is not None}


def _sources(used: Iterable[PageDefinition]) -> str:
    """``Attention from docs/page.md:20``."""
    return ", ".join(f"{found.name} from {found.where}" for found in used)


def _set_aside_note(page: PageFunctions, name: str, *, compiled: bool = True) -> str:
    """Why the page's ``name`` was not used and, when the formula compiled, what was."""
    aside = page.set_aside[name]
    note = f"{aside.name} from {aside.where} was not used: {aside.reason}"
    if not compiled:
        return note
    if name in page.usable:
        return f"{note}; {_sources([page.usable[name]])} was used instead"
    return f"{note}; the oracle's own {name} was used instead"


def _with_notes(verdict: FormulaVerdict, page: PageFunctions, latex: str) -> FormulaVerdict:
    """A formula that does not compile may fail for want of a definition set aside: say so."""
    mentioned = [name for name in sorted(page.set_aside) if name.lower() in latex.lower()]
    for name in mentioned:
        verdict = _with_note(verdict, _set_aside_note(page, name, compiled=False))
    return verdict


def _with_note(verdict: FormulaVerdict, note: str) -> FormulaVerdict:
    """``verdict`` with ``(note)`` on a line of its own under the compiled form, or under the
    message when nothing compiled."""
    if verdict.compiled:
        return dataclasses.replace(verdict, compiled=f"{verdict.compiled}\n({note})")
    return dataclasses.replace(verdict, message=f"{verdict.message}\n({note})")
