"""Page text -> formula blocks (found by :mod:`.fence_scan`) -> check specs: each block's
options read and validated, its snippet found, its oracle named, or the error that says why
it cannot be checked, at its page and line.
"""

from __future__ import annotations

import codecs
import contextlib
import dataclasses
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from formula_check.errors import FormulaCheckError, OracleError, PageError, SpecError
from formula_check.model import CheckSpec, Location, Snippet, Status, TimingSpec, frozen_map
from formula_check.oracles import Oracle, all_oracles, get_oracle
from formula_check.pages import fences
from formula_check.pages.fence_scan import FormulaFence, find_formulas
from formula_check.pages.front_matter import (
    OracleNames,
    block_options,
    front_matter_lines,
    front_matter_problem,
    split_front_matter,
)
from formula_check.planning.option_values import did_you_mean
from formula_check.results import CheckResult, SnippetFailure
from formula_check.snippets import inline_snippet, resolve_code


@dataclass(frozen=True)
class Settings:
    """Site-wide facts every block needs: the project root and the site's defaults."""

    root: Path
    timeout: float = 60.0
    timing: bool = True
    formula: str = "on"
    """The site's ``formula`` option: how a block that does not say is checked (``on``,
    ``off``, ``required``: see :data:`..planning.option_values.FORMULA_MODES`)."""


@dataclass(frozen=True)
class PageBlock:
    """A formula block ready to check (``spec``) or already known to be broken (``error``)."""

    fence: FormulaFence
    location: Location
    block_id: str
    latex: str
    spec: CheckSpec | None = None
    error: FormulaCheckError | None = None

    def error_result(self) -> CheckResult:
        """The ERROR result a broken block shows (its card, its log line)."""
        assert self.error is not None
        # The card and log line already say the block's page:line; repeat only a different one.
        where = self.error.location if self.error.location != self.location else None
        failure = SnippetFailure(type(self.error).__name__, self.error.message, where)
        oracle = self.spec.oracle if self.spec else "?"
        return CheckResult(self.block_id, self.location, oracle, Status.ERROR, failure=failure)


def default_id(page: str, index: int) -> str:
    """``docs/guide/attention.md``, 2 -> ``attention-2``."""
    stem = Path(page).stem or "page"
    return (re.sub(r"[\W_]+", "-", stem.lower()).strip("-") or "page") + f"-{index}"


def _snippet(
    options: Mapping[str, Any], formula: FormulaFence, page: str, line_offset: int, root: Path
) -> Snippet:
    where = Location(page, formula.line)
    entry = options.get("entry")
    if "code" in options:
        return resolve_code(options["code"], root, where, entry)
    if formula.snippet is None:
        raise SpecError(
            "no ```python fence follows this formula block (before the next one); "
            'add one, or point at code with code="snippets/file.py:name"',
            where,
        )
    fence_line = line_offset + formula.snippet.row + 1
    return inline_snippet(formula.snippet.body + "\n", Location(page, fence_line), entry)


def _fields(options: Mapping[str, Any], settings: Settings) -> dict[str, Any]:
    """Option values -> the CheckSpec fields they set (names differ in a few places)."""
    fields: dict[str, Any] = {}
    for key in ("kind", "mask", "mask_convention", "call", "returns", "atol", "rtol", "seed"):
        if key in options:
            fields[key] = options[key]
    for key in ("expect", "heatmaps", "sweep", "sweep_dim", "preset", "timeout", "skip"):
        if key in options:
            fields[key] = options[key]
    for key in ("dims", "init", "weights", "params"):
        if key in options:
            fields[key] = frozen_map(options[key])
    if "mask_dims" in options:
        fields["params"] = frozen_map(
            {**fields.get("params", {}), "mask_dims": options["mask_dims"]}
        )
    if "perturb" in options:
        fields["perturb_weights"] = options["perturb"]
    if "open" in options:
        fields["open_sections"] = options["open"]
    if "symbols" in options:
        fields["symbols"] = options["symbols"]
    mode = options.get("formula", settings.formula)
    fields["check_formula"] = mode != "off"
    if "regimes" in options:
        fields["regimes"] = options["regimes"]
    fields["formula_required"] = mode == "required"
    enabled, warmup, repeats = options.get("timing", (True, TimingSpec.warmup, TimingSpec.repeats))
    dims = frozen_map(options.get("timing_dims", {}))
    fields["timing"] = TimingSpec(enabled and settings.timing, warmup, repeats, dims)
    fields.setdefault("timeout", settings.timeout)
    return fields


