"""The MkDocs face: lifecycle, a site-wide batch of checks, logging, assets and the report.

The hooks are glue. What they add to the Markdown extension alone:

* one warm :class:`Engine` for the life of ``mkdocs serve`` (``on_startup``/``on_shutdown``
  make MkDocs keep this plugin instance across rebuilds);
* every block of every page checked in one ``check_many`` batch in ``on_files``, before any
  page renders, so ``workers: 2`` parallelises across the whole site;
* each failing result logged as a WARNING ``docs/page.md:LINE [id]: status: detail``, so
  ``--strict`` fails and lists them all. The line goes to the plugin logger's underlying
  ``mkdocs.plugins.*`` logger without the ``formula_check:`` prefix, so it starts with the
  clickable ``page:line``; a block whose formula could not be compiled gets an INFO line
  saying so (its code was compared with the oracle only);
* figures written once under ``assets/formula-check/`` (content-hashed names), the stylesheet,
  an offline MathJax, and a report page plus ``formula-check-report.json``.
"""

from __future__ import annotations

import contextlib
import re
import sys
from collections.abc import Iterator
from html import escape
from pathlib import Path
from typing import Any

from mkdocs.config.defaults import MkDocsConfig
from mkdocs.exceptions import PluginError
from mkdocs.livereload import LiveReloadServer
from mkdocs.plugins import BasePlugin, event_priority, get_plugin_logger
from mkdocs.structure.files import File, Files, InclusionLevel
from mkdocs.structure.pages import Page
from mkdocs.utils import get_relative_url

from . import assets, serving
from .ci_formats import formula_note
from .config import FormulaCheckConfig, out_of_range
from .engine import Engine
from .errors import FormulaCheckError, MissingTensorFlowError, PageError
from .markdown_ext import UNCHECKED
from .model import CheckResult
from .oracles import load_oracle
from .pages import (
    PageBlock,
    Settings,
    decode_page,
    front_matter_lines,
    front_matter_problem,
    source_blocks,
)
from .render import Figure, Labels, labels_for, report_body, report_json
from .render.figure_cache import FigureCache
from .session import FormulaSession, PageContext, figure_name, is_failure

log = get_plugin_logger(__name__).logger
REPORT_PAGE = "formula-check-report.md"
REPORT_JSON = "formula-check-report.json"


class SiteImages:
    """Collects figures while pages render; ``on_post_build`` writes them into the site."""

    def __init__(self) -> None:
        self.files: dict[str, bytes] = {}

    def url(self, figure: Figure, page: PageContext) -> str:
        """Remember the figure and link to it relative to the page."""
        name = figure_name(figure)
        self.files[name] = figure.data
        return get_relative_url(f"{assets.ASSET_DIR}/{name}", page.url)

    def write(self, site_dir: Path) -> None:
        """Write every collected figure under ``site_dir``."""
        folder = site_dir / assets.ASSET_DIR
        folder.mkdir(parents=True, exist_ok=True)
        for name, data in self.files.items():
            (folder / name).write_bytes(data)


