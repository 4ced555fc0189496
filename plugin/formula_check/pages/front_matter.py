"""A page's front matter, read as MkDocs reads it, without MkDocs.

The CLI and pytest plan a page's blocks from its source file before (or without) a build;
the lines they report must be the ones the built page has. :func:`split_front_matter` follows
MkDocs' ``mkdocs.utils.meta.get_data`` (MkDocs 1.6): YAML between a first line ``---`` and a
closing ``---`` or ``...``, or else MultiMarkdown-style ``key: value`` lines up to the first
blank one.

:func:`block_options` says which of a page's ``formula_check:`` defaults a block takes: a
default applies to the blocks it can apply to, a value the block states takes effect or is
an error.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import yaml

from formula_check.errors import SpecError
from formula_check.model import CARD_SECTIONS, Location
from formula_check.planning.presets import PRESETS, UNSET, preset_misfit

try:  # the loader MkDocs uses: the C one where PyYAML has it
    from yaml import CSafeLoader as _SafeLoader
except ImportError:  # pragma: no cover
    from yaml import SafeLoader as _SafeLoader

_YAML_BLOCK = re.compile(r"^-{3}[ \t]*\n(.*?\n)(?:\.{3}|-{3})[ \t]*\n", re.UNICODE | re.DOTALL)
_META_KEY = re.compile(r"^[ ]{0,3}(?P<key>[A-Za-z0-9_-]+):\s*(?P<value>.*)")
_META_MORE = re.compile(r"^([ ]{4}|\t)(\s*)(?P<value>.*)")


def split_front_matter(doc: str) -> tuple[str, dict[str, Any]]:
    """``doc`` without its front matter, and what the front matter says (``{}``: none).

    YAML that does not parse, or is not a mapping, stays in the text, as MkDocs keeps it
    (:func:`front_matter_problem` says why, when it held our defaults)."""
    found = _YAML_BLOCK.match(doc)
    if found:
        try:
            data = yaml.load(found.group(1), _SafeLoader)
        except Exception:  # as MkDocs: YAML it cannot read stays page text
            return doc, {}
        if not isinstance(data, dict):
            return doc, {}
        return doc[found.end() :].lstrip("\n"), data
    return _split_multimarkdown(doc)


def _split_multimarkdown(doc: str) -> tuple[str, dict[str, Any]]:
    """``Key: value`` lines (a line indented four spaces or a tab continues the value)."""
    data: dict[str, Any] = {}
    lines = doc.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    key = None
    while lines:
        line = lines.pop(0)
        if line.strip() == "":
            break
        if first := _META_KEY.match(line):
            key = first.group("key").lower().strip()
            value = first.group("value").strip()
            data[key] = f"{data[key]} {value}" if key in data else value
            continue
        more = _META_MORE.match(line)
        if more and key:
            data[key] += " {}".format(more.group("value").strip())
            continue
        lines.insert(0, line)
        break
    return "\n".join(lines).lstrip("\n"), data


def front_matter_lines(raw: str, markdown: str) -> int:
    """How many lines MkDocs stripped from the top of ``raw`` to get ``markdown``."""
    if not markdown or not raw.endswith(markdown):
        return 0 if not markdown else raw.count("\n") - markdown.count("\n")
    return raw[: len(raw) - len(markdown)].count("\n")


_FRONT_MATTER_END = frozenset({"---", "..."})


def front_matter_text(lines: Sequence[str]) -> str | None:
    """The YAML between a page's opening ``---`` and its closing ``---`` or ``...``."""
    if not lines or lines[0].strip() != "---":
        return None
    end = next((i for i in range(1, len(lines)) if lines[i].strip() in _FRONT_MATTER_END), None)
    return None if end is None else "\n".join(lines[1:end])


def front_matter(lines: Sequence[str]) -> dict[str, Any] | None:
    """YAML front matter at the top of ``lines`` (plain Markdown keeps it in the text), or
    None when there is none, or it is not a mapping, or not YAML (the blocks say so if it held
    their defaults: :func:`front_matter_problem`)."""
    text = front_matter_text(lines)
    if text is None:
        return None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError:
        return None
    return data if isinstance(data, dict) else None


_DEFAULTS_KEY = re.compile(r"^formula_check[ \t]*:", re.MULTILINE)


def front_matter_problem(lines: Sequence[str]) -> str:
    """Why front matter that sets ``formula_check`` defaults cannot be read, or nothing.

    MkDocs keeps front matter it cannot parse as page text, silently: the page's defaults
    would be dropped and its blocks checked without them."""
    text = front_matter_text(lines)
    if text is None or not _DEFAULTS_KEY.search(text):
        return ""  # not front matter of ours, or two rules around prose
    try:
        yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = mark.line + 2 if mark is not None else 1  # below the opening ---
        what = getattr(exc, "problem", None) or str(exc).split("\n")[0]
        return f"not valid YAML at line {line} ({what}), so none of its defaults apply"
    return ""