def build_spec(
    formula: FormulaFence,
    defaults: Mapping[str, Any],
    *,
    page: str,
    line_offset: int,
    settings: Settings,
) -> CheckSpec:
    """One block's :class:`CheckSpec`: its own options, and the page's defaults that apply
    to it (:func:`.front_matter.block_options`)."""
    where = Location(page, formula.line)
    if not formula.closed:
        raise SpecError("this formula fence is never closed", where)
    own = fences.parse_options(fences.parse_header(formula.header, where), where)
    oracle = _named_oracle(own.get("oracle", defaults.get("oracle")))
    names = None if oracle is None else oracle_names(oracle)
    options, notes = block_options(defaults, own, where, names)
    checked = options.get("formula", settings.formula) != "off"
    if not formula.latex.strip() and not options.get("skip") and checked:
        raise SpecError(
            "the formula block is empty: write the LaTeX of the formula the code implements",
            where,
        )
    if "oracle" not in options:
        raise SpecError('formula block needs an oracle, e.g. oracle="attention"', where)
    if oracle is not None:
        _check_names(own, [oracle], where)
        _check_regimes(options.get("regimes", ()), oracle, where)
    snippet = _snippet(options, formula, page, line_offset, settings.root)
    block = options.get("id") or default_id(page, formula.index)
    return CheckSpec(
        block_id=block,
        location=where,
        oracle=options["oracle"],
        snippet=snippet,
        latex=formula.latex.strip(),
        stated=tuple(sorted(own)),
        notes=notes,
        **_fields(options, settings),
    )


def _check_regimes(names: Sequence[str], oracle: Oracle, where: Location) -> None:
    """Every regime ``regimes=`` names is one of the oracle's: a misspelt one would leave the
    block checked on fewer inputs than its author chose."""
    known = [regime.name for regime in oracle.input_regimes()]
    for name in names:
        if name not in known:
            listed = ", ".join(known) or "none: it has only its standard inputs"
            hint = did_you_mean(name, known)
            raise SpecError(
                f"regimes: oracle {oracle.name!r} has no regime {name!r}{hint} (its regimes: "
                f"{listed})",
                where,
            )


def _named_oracle(name: str | None) -> Oracle | None:
    """The oracle a block names; None when it names none, or one unknown (reported when the
    block is planned, with the known ones)."""
    with contextlib.suppress(OracleError):
        return get_oracle(name) if name else None
    return None


def _page_defaults(meta: Mapping[str, Any] | None, page: str) -> dict[str, Any]:
    front = Location(page, 1)
    defaults = fences.parse_options(fences.page_defaults(meta, front), front)
    _check_names(defaults, all_oracles(), front)  # a page may mix oracles: any of them will do
    return defaults


def _check_names(options: Mapping[str, Any], oracles: Sequence[Oracle], where: Location) -> None:
    """Every dim, parameter and weight an option names belongs to one of ``oracles``: a
    misspelt ``dk=16`` would otherwise be dropped, and a block checked at sizes nobody asked
    for would still say *verified*."""
    for option, kind in _NAMED:
        value = options.get(option)
        if not value:
            continue
        known = _known_names(kind, oracles)
        for name in [value] if isinstance(value, str) else value:
            if name not in known:
                whose = f"oracle {oracles[0].name!r}" if len(oracles) == 1 else "any oracle"
                listed = ", ".join(sorted(known)) or "none"
                raise SpecError(
                    f"{option}: {name!r} is not a {kind} of {whose} (known: {listed})"
                    f"{did_you_mean(name, known)}",
                    where,
                )


_NAMED = (
    ("dims", "dim"),
    ("timing_dims", "dim"),
    ("sweep_dim", "dim"),
    ("params", "parameter"),
    ("weights", "weight or parameter"),  # a parameter is read from the layer, to be checked
)
"""Options whose values name things of the oracle: ``(option, what it names)``."""