class FormulaCheckPlugin(BasePlugin[FormulaCheckConfig]):  # type: ignore[no-untyped-call]
    """``plugins: [formula-check]``: verify every formula block of the site."""

    def __init__(self) -> None:
        self.engine: Engine | None = None
        self.engine_key: tuple[Any, ...] = ()
        self.session: FormulaSession | None = None
        self.images = SiteImages()
        self.blocks: list[PageBlock] = []
        self.settings = Settings(Path.cwd())
        self.pages: list[File] = []
        self.report: File | None = None
        self.watch: set[Path] = set()
        self.watching: set[Path] = set()
        self.server: LiveReloadServer | None = None
        self.folders: serving.FolderKeeper | None = None
        self.later_watched: list[str] = []
        self.started_engine: Engine | None = None
        self.serving = False
        self.figures: FigureCache | None = None
        self.templates = serving.TemplateCache()
        self.theme_listing = serving.ThemeListing()

    # -- lifecycle: one instance and one warm engine across `mkdocs serve` rebuilds ------------

    def on_startup(self, *, command: str, dirty: bool) -> None:
        """Remember whether we serve (user oracle modules are re-imported on each rebuild)."""
        self.serving = command == "serve"

    def on_shutdown(self) -> None:
        """Stop the checks still queued (Ctrl-C) and the workers."""
        if self.session is not None:
            self.session.shutdown()
        self._close_engine()
        if self.folders is not None:
            self.folders.close()

    def _close_engine(self) -> None:
        if self.engine is not None:
            self.engine.close()
            self.engine = None

    # -- configuration --------------------------------------------------------------------

    def on_config(self, config: MkDocsConfig) -> MkDocsConfig | None:
        """Validate options, load user oracles, register the extension and the assets."""
        root = Path(config.config_file_path or ".").resolve().parent
        self.settings = Settings(root, float(self.config.timeout), self.config.timing)
        if not self.config.enabled:  # also when turned off during `mkdocs serve`: its
            self._close_engine()  # workers go (about 0.5 GB each); the disk cache stays
            self._load_oracles(root)  # NumPy only: blocks naming them are still well formed
            self.session = None
            self.blocks = []
            self.report = None
            _register_extension(config, {"check": False})  # the math still renders
            self._register_assets(config)
            return config
        if self._fast_serve():
            self.theme_listing.attach(config.theme)  # MkDocs lists the theme after this
        self._validate_options()
        self._load_oracles(root)
        self.session = self._make_session(root, config)
        _register_extension(config, {"session": self.session})
        self._register_assets(config)
        return config

    def _validate_options(self) -> None:
        problem = out_of_range(self.config)
        if problem:
            raise PluginError(f"formula-check: {problem}")

    def _load_oracles(self, root: Path) -> None:
        for reference in self.config.oracles:
            module = reference.partition(":")[0]
            if self.serving:
                sys.modules.pop(module, None)  # pick up edits made while serving
            try:
                load_oracle(reference, root)
            except FormulaCheckError as exc:
                raise PluginError(f"formula-check: option 'oracles': {exc.message}") from None
            self.watch.update(_module_files(module, root))

    def _make_session(self, root: Path, config: MkDocsConfig) -> FormulaSession:
        language = self._language(config)
        self.images = SiteImages()
        fail_on = frozenset(self.config.fail_on)
        return FormulaSession(
            settings=self.settings,
            labels=labels_for(language),
            images=self.images,
            engine_factory=lambda: self._engine(root),
            fail_on=frozenset(),  # the plugin logs failures; the extension must not raise
            on_result=lambda result: _log_result(result, fail_on),
            figure_cache=self._figure_cache(root),
            superseded=lambda: self.server is not None and serving.rebuild_wanted(self.server),
        )

    def _language(self, config: MkDocsConfig) -> str:
        return str(self.config.language or config.theme.get("language") or "en")

    def _figure_cache(self, root: Path) -> FigureCache:
        """One figure cache for the plugin's life: `serve` rebuilds reuse drawn figures."""
        directory = root / self.config.cache_dir / "figures" if self.config.cache else None
        if self.figures is None or self.figures.directory != directory:
            self.figures = FigureCache(directory)
        return self.figures

    def _engine(self, root: Path) -> Engine:
        key = (
            root,
            self.config.workers,
            self.config.cache,
            self.config.cache_dir,
            self.config.memory_limit_mb,
            self.config.fork_workers,
            self.config.keep_alive,
            tuple(self.config.env),
        )
        if self.engine is None or key != self.engine_key:
            self._close_engine()
            cache_dir = root / self.config.cache_dir
            self.engine = Engine(
                root,
                workers=self.config.workers,
                cache_dir=cache_dir,
                use_cache=self.config.cache,
                memory_limit_mb=self.config.memory_limit_mb,
                fork=self.config.fork_workers,
                keep_alive=float(self.config.keep_alive),
                env=tuple(self.config.env),
            )
            self.engine_key = key
        return self.engine

    def _register_assets(self, config: MkDocsConfig) -> None:
        if self.config.mathjax:
            try:
                assets.mathjax_root()
            except assets.MissingMathJaxError as exc:
                raise PluginError(f"formula-check: option 'mathjax': {exc}") from None
        for path in assets.stylesheets():
            if path not in config.extra_css:
                config.extra_css.append(path)
        for path in assets.scripts(mathjax=self.config.mathjax):
            if path not in [str(script) for script in config.extra_javascript]:
                config.extra_javascript.append(path)

    # -- the site-wide batch ---------------------------------------------------------------

    def on_files(self, files: Files, *, config: MkDocsConfig) -> Files | None:
        """Add the assets, then start checking every block of every page, in page order.

        The checks run in the background while MkDocs renders: a card whose result is not in
        yet is a placeholder until :meth:`on_post_page` (the first pages wait for TensorFlow's
        import, the later ones mostly find their results ready).
        """
        for asset in assets.site_assets(mathjax=self.config.mathjax):
            _add_asset(files, config, asset)
        if self.session is None:  # turned off: the report page says so (links to it hold),
            # and each formula keeps its card's anchor
            self.blocks = [b for file in files.documentation_pages() for b in self._blocks(file)]
            fail_on = frozenset(self.config.fail_on)
            for block in self.blocks:  # a fence that could never be checked is the page's
                if block.error is not None:  # fault, and needs no worker to be told
                    _log_result(block.error_result(), fail_on)
            if self.config.report:
                labels = labels_for(self._language(config))
                content = f"# {labels.report_title}\n\n{labels.report_disabled}\n"
                files.append(_report_file(config, content))
            return files
        with _plugin_errors():
            self.session.wait_all()  # a rebuild starts after the last batch has ended
        self.session.known.clear()
        self.session.placeholders.clear()  # left by pages an earlier build did not finish
        self.pages = list(files.documentation_pages())
        self.blocks = [block for file in self.pages for block in self._blocks(file)]
        self.session.check_in_background(self.blocks)
        self.watch.update(_snippet_files(self.blocks, self.settings.root))
        if self.config.report:
            self.report = _report_page(files, config, self.session.labels, self.session.nonce)
            files.append(self.report)
        return files

    def _blocks(self, file: File) -> list[PageBlock]:
        page = _page_path(file, self.settings.root)
        source = decode_page(file.content_bytes, page)
        if source.problem is not None:
            _render_as_decoded(file, source.text)
        return source_blocks(source, page=page, settings=self.settings)

    def on_page_markdown(
        self, markdown: str, *, page: Page, config: MkDocsConfig, files: Files
    ) -> str | None:
        """Tell the extension which page it renders and how many lines MkDocs cut off its top."""
        if self.session is not None:
            raw = page.file.content_string
            self.session.page = PageContext(
                path=_page_path(page.file, self.settings.root),
                line_offset=front_matter_lines(raw, markdown),
                meta=dict(page.meta),
                url=page.url,
                front_matter_error=front_matter_problem(markdown.split("\n")),
            )
        return markdown

    def on_page_content(
        self, html: str, *, page: Page, config: MkDocsConfig, files: Files
    ) -> str | None:
        """Tell MkDocs' anchor validation about the cards' ``#fc-<id>`` anchors: a fence's
        HTML is stashed before MkDocs looks for ids in raw HTML, so it never sees them. With
        the checks off there is no card: the anchor goes on the formula itself."""
        if not self.blocks or page.present_anchor_ids is None:
            return html
        path = _page_path(page.file, self.settings.root)
        anchors = [
            f"fc-{block.block_id}"
            for block in self.blocks
            if block.location.path == path and not isinstance(block.error, PageError)
        ]  # a problem of the whole page (not UTF-8) is no formula of it
        if self.session is None:
            unchecked = f'<div class="{UNCHECKED}">'
            if html.count(unchecked) != len(anchors):  # not the formulas we found: no guess
                log.info(
                    f"{path}: {len(anchors)} formula blocks in the source but "
                    f"{html.count(unchecked)} on the page (another extension added or hid "
                    "some): its formulas get no #fc- anchors while checks are off"
                )
                return html
            pieces = html.split(unchecked)
            html = pieces[0] + "".join(
                f'<div class="{UNCHECKED}" id="{escape(anchor, quote=True)}">{piece}'
                for anchor, piece in zip(anchors, pieces[1:], strict=True)
            )
        page.present_anchor_ids.update(anchors)
        return html

    # -- output ----------------------------------------------------------------------------

    @event_priority(100)  # before plugins that rewrite the HTML (minifiers) see placeholders
    def on_post_page(self, output: str, *, page: Page, config: MkDocsConfig) -> str | None:
        """Put the cards (and the report's table) in place of their placeholders."""
        if self.session is None:
            return output
        with _plugin_errors():
            output = self.session.fill_placeholders(output)
            if self.report is not None and page.file is self.report:
                output = output.replace(_report_placeholder(self.session.nonce), self._report())
        return output

    def _report(self) -> str:
        assert self.session is not None and self.report is not None
        self.session.wait_all()
        known = self.session.known  # a batch stopped by a newer edit left some blocks out
        results = [known[block.location][1] for block in self.blocks if block.location in known]
        urls = {_page_path(f, self.settings.root): f.url for f in self.pages}
        report_url = self.report.url

        def page_url(result: CheckResult) -> str:
            target = get_relative_url(urls.get(result.location.path, ""), report_url)
            return (
                target if not target.endswith("..") else target + "/"
            ) + f"#fc-{result.block_id}"

        return report_body(results, self.session.labels, page_url)

    def on_build_error(self, *, error: Exception) -> None:
        """A failed build still lets its checks end before the next build starts."""
        if self.session is not None:
            with contextlib.suppress(Exception):
                self.session.wait_all()

    def on_post_build(self, *, config: MkDocsConfig) -> None:
        """Write the figures and the JSON report (every result, including late ones)."""
        if self.session is None:
            self._watch_new_files()
            return
        with _plugin_errors():
            self.session.wait_all()  # every result is logged before the build ends
        for _, result in self.session.known.values():  # helpers a snippet imported, however
            self.watch.update(self.settings.root / name for name in result.imports)  # deep
        self._watch_new_files()
        lost = sorted({p.page.path for p in self.session.placeholders.values()})
        if lost:
            log.warning(
                f"cards missing from {', '.join(lost)}: their placeholders were removed or "
                "rewritten before formula-check could fill them (a theme override or another "
                "plugin changing the page's HTML); the checks themselves ran and are logged above"
            )
            self.session.placeholders.clear()
        if self.serving and any(block.spec is not None for block in self.blocks):
            # a first build served from the cache started no worker; start it now, so that
            # the first edit of a block does not wait for the TensorFlow import (once per
            # engine: a start that failed, without TensorFlow, is not retried every rebuild)
            engine = self.session.get_engine()
            if self.started_engine is not engine:
                self.started_engine = engine
                engine.start_in_background()
        site_dir = Path(config.site_dir)
        self.images.write(site_dir)
        if self.config.report:
            results = [result for _, result in self.session.known.values()]
            (site_dir / REPORT_JSON).write_text(report_json(results), encoding="utf-8")

    def on_env(self, env: Any, *, config: MkDocsConfig, files: Files) -> Any:
        """Under ``mkdocs serve`` (``fast_serve``), reuse the theme's compiled templates (its
        file list is kept from ``on_config``, before MkDocs lists it)."""
        if self._fast_serve():
            return self.templates.attach(env)
        return env

    def _fast_serve(self) -> bool:
        return self.serving and self.config.enabled and self.config.fast_serve

    def on_serve(
        self, server: LiveReloadServer, *, config: MkDocsConfig, builder: Any
    ) -> LiveReloadServer | None:
        """Rebuild when a snippet file or a user oracle module changes; with ``fast_serve``,
        look for changes more often than MkDocs' every 0.5 s."""
        self.server = server
        self.folders = serving.FolderKeeper(server)
        self.later_watched = [str(path) for path in config.watch]  # MkDocs adds them next
        self._watch_new_files(quicken=True)
        return server

    def _watch_new_files(self, *, quicken: bool = False) -> None:
        """Watch the snippet files and oracle modules not watched yet: a file a page starts
        using while ``mkdocs serve`` runs is watched from the rebuild that found it. With
        ``fast_serve``, the polling interval is sized anew for all that is watched."""
        if self.server is None:
            return
        for path in sorted(self.watch - self.watching):
            watched = path
            if not path.exists():  # named before it exists: its folder tells when it appears
                watched = next((p for p in path.parents if p.is_dir()), path)
                if watched in self.watching or not watched.is_dir():
                    continue
                self.server.watch(str(watched), recursive=False)
            else:
                self.server.watch(str(path))
                if path.is_dir() and self.folders is not None:
                    self.folders.add(str(path))  # its watch ends if it is removed
            self.watching.add(watched)
            quicken = True
        if quicken and self.config.enabled and self.config.fast_serve:  # on_serve: serving
            serving.quicken_polling(self.server, self.later_watched)