Refuse = Callable[[str, str], None]
"""``refuse(option, why)``: the option cannot take effect on this block, and why."""


@dataclass(frozen=True)
class OracleNames:
    """What a block's oracle has, by name: what a page's default may name for this block."""

    name: str
    dims: frozenset[str]
    weights: frozenset[str]
    """Its weights and parameters (a layer's parameter is read back, to be checked)."""
    inputs: frozenset[str]
    outputs: frozenset[str]
    """Its outputs and the intermediates it can draw (the FFN's ``hidden``)."""
    takes_mask: bool
    regimes: frozenset[str] = frozenset()
    """Its input regimes, by name."""


def block_options(
    defaults: Mapping[str, Any],
    own: Mapping[str, Any],
    where: Location,
    oracle: OracleNames | None = None,
) -> tuple[dict[str, Any], tuple[str, ...]]:
    """The options a block is checked with: its own, and the page's ``defaults`` that apply
    to it; with a note for each default left out, and why. A value of the block's own that
    cannot take effect is a :class:`SpecError` at ``where``, all such values at once.

    ``oracle``: what the block's oracle has (None: not known); a page's default that names
    what it lacks (a dim, a weight, an input, an output, a mask, another oracle's preset)
    is left out, or its foreign names are."""
    options = {**defaults, **own}
    problems: list[str] = []
    notes: list[str] = []

    def refuse(option: str, why: str) -> None:
        if option in own:
            problems.append(f"{option}= cannot take effect: {why}")
        elif options.pop(option, None) is not None:
            notes.append(f"the page's default {option}= does not apply to this block: {why}")

    if oracle is not None:
        _oracle_rules(options, own, oracle, refuse)
    preset = _preset_fills(options, own, refuse, notes)
    _kind_rules(options, preset, refuse)
    _dependent_rules(options, refuse)
    problems += _unopenable(own, options)
    if problems:
        raise SpecError("; ".join(problems), where)
    if oracle is not None:
        notes += _page_names_for(options, own, oracle)
    return options, tuple(notes)


def _oracle_rules(
    options: Mapping[str, Any], own: Mapping[str, Any], oracle: OracleNames, refuse: Refuse
) -> None:
    """What the block's oracle cannot take: a preset for another oracle (the block's own is
    an error that names the preset); of the page's defaults, a mask for an oracle without
    one, a sweep along a dim it lacks, a call=, returns= or regimes= naming what it does not
    have.
    The block's own such values are errors where they are checked (names, mask, call)."""
    misfit = preset_misfit(str(options.get("preset", "")), oracle.name)
    if misfit:
        refuse("preset", misfit)
    page = {option: value for option, value in options.items() if option not in own}
    _sizes_rules(page, oracle, refuse)
    _names_rules(page, oracle, refuse)


def _sizes_rules(page: Mapping[str, Any], oracle: OracleNames, refuse: Refuse) -> None:
    """A page's mask for an oracle that takes none; its sweep along a dim the oracle lacks."""
    for option in ("mask", "mask_convention", "mask_dims") if not oracle.takes_mask else ():
        if page.get(option, "none") != "none":
            refuse(option, f"oracle {oracle.name!r} takes no mask")
    swept = page.get("sweep_dim")
    if swept is not None and swept not in oracle.dims:
        refuse("sweep_dim", f"oracle {oracle.name!r} has no dim {swept!r} to sweep")
        if "sweep" in page:
            refuse("sweep", f"its sizes are for {swept}, a dim oracle {oracle.name!r} lacks")


def _names_rules(page: Mapping[str, Any], oracle: OracleNames, refuse: Refuse) -> None:
    """A page's call=, returns= or regimes= naming what the oracle does not have."""
    known = oracle.inputs | oracle.weights | oracle.dims | {"mask"}
    named = [word.partition("=")[0] for word in page.get("returns") or () if word != "_"]
    for option, foreign, what in (
        ("call", [n for n in _call_names(page.get("call") or ()) if n not in known], "no"),
        ("returns", [n for n in named if n not in oracle.outputs], "no output"),
        ("regimes", [n for n in page.get("regimes") or () if n not in oracle.regimes], "no regime"),
    ):
        if foreign:
            refuse(option, f"oracle {oracle.name!r} has {what} {', '.join(foreign)}")


_LITERAL = re.compile(r"true|false|none|[-+]?[\d.]+(?:e[-+]?\d+)?", re.IGNORECASE)


def _call_names(call: Sequence[str]) -> list[str]:
    """The names a ``call=`` passes (not its literals), at any depth, in order."""
    words = (token.partition("=")[2] if "=" in token else token for token in call)
    return [w for w in words if w and w not in ("[", "]", "(", ")") and not _LITERAL.fullmatch(w)]


