"""The Python-Markdown extension: formula fences -> math + a verdict card (the core's face).

Flow per page: a preprocessor (priority 28: after whitespace normalisation at 30, before the
``meta`` extension at 27 and SuperFences at 25) sees the page with its real line numbers,
finds every formula block and its python snippet, checks them all in one ``check_many``
batch, and rewrites each formula fence header to ```` ```formula fc_line="42" ````. SuperFences
then calls our formatter per block; the header carries the line because SuperFences passes
formatters no line numbers, and replacing the author's header (rather than adding to it)
means a malformed header still reaches the formatter and shows its error card. The formatter
only renders. The python fence is left alone and highlights as usual.

Options (``extension_configs={"formula_check": {...}}``): ``page`` (path shown in messages;
default: the page Zensical is rendering, else ``<page>``), ``root`` (project folder: snippets,
cache; default the working folder), ``language`` (a page's front matter ``language:`` wins),
``fail_on`` (statuses that raise ``SuperFencesException``, which is what fails a Zensical
build; default none),
``image_dir``/``image_url`` (write figures there; default inline ``data:`` URIs), ``workers``,
``cache``, ``cache_dir``, ``timeout``, ``timing``, ``oracles``, ``memory_limit_mb``,
``fork_workers``; ``engine`` (share an :class:`Engine`) and ``session`` (the MkDocs plugin's shared
:class:`~formula_check.session.FormulaSession`). ``check=False`` checks nothing: each formula
renders as its display math alone, with no card (the plugin's ``enabled: false``).
"""

from __future__ import annotations

import re
from concurrent.futures import Future
from pathlib import Path
from typing import Any

from markdown import Markdown
from markdown.extensions import Extension
from markdown.preprocessors import Preprocessor
from pymdownx.superfences import SuperFencesCodeExtension, SuperFencesException

from formula_check.errors import FormulaCheckError
from formula_check.model import Location, Status
from formula_check.oracles import load_oracle
from formula_check.pages.blocks import PageBlock, page_blocks
from formula_check.pages.fence_scan import FormulaFence, commented_formulas, find_formulas
from formula_check.pages.front_matter import front_matter, front_matter_lines
from formula_check.render import labels_for
from formula_check.render.figure_cache import FigureCache
from formula_check.results import CheckResult, SnippetFailure
from formula_check.session import (
    SHARED_ENGINES,
    DataUriImages,
    DirectoryImages,
    FormulaSession,
    PageContext,
    is_failure,
)
from formula_check.session.options import DEFAULTS, Options

FENCE_NAME = "formula"
_OPENING = re.compile(r"^(?P<indent>[ \t>]*)(?P<fence>`{3,}|~{3,})")


UNCHECKED = "arithmatex fc-unchecked"
"""The classes of a formula rendered with the checks off (the plugin anchors it there)."""


def display_math(latex: str, classes: str = "arithmatex") -> str:
    """The HTML ``pymdownx.arithmatex`` (generic mode) writes for a ``$$`` block."""
    escaped = latex.strip().replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return f'<div class="{classes}">\\[\n{escaped.replace(chr(34), "&quot;")}\n\\]</div>'


def failures_message(failures: list[str]) -> str:
    """What a failing page raises: its first failure's line first (``page:LINE [id]: …``,
    the line a terminal or an editor jumps to), then the others."""
    more = len(failures) - 1
    tail = f"\n{more} more failing on this page:\n" + "\n".join(failures[1:]) if more else ""
    return failures[0] + tail


def zensical_page(md: Markdown, lines: list[str], root: Path) -> PageContext | None:
    """The page Zensical is rendering, from its ``rendering_context`` preprocessor, if any.

    Zensical has no plugin API to tell us the page, but registers its page and config on every
    Markdown instance. It strips front matter before Markdown sees the text (handing it over as
    ``meta``), so the source is read again to count the lines cut from its top.
    """
    try:
        context = md.preprocessors["rendering_context"]
    except KeyError:
        return None
    page, config = getattr(context, "page", None), getattr(context, "config", None)
    if page is None or not isinstance(config, dict):
        return None
    docs = Path(config.get("root_dir", ".")) / config.get("docs_dir", "docs")
    source = (docs / page.path).resolve()
    shown = source.relative_to(root).as_posix() if source.is_relative_to(root) else page.path
    try:
        raw = source.read_text(encoding="utf-8-sig")
    except (OSError, UnicodeDecodeError):  # unreadable: its lines are counted from its top
        raw = ""
    # Markdown has appended blank lines to the text by now: compare without trailing space.
    offset = front_matter_lines(raw.rstrip(), "\n".join(lines).rstrip()) if raw else 0
    return PageContext(path=shown, line_offset=offset, meta=dict(page.meta), url=page.url)