def _log_result(result: CheckResult, fail_on: frozenset[str]) -> None:
    if is_failure(result, fail_on):
        log.warning(result.headline())
    elif not result.outcome_ok or result.expected_failure:
        log.info(result.headline())
    else:
        log.debug(result.headline())
    note = formula_note(result)
    if note is not None:  # fails nothing, but the formula went unchecked: not only on the card
        log.info(note)


def _register_extension(config: MkDocsConfig, options: dict[str, Any]) -> None:
    names = [ext if isinstance(ext, str) else str(ext) for ext in config.markdown_extensions]
    if "pymdownx.superfences" not in names:
        config.markdown_extensions.append("pymdownx.superfences")
    if "formula_check" not in names:
        config.markdown_extensions.append("formula_check")
    config.mdx_configs["formula_check"] = options


def _render_as_decoded(file: File, text: str) -> None:
    """MkDocs reads a page again to render it, and stops the whole build at a byte that is
    not UTF-8: it renders ``text`` instead (such bytes shown as U+FFFD; the page's error block
    says where), still known by its own file for its messages, edit link and ``serve``."""
    path = file.abs_src_path
    file.content_string = text
    file.abs_src_path = path


def _page_path(file: File, root: Path) -> str:
    """The page as messages name it: relative to the project folder (``docs/attention.md``)."""
    if file.abs_src_path:
        path = Path(file.abs_src_path).resolve()
        if path.is_relative_to(root):
            return path.relative_to(root).as_posix()
    return file.src_uri


