r"""Commands that only change how a formula looks, read as a reader sees the formula.

Colour leaves what it colours (``\color{red}`` is a switch, ``\textcolor{red}{x}`` is ``x``),
a box leaves what it boxes (``\boxed``, ``\bbox[yellow]{x}``, ``\colorbox{c}{$x$}``), a
phantom is nothing at all (``\phantom{\sqrt{d_k}}`` hides the square root from the reader, and
so from the check), ``\smash`` and the overlaps leave their content, and spacing of any width
(``\kern1em``, ``\mkern2mu``, ``\hspace{2em}``), a label or a tag is not part of the value.

Each function reads the source at a position and gives the position after what it stepped
over; the lexer (see :mod:`.lexer`) decides what, if anything, remains a token.
"""

from __future__ import annotations

import re

from formula_check.latex.errors import LatexError

HIDDEN = frozenset({"phantom", "hphantom", "vphantom", "label", "tag", "tag*", "color"})
r"""Commands whose argument the reader never sees as part of the value: it vanishes with them
(``\color{red}`` then colours what follows, which stays)."""
COLOURING = frozenset({"textcolor", "colorbox"})
r"""``\textcolor{red}{x}``: the colour vanishes, its second argument stays, as a group."""
FRAMING = frozenset({"fcolorbox"})
r"""``\fcolorbox{frame}{fill}{x}``: two colours vanish, the third argument stays."""
KEEPING = frozenset({"boxed", "bbox", "smash", "fbox", "mathrlap", "mathllap", "mathclap"})
r"""Commands that leave their group as it is (``\bbox[yellow]{x}`` is ``{x}``), after an
optional ``[...]``."""
TEXT_BOXES = frozenset({"colorbox", "fcolorbox", "fbox"})
r"""Boxes whose content is text: ``\colorbox{c}{$x$}`` holds math between dollars."""
KERNS = frozenset({"kern", "mkern", "hskip", "mskip"})
r"""Spaces whose width follows unbraced: ``\kern1em``, ``\mkern-2mu``."""
WIDE = frozenset({"hspace", "hspace*", "mspace"})
r"""A space of a stated width in braces, ``\hspace{2em}``: a break, as ``\quad`` is."""
SILENT = frozenset(
    {"displaystyle", "textstyle", "scriptstyle", "scriptscriptstyle", "enspace", "thinspace"}
    | {"medspace", "thickspace", "negthinspace", "negmedspace", "negthickspace", "mathstrut"}
    | {"strut", "nonumber", "notag"}
)
"""Commands that leave nothing behind."""
_DIMENSION = re.compile(r"\s*[-+]?\s*(?:\d+\.?\d*|\.\d+)\s*(?:em|ex|mu|pt|pc|in|cm|mm|bp|sp)")


def skip_space(source: str, pos: int) -> int:
    """The first position at or after ``pos`` that is not white space."""
    while pos < len(source) and source[pos].isspace():
        pos += 1
    return pos


def skip_optional(source: str, pos: int) -> int:
    """Past a ``[...]`` at ``pos`` (white space first), or ``pos`` when there is none."""
    at = skip_space(source, pos)
    if not source.startswith("[", at):
        return pos
    close = source.find("]", at)
    return len(source) if close < 0 else close + 1


def group_end(source: str, pos: int, start: int, name: str) -> int:
    r"""The position after the braced group at ``pos`` (white space first): ``\{`` and
    ``\}`` inside it are delimiters, not braces. A :class:`LatexError` at ``start`` when no
    group is there, or it never closes."""
    scan = skip_space(source, pos)
    if not source.startswith("{", scan):
        raise LatexError(f"expected '{{' after \\{name}", source, start)
    depth = 0
    while scan < len(source):
        char = source[scan]
        if char == "\\":
            scan += 2
            continue
        depth += {"{": 1, "}": -1}.get(char, 0)
        scan += 1
        if depth == 0:
            return scan
    raise LatexError(f"the argument of \\{name} is never closed", source, start)


def skip_dimension(source: str, pos: int, start: int, name: str) -> int:
    r"""Past the width of ``\kern1em``; a :class:`LatexError` at ``start`` without one."""
    found = _DIMENSION.match(source, pos)
    if found is None:
        raise LatexError(f"expected a width after \\{name}, as in \\{name}1em", source, start)
    return found.end()


def dollars(source: str, pos: int) -> tuple[int, ...]:
    r"""The positions of the ``$`` that open and close the math of a text box's group at
    ``pos`` (``{$x$}``), to be read past; none when the group is not math between dollars."""
    at = skip_space(source, pos)
    if not source.startswith("{", at):
        return ()
    inner = skip_space(source, at + 1)
    if not source.startswith("$", inner):
        return ()
    close = source.find("$", inner + 1)
    after = skip_space(source, close + 1) if close > 0 else -1
    return (inner, close) if after >= 0 and source.startswith("}", after) else ()