def _preset_fills(
    options: dict[str, Any], own: Mapping[str, Any], refuse: Refuse, notes: list[str]
) -> Mapping[str, Any]:
    """What the block's preset (its own or the page's) sets. It fills an option the block
    leaves unset over the page's default; a block's own value it never overrides, and one
    that it would fill over (``kind="auto"``) is an error."""
    name = str(options.get("preset", "")).partition("@")[0]
    preset = PRESETS.get(name, {})
    if preset and own.get("kind") == "function":
        refuse("preset", f"preset {name} sets up a layer, and this block is a function")
        return {}
    for option, unset in UNSET.items():
        if option in own and own[option] == unset and preset.get(option, unset) != unset:
            refuse(option, f"preset {name} sets {option}={preset[option]!r}; leave it out")
    filled = [option for option in preset if option != "params"]
    filled += ["mask_dims"] if "mask_dims" in preset.get("params", {}) else []
    for option in filled:
        if option not in own and options.pop(option, None) is not None:
            notes.append(f"the page's default {option}= does not apply: preset {name} sets it")
    page_params = options.get("params") if "params" not in own else None
    taken = sorted(set(page_params or {}) & set(preset.get("params", {})))
    if page_params is not None and taken:
        options["params"] = {k: v for k, v in page_params.items() if k not in taken}
        notes.append(
            f"the page's default params {', '.join(taken)} do not apply: preset {name} sets them"
        )
    return preset


def _kind_rules(options: Mapping[str, Any], preset: Mapping[str, Any], refuse: Refuse) -> None:
    """A function is called, never built: weights, constructor keywords and perturbing."""
    if options.get("kind", preset.get("kind", "auto")) != "function":
        return
    refuse("weights", 'this block is a function (kind="function"), given its weights as arguments')
    refuse("init", 'this block is a function (kind="function"), called, never constructed')
    refuse(
        "perturb",
        'this block is a function (kind="function"); only a layer\'s own weights are moved',
    )


def _dependent_rules(options: Mapping[str, Any], refuse: Refuse) -> None:
    """Options that act on what another option turns on: a mask, timing, a sweep, the
    formula's compilation."""
    if options.get("mask", "none") == "none":
        for option in ("mask_convention", "mask_dims"):
            refuse(option, 'the block passes no mask (add mask="padding", "causal" or "both")')
    timing = options.get("timing")
    if timing is not None and not timing[0]:
        for option in ("timing_dims", "sweep"):
            refuse(option, "timing is off")
    if not options.get("sweep"):
        refuse("sweep_dim", "nothing is swept without sweep= (the sizes to time at)")
    if options.get("formula") == "off":
        refuse("symbols", "the formula check is off (formula=off), so no formula is compiled")


def _unopenable(own: Mapping[str, Any], options: Mapping[str, Any]) -> list[str]:
    """Card sections the block asks to draw open that its card will not have (``all``
    opens whichever it has)."""
    sections = own.get("open") or ()
    if tuple(sections) == CARD_SECTIONS:
        return []
    timing = options.get("timing")
    timed = timing is None or bool(timing[0])
    missing = {
        "timings": "" if timed else "timing is off",
        "scaling": "" if timed and options.get("sweep") else "it needs sweep= and timing on",
        "heatmaps": "heatmaps is none" if options.get("heatmaps") == () else "",
    }
    return [
        f"open={section} cannot take effect: the card has no {section} section ({missing[section]})"
        for section in sections
        if missing.get(section)
    ]


def _page_names_for(
    options: dict[str, Any], own: Mapping[str, Any], oracle: OracleNames
) -> list[str]:
    """The page's maps and lists less the names the block's oracle does not have: its
    weight map, its timing sizes and its heatmaps; a page mixing oracles gives each block
    its own. Emptied, the default is left out."""
    notes = []
    for option, names, what in (
        ("weights", oracle.weights, "weight or parameter"),
        ("timing_dims", oracle.dims, "dim"),
        ("heatmaps", oracle.outputs, "output or intermediate to draw"),
    ):
        value = options.get(option)
        if option in own or not value:  # heatmaps: none (an empty list) names nothing
            continue
        foreign = [name for name in value if name not in names]
        if not foreign:
            continue
        if isinstance(value, Mapping):
            kept: Any = {k: v for k, v in value.items() if k not in foreign}
        else:
            kept = tuple(name for name in value if name not in foreign)
        options[option] = kept
        if not kept:
            del options[option]
        verb = "does" if len(foreign) == 1 else "do"
        notes.append(
            f"the page's default {option} {', '.join(foreign)} {verb} not apply: this block's "
            f"oracle has no such {what}"
        )
    return notes