def _add_asset(files: Files, config: MkDocsConfig, asset: assets.Asset) -> None:
    uri = f"{assets.ASSET_DIR}/{asset.name}"
    if files.get_file_from_path(uri) is not None:
        return  # the author ships their own copy: theirs wins
    if asset.source is not None:
        files.append(File.generated(config, uri, abs_src_path=str(asset.source)))
    else:
        files.append(File.generated(config, uri, content=asset.text))


def _report_page(files: Files, config: MkDocsConfig, labels: Labels, nonce: str) -> File:
    """A generated page listing every block: its title now, its table once every check is done
    (:meth:`FormulaCheckPlugin.on_post_page`); links are relative, the table being raw HTML."""
    content = f"# {labels.report_title}\n\n{_report_placeholder(nonce)}\n"
    return _report_file(config, content)


def _report_file(config: MkDocsConfig, content: str) -> File:
    """The report page. A site with a ``nav`` that does not list it gets it as a page outside
    the nav, as MkDocs' ``not_in_nav`` would make it: ``validation: nav: omitted_files`` set
    to ``warn`` must not fail a strict build over a page the plugin added."""
    file = File.generated(config, REPORT_PAGE, content=content)
    if config.nav is not None and REPORT_PAGE not in _nav_paths(config.nav):
        file.inclusion = InclusionLevel.NOT_IN_NAV
    return file