def _known_names(kind: str, oracles: Sequence[Oracle]) -> set[str]:
    if kind == "dim":
        return {name for oracle in oracles for name in oracle_dims(oracle)}
    params = {name for oracle in oracles for name in oracle.params}
    if kind == "parameter":
        return params
    # a layer's scalar attribute may be read back, to be checked against a parameter
    return params | {tensor.name for oracle in oracles for tensor in oracle.weights}


def oracle_names(oracle: Oracle) -> OracleNames:
    """What ``oracle`` has, by name, for :func:`.front_matter.block_options`."""
    return OracleNames(
        name=oracle.name,
        dims=frozenset(oracle_dims(oracle)),
        weights=frozenset(_known_names("weight or parameter", [oracle])),
        inputs=frozenset(tensor.name for tensor in oracle.inputs),
        outputs=frozenset({*(tensor.name for tensor in oracle.outputs), *oracle.heatmaps}),
        takes_mask=oracle.mask_dims is not None,
        regimes=frozenset(regime.name for regime in oracle.input_regimes()),
    )


def oracle_dims(oracle: Oracle) -> set[str]:
    """Every dim name ``oracle`` knows: its sizes, and those its tensors are shaped by."""
    shaped = (*oracle.inputs, *oracle.weights, *oracle.outputs)
    return set(oracle.dims) | {d for t in shaped for d in t.dims if not d.isdigit()}


def page_blocks(
    lines: Sequence[str],
    *,
    page: str,
    line_offset: int = 0,
    meta: Mapping[str, Any] | None = None,
    settings: Settings,
    front_matter_error: str | None = None,
) -> list[PageBlock]:
    """Every formula block of a page, each with a spec or the error that stopped it.
    ``front_matter_error``: :func:`front_matter_problem` of the page's text before Markdown
    expanded its tabs (``None``: judge ``lines``)."""
    formulas = find_formulas(lines, line_offset)
    try:
        if formulas and not meta:
            problem = front_matter_error
            if problem is None:
                problem = front_matter_problem(lines)
            if problem:
                raise SpecError(problem, Location(page, 1))
        defaults: dict[str, Any] = _page_defaults(meta, page) if formulas else {}
        page_error = None
    except FormulaCheckError as exc:
        defaults, page_error = {}, exc
    blocks: list[PageBlock] = []
    first_use: dict[str, int] = {}
    definitions: list[tuple[str, str, str]] = []
    for formula in formulas:
        block = _page_block(
            formula, defaults, page_error, page=page, line_offset=line_offset, settings=settings
        )
        if block.spec is not None and block.block_id in first_use:
            message = (
                f"duplicate id {block.block_id!r} (first used at line {first_use[block.block_id]})"
            )
            block = dataclasses.replace(block, spec=None, error=SpecError(message, block.location))
        first_use.setdefault(block.block_id, formula.line)
        if block.spec is not None:  # a block that is an error defines nothing: it is not checked
            spec = dataclasses.replace(block.spec, definitions=tuple(definitions))
            block = dataclasses.replace(block, spec=spec)
            if passes_definition_on(spec):
                definitions.append((spec.oracle, spec.latex, str(spec.location)))
        blocks.append(block)
    return blocks


_DEFINES = re.compile(
    r"\\(?:text|mathrm|operatorname)\{\w+\}\s*\([^)]*\)\s*(?:_\s*(?:\{[^{}]*\}|\w)\s*)?="
)
"""``\text{Attention}(Q, K, V) =`` (or with the output's indices, ``\text{softmax}(x)_i =``): a
formula that defines a function later blocks may call.
Only those are passed on, so editing any other formula does not invalidate later blocks."""


def passes_definition_on(spec: CheckSpec) -> bool:
    r"""Whether later blocks get this block's formula: it defines a function
    (``\text{Name}(…) =``) and :func:`defines_for_others` vouches for it."""
    return bool(_DEFINES.search(spec.latex)) and defines_for_others(spec)


def defines_for_others(spec: CheckSpec) -> bool:
    """May this block's definition be used by later blocks? Not when it is wrong on purpose
    (``expect`` other than verified: the documented way to show a wrong formula), nor when its
    formula is not checked (``formula="off"``, ``skip``): nothing vouches for it. Whether its
    formula agrees with its oracle is known only once arrays exist; the formula side checks
    that when a later block calls it (:func:`..checking.formula.page_functions`)."""
    return spec.expect == "verified" and spec.check_formula and not spec.skip