class FormulaPreprocessor(Preprocessor):
    """Finds, checks and tags every formula block of the page (see the module docstring)."""

    def __init__(self, md: Markdown, extension: FormulaCheckExtension) -> None:
        super().__init__(md)
        self.extension = extension

    def run(self, lines: list[str]) -> list[str]:
        """Check the page's blocks in one batch, then rewrite their fence headers."""
        self.extension.register_fence(self.md)
        if not self.extension.check:
            return _tagged(lines, find_formulas(lines))
        session = self.extension.session
        if session.page.path == PageContext.path:
            zensical = zensical_page(self.md, lines, session.settings.root)
            if zensical is not None:
                session.enter_page(zensical)
        page = session.page
        meta = page.meta if page.meta is not None else front_matter(lines)
        blocks = page_blocks(
            lines,
            page=page.path,
            line_offset=page.line_offset,
            meta=meta,
            settings=session.settings,
            front_matter_error=page.front_matter_error,
        )
        answers = session.answers_for(blocks)
        self.extension.labels = session.labels_for_page(meta)
        for block, answer in zip(blocks, answers, strict=True):
            self.extension.blocks[block.fence.line] = (block, answer)
        self.extension.failures = [
            answer.headline()
            for answer in answers
            if self.extension.raises
            and isinstance(answer, CheckResult)
            and is_failure(answer, session.fail_on)
        ]
        return _tagged(lines, [block.fence for block in blocks])


def _tagged(lines: list[str], fences: list[FormulaFence]) -> list[str]:
    """``lines`` with each formula fence's header replaced by one SuperFences surely parses,
    carrying the fence's page line, and a closing fence added for one left open."""
    lines = list(lines)
    for fence in fences:
        opening = _OPENING.match(lines[fence.row])
        assert opening is not None  # the scanner matched this very line
        lines[fence.row] = f'{opening[0]}{FENCE_NAME} fc_line="{fence.line}"'
        if not fence.closed:
            lines.append(opening[0])  # so SuperFences still hands us the block
    for row in commented_formulas(lines):  # hidden by a comment: plain text, not a card
        opening = _OPENING.match(lines[row])
        assert opening is not None
        lines[row] = f"{opening['indent']}{opening['fence']}text"
    return lines