def _nav_paths(nav: Any) -> set[str]:
    """Every string in a ``nav`` setting: the pages and links it names."""
    if isinstance(nav, str):
        return {nav}
    if isinstance(nav, dict):
        return {path for value in nav.values() for path in _nav_paths(value)}
    if isinstance(nav, list):
        return {path for item in nav for path in _nav_paths(item)}
    return set()


def _report_placeholder(nonce: str) -> str:
    return f'<div class="fc-pending" data-fc-report="{nonce}"></div>'


@contextlib.contextmanager
def _plugin_errors() -> Iterator[None]:
    """A missing TensorFlow stops the build with one clear message, not a traceback."""
    try:
        yield
    except MissingTensorFlowError as exc:
        raise PluginError(f"formula-check: {exc.message}") from None


def _snippet_files(blocks: list[PageBlock], root: Path) -> set[Path]:
    """What serve watches for the blocks before any of them ran: each code= file or module,
    and the project modules a snippet's own import statements name. A run reports what it
    imported, however deep; this is for a run that never reports (a timeout, a crash), whose
    fix is often in the module it imported."""
    paths: set[Path] = set()
    modules: set[str] = set()
    for block in blocks:
        snippet = block.spec.snippet if block.spec else None
        if snippet is None:
            continue
        if snippet.origin == "file":
            paths.add(root / snippet.location.path)
        if snippet.module:
            modules.add(snippet.module)
        modules.update(_imported_modules(snippet.source))
    for top in {module.split(".", 1)[0] for module in modules}:
        paths.update(_module_files(top, root))
    return paths


_IMPORT = re.compile(
    r"^[ \t]*(?:from[ \t]+([A-Za-z_][\w.]*)[ \t]+import\b|import[ \t]+([^#\n]+))", re.M
)


def _imported_modules(source: str) -> set[str]:
    """The absolute module names the ``import`` lines of ``source`` name (a relative
    ``from . import`` names none). Read from the lines, not parsed: a snippet that does not
    parse still names what to watch, and a page of many blocks is read in no time."""
    names: set[str] = set()
    for found, listed in _IMPORT.findall(source):
        if found:
            names.add(found)
        else:
            names.update(part.split()[0] for part in listed.split(",") if part.split())
    return names


def _module_files(module: str, root: Path) -> set[Path]:
    """The project file or package folder a module comes from (its top-level package, since
    it may import siblings); nothing for installed modules, which do not change while serving."""
    top = module.split(".", 1)[0]
    candidates = (root / top, root / f"{top}.py")
    return {path for path in candidates if path.exists()}