def _page_block(
    formula: FormulaFence,
    defaults: Mapping[str, Any],
    page_error: FormulaCheckError | None,
    *,
    page: str,
    line_offset: int,
    settings: Settings,
) -> PageBlock:
    where = Location(page, formula.line)
    fallback_id = default_id(page, formula.index)
    if page_error is not None:
        error = SpecError(f"front matter formula_check: {page_error.message}", where)
        block_id = _declared_id(formula) or fallback_id
        return PageBlock(formula, where, block_id, formula.latex, error=error)
    try:
        spec = build_spec(formula, defaults, page=page, line_offset=line_offset, settings=settings)
    except FormulaCheckError as exc:
        return PageBlock(
            formula, where, _declared_id(formula) or fallback_id, formula.latex, error=exc
        )
    return PageBlock(formula, where, spec.block_id, formula.latex, spec=spec)


def _declared_id(formula: FormulaFence) -> str | None:
    """The id a broken header still names, so its card and log line carry it (a valid id
    only: of ``id="soft<max>"`` the block keeps its default id, not ``soft``)."""
    match = re.search(r"""(?:^|\s)id=(["']?)([^\W_][\w.-]*)\1(?=\s|$)""", formula.header)
    return match.group(2) if match else None


@dataclass(frozen=True)
class PageText:
    """A page's text as MkDocs reads it; ``problem`` says why some of it could not be read."""

    text: str
    problem: PageError | None = None


def decode_page(data: bytes, page: str) -> PageText:
    """A page's bytes as MkDocs decodes them (UTF-8, a byte-order mark dropped). Bytes that
    are not UTF-8 become U+FFFD, and ``problem`` names the first one's line and column."""
    try:
        return PageText(data.decode("utf-8-sig"))
    except UnicodeDecodeError as exc:
        start = exc.start + (3 if data.startswith(codecs.BOM_UTF8) else 0)
        line = data.count(b"\n", 0, start) + 1
        column = start - (data.rfind(b"\n", 0, start) + 1) + 1
        problem = PageError(
            f"the page is not UTF-8: byte 0x{data[start]:02X} at line {line}, column {column} "
            "(in bytes) cannot be read; save the page as UTF-8. It is shown with "
            "\N{REPLACEMENT CHARACTER} in place of each such byte",
            Location(page, line),
        )
        return PageText(data.decode("utf-8-sig", errors="replace"), problem)


def source_blocks(raw: str | PageText, *, page: str, settings: Settings) -> list[PageBlock]:
    """The formula blocks of a page's source file, split from its front matter as MkDocs
    does, and seen as Python-Markdown will render them: tabs expanded, lines of spaces
    emptied. A snippet with a tab would otherwise differ from the one the page renders, and
    be checked (and reported) twice. A page not read whole (:func:`decode_page`) starts with
    an error block of its own, ``encoding``, at the line it names."""
    source = raw if isinstance(raw, PageText) else PageText(raw)
    markdown, meta = split_front_matter(source.text)
    blocks = page_blocks(
        as_markdown_reads(markdown).split("\n"),
        page=page,
        line_offset=front_matter_lines(source.text, markdown),
        meta=meta,
        settings=settings,
        front_matter_error=front_matter_problem(markdown.split("\n")),
    )
    if source.problem is None:
        return blocks
    return [_page_error_block(source.problem, blocks), *blocks]


def _page_error_block(problem: PageError, blocks: Sequence[PageBlock]) -> PageBlock:
    """The block that reports a problem of the whole page. Its location is the line of the
    problem, unless a formula block starts there: then the page itself, since a block's
    location is what its result is known by."""
    where = problem.location or Location("?")
    if any(block.location == where for block in blocks):
        where = Location(where.path)
        problem = PageError(problem.message, where)
    fence = FormulaFence(max(where.line - 1, 0), where.line, 0, "", "", True, None)
    return PageBlock(fence, where, "encoding", "", error=problem)


def as_markdown_reads(text: str, tab_length: int = 4) -> str:
    """What Python-Markdown's first preprocessor makes of ``text``, line for line."""
    return _SPACES_ONLY.sub("", (text + "\n").expandtabs(tab_length))[:-1]


_SPACES_ONLY = re.compile(r"(?<=\n) +(?=\n)")