class FormulaCheckExtension(Extension):
    """Registers the preprocessor and the ``formula`` SuperFences fence."""

    def __init__(self, **kwargs: Any) -> None:
        # Object-valued options default to "" because Markdown passes None defaults through
        # parseBoolValue, which would turn an Engine into True.
        self.config = {
            "session": ["", "A FormulaSession shared across pages (the MkDocs plugin's)"],
            "engine": ["", "An Engine to share (tests, tools); default: one per settings"],
            "page": ["<page>", "Page path shown in messages"],
            "root": ["", "Project folder for snippets and the cache; default: working folder"],
            "language": ["en", "Card language (en, zh)"],
            "fail_on": [[], "Statuses that raise SuperFencesException (fails Zensical builds)"],
            "image_dir": ["", "Folder to write figure files to; default: inline data: URIs"],
            "image_url": ["", "URL prefix of image_dir as seen from the page"],
            "workers": [DEFAULTS.workers, "Worker processes"],
            "cache": [DEFAULTS.cache, "Reuse results of unchanged checks"],
            "cache_dir": ["", f"Cache folder (default {DEFAULTS.cache_dir} under root)"],
            "timeout": [DEFAULTS.timeout, "Default seconds per check"],
            "timing": [DEFAULTS.timing, "Time snippets (off: faster builds)"],
            "oracles": [[], "User oracles as package.module:attr"],
            "memory_limit_mb": [DEFAULTS.memory_limit_mb, "Worker memory limit (0: none)"],
            "fork_workers": [DEFAULTS.fork_workers, "Fork workers from one TensorFlow import"],
            "keep_alive": [DEFAULTS.keep_alive, "Seconds to keep TensorFlow for the next run"],
            "env": [[], "Variables of the build's environment the checks may read, by name"],
            "formula": [DEFAULTS.formula, "Check each formula: on, off, or required (fails)"],
            "check": [True, "Check formulas; off: each renders as display math, no card"],
        }
        super().__init__(**kwargs)
        self.check = bool(self.getConfig("check"))
        self.blocks: dict[int, tuple[PageBlock, CheckResult | Future[CheckResult]]] = {}
        self.failures: list[str] = []
        self.raises = True
        """Whether a failing block stops the page (Zensical, plain Markdown): not under the
        MkDocs plugin, which reports every failure of the site instead."""
        self.session: FormulaSession = self._make_session()
        self.labels = self.session.labels  # this page's, set by the preprocessor

    def extendMarkdown(self, md: Markdown) -> None:  # noqa: N802  (Markdown's API name)
        """Add the preprocessor (the fence is added on the first run, see register_fence)."""
        md.registerExtension(self)
        md.preprocessors.register(FormulaPreprocessor(md, self), "formula_check", 28)

    def reset(self) -> None:
        """Forget the previous document's blocks (a Markdown instance may convert many)."""
        self.blocks.clear()
        self.failures = []

    def register_fence(self, md: Markdown) -> None:
        """Add our fence to SuperFences, whichever of the two extensions loaded first."""
        try:
            fenced = md.preprocessors["fenced_code_block"]
        except KeyError:
            fenced = None
        superfences = getattr(fenced, "extension", None)
        if not isinstance(superfences, SuperFencesCodeExtension):
            raise FormulaCheckError(
                "formula_check needs pymdownx.superfences: add it to markdown_extensions"
            )
        if not any(entry["name"] == FENCE_NAME for entry in superfences.superfences):
            superfences.extend_super_fences(FENCE_NAME, self.format, self.validate, None)

    def validate(
        self,
        language: str,
        inputs: dict[str, str],
        options: dict[str, str],
        attrs: dict[str, str],
        md: Markdown,
    ) -> bool:
        """Accept every formula fence: a bad one must show an error card, not plain code."""
        options["fc_line"] = inputs.get("fc_line", "")
        return True

    def format(
        self, src: str, language: str, md: Markdown, options: dict[str, str], **kwargs: Any
    ) -> str:
        """Math as arithmatex would write it, then the card. Raises only SuperFencesException."""
        if not self.check:
            return display_math(src, UNCHECKED)
        line = options.get("fc_line", "")
        found = self.blocks.get(int(line)) if line.isdigit() else None
        if found is None:
            return display_math(src) + "\n" + self._unseen_card(src)
        block, answer = found
        if self.failures:
            raise SuperFencesException(failures_message(self.failures))
        if isinstance(answer, Future):  # still being checked: the plugin fills it in later
            card = self.session.placeholder(answer, block, self.labels)
        else:
            card = self.session.card(answer, block, self.labels)
        return display_math(block.latex) + "\n" + card

    def _unseen_card(self, src: str) -> str:
        # Only a fence our scanner could not see gets here (e.g. built by another extension).
        where = Location(self.session.page.path)
        failure = SnippetFailure(
            "SpecError",
            "formula fence not found by formula_check's preprocessor; write its header as "
            '```formula oracle="..." on its own line',
            where,
        )
        result = CheckResult("unknown", where, "?", Status.ERROR, failure=failure)
        return self.session.card(result, None, self.labels)

    def _make_session(self) -> FormulaSession:
        given = self.getConfig("session")
        if isinstance(given, FormulaSession):
            # The MkDocs plugin's: it logs each failure itself (``--strict`` fails on them);
            # raising here would stop the build at the first one, with a traceback.
            self.raises = False
            return given
        root = Path(self.getConfig("root") or ".").resolve()
        options = self._options()
        for reference in options.oracles if self.check else ():
            load_oracle(reference, root, options.env)
        settings = options.engine(root)
        engine = self.getConfig("engine")
        image_dir = self.getConfig("image_dir")
        images = (
            DirectoryImages(Path(image_dir), self.getConfig("image_url") or image_dir)
            if image_dir
            else DataUriImages()
        )
        return FormulaSession(
            settings=options.pages(root),
            engine=engine or None,
            engine_factory=lambda: SHARED_ENGINES.get(settings),
            labels=labels_for(self.getConfig("language")),
            images=images,
            fail_on=options.fail_on,
            page=PageContext(self.getConfig("page")),
            figure_cache=FigureCache(settings.cache_dir / "figures" if settings.cache else None),
        )

    def _options(self) -> Options:
        """The extension's keyword options as the checker's settings, checked like the
        plugin's (an empty ``cache_dir``: the default folder)."""
        options = Options(
            workers=int(self.getConfig("workers")),
            timeout=float(self.getConfig("timeout")),
            cache=bool(self.getConfig("cache")),
            cache_dir=str(self.getConfig("cache_dir") or DEFAULTS.cache_dir),
            fail_on=frozenset(self.getConfig("fail_on")),
            oracles=tuple(self.getConfig("oracles")),
            timing=bool(self.getConfig("timing")),
            memory_limit_mb=int(self.getConfig("memory_limit_mb")),
            fork_workers=bool(self.getConfig("fork_workers")),
            keep_alive=float(self.getConfig("keep_alive")),
            env=_names(self.getConfig("env")),
            formula=str(self.getConfig("formula")),
        )
        problem = options.problem()
        if problem:
            raise FormulaCheckError(f"formula_check {problem}")
        return options


def _names(value: Any) -> tuple[str, ...]:
    """The ``env`` option as a tuple of names (one name alone will do)."""
    return tuple(value) if isinstance(value, (list, tuple)) else (value,)


def makeExtension(**kwargs: Any) -> FormulaCheckExtension:  # noqa: N802  (Markdown's API name)
    """Entry point for ``markdown.Markdown(extensions=["formula_check.faces.markdown_ext"])``."""
    return FormulaCheckExtension(**kwargs)
