"""The plugin's hooks: each a few lines of glue between MkDocs' events and the session.

What the plugin adds to the Markdown extension alone:

* one warm engine for the life of ``mkdocs serve`` (``on_startup``/``on_shutdown`` make
  MkDocs keep this plugin instance across rebuilds);
* every block of every page checked in one background batch started in ``on_nav``, before
  any page renders, so ``workers: 2`` parallelises across the whole site; a card whose result
  is not in yet is a placeholder until ``on_post_page``;
* the notebook pages mkdocs-jupyter renders read from their files, their cards placed by
  cell (:mod:`.jupyter_pages`);
* each result logged as it arrives (:func:`.site.log_result`), so ``--strict`` fails on a
  failure and lists them all;
* figures written once under ``assets/formula-check/``, the stylesheet, an offline MathJax,
  and a report page plus ``formula-check-report.json`` (:mod:`.report`);
* under ``mkdocs serve``, the snippet files and project modules watched, and the checks of a
  build stopped once a file it read is saved again (:mod:`.watching`).
"""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mkdocs.config.defaults import MkDocsConfig
from mkdocs.exceptions import PluginError
from mkdocs.plugins import BasePlugin, event_priority
from mkdocs.structure.files import File, Files
from mkdocs.structure.nav import Navigation
from mkdocs.structure.pages import Page

from formula_check.errors import FormulaCheckError
from formula_check.faces.mkdocs_plugin import report, site, watching
from formula_check.faces.mkdocs_plugin.jupyter_pages import NotebookPages, renders_notebooks
from formula_check.faces.mkdocs_plugin.page_notebooks import PageNotebooks
from formula_check.faces.mkdocs_plugin.tally import Tally
from formula_check.oracles import load_oracle
from formula_check.pages.blocks import (
    PageBlock,
    Settings,
    decode_page,
    source_blocks,
)
from formula_check.pages.front_matter import front_matter_lines, front_matter_problem
from formula_check.project.config import FormulaCheckConfig, options_from
from formula_check.render import labels_for
from formula_check.render.figure_cache import FigureCache
from formula_check.results import CheckResult
from formula_check.session import Engines, FormulaSession, PageContext
from formula_check.session.options import Options

if TYPE_CHECKING:  # MkDocs' server (and watchdog with it) loads only under `mkdocs serve`
    from mkdocs.livereload import LiveReloadServer


class FormulaCheckPlugin(BasePlugin[FormulaCheckConfig]):  # type: ignore[no-untyped-call]
    """``plugins: [formula-check]``: verify every formula block of the site."""

    def __init__(self) -> None:
        self.engines = Engines()
        """Engines by settings, one kept at a time; the faces' tests give one making fakes."""
        self.options = Options()
        self.root = Path.cwd()
        self.session: FormulaSession | None = None
        self.images = site.SiteImages()
        self.blocks: list[PageBlock] = []
        self.pages: list[File] = []
        self.report: File | None = None
        self.watcher = watching.Watcher()
        self.tally = Tally(self.options.fail_on)
        self.started: object = None
        self.serving = False
        self.figures: FigureCache | None = None
        self.edits = watching.Edits()
        self.notebooks = PageNotebooks(enabled=False)
        self.jupyter = NotebookPages(enabled=False)
        """The notebook pages mkdocs-jupyter renders (:mod:`.jupyter_pages`)."""

    @property
    def settings(self) -> Settings:
        """What every block of the site is built with."""
        return self.options.pages(self.root)

    # -- lifecycle: one instance and one warm engine across `mkdocs serve` rebuilds ------------

    def on_startup(self, *, command: str, dirty: bool) -> None:
        """Remember whether we serve (user oracle modules are re-imported on each rebuild)."""
        self.serving = command == "serve"

    def on_shutdown(self) -> None:
        """Stop the checks still queued (Ctrl-C) and the workers."""
        if self.session is not None:
            self.session.shutdown()
        self.engines.close()
        self.watcher.close()

    # -- configuration --------------------------------------------------------------------

    def on_config(self, config: MkDocsConfig) -> MkDocsConfig | None:
        """Validate options, load user oracles, register the extension and the assets."""
        self.root = Path(config.config_file_path or ".").resolve().parent
        self.options = options_from(self.config)
        self.session = None
        if self.config.enabled:
            self._validate_options()
        else:  # also when turned off during `mkdocs serve`: its workers go (about 0.5 GB
            self.engines.close()  # each); the disk cache stays
        self._load_oracles()  # NumPy only: with checks off, blocks naming them are well formed
        if self.config.enabled:
            self.session = self._make_session(config)
        self.blocks, self.report = [], None
        self.notebooks = PageNotebooks(enabled=self.config.notebooks)
        self.jupyter = NotebookPages(enabled=renders_notebooks(config.plugins))
        extension = {"session": self.session} if self.session else {"check": False}
        site.register_extension(config, extension)  # the math renders either way
        site.register_assets(config, mathjax=self.config.mathjax)
        return config

    def _validate_options(self) -> None:
        problem = self.options.problem()
        if problem:
            raise PluginError(f"formula-check: {problem}")

    def _load_oracles(self) -> None:
        for reference in self.options.oracles:
            module = reference.partition(":")[0]
            try:  # in a process of its own, imported again once its file is edited
                load_oracle(reference, self.root, self.options.env)
            except FormulaCheckError as exc:
                raise PluginError(f"formula-check: option 'oracles': {exc.message}") from None
            self.watcher.add(watching.module_files(module, self.root))

    def _make_session(self, config: MkDocsConfig) -> FormulaSession:
        self.images = site.SiteImages()
        engine = self.options.engine(self.root)
        return FormulaSession(
            settings=self.settings,
            labels=labels_for(self._language(config)),
            images=self.images,
            engine_factory=lambda: self.engines.only(engine),
            fail_on=frozenset(),  # the plugin logs failures; the extension must not raise
            on_result=self._on_result,
            figure_cache=self._figure_cache(engine.cache_dir if engine.cache else None),
            superseded=self._superseded,
            served=self.serving,
        )

    def _on_result(self, result: CheckResult) -> None:
        site.log_result(result, self.options.fail_on)
        self.tally.add(result)

    def _superseded(self) -> bool:
        return self.watcher.server is not None and self.edits.since()

    def _language(self, config: MkDocsConfig) -> str:
        return str(self.config.language or config.theme.get("language") or "en")

    def _figure_cache(self, cache_dir: Path | None) -> FigureCache:
        """One figure cache for the plugin's life: `serve` rebuilds reuse drawn figures."""
        directory = cache_dir / "figures" if cache_dir is not None else None
        if self.figures is None or self.figures.directory != directory:
            self.figures = FigureCache(directory)
        return self.figures

    # -- the site-wide batch ---------------------------------------------------------------

    def on_files(self, files: Files, *, config: MkDocsConfig) -> Files | None:
        """Add the assets and the report page."""
        site.add_assets(files, config, mathjax=self.config.mathjax)
        self.report = None
        if not self.config.report:
            return files
        if self.session is None:  # the report page says checks were off: links to it hold
            self.report = report.disabled_page(config, labels_for(self._language(config)))
        else:
            self.report = report.report_page(config, self.session.labels, self.session.nonce)
        files.append(self.report)
        return files

    def on_nav(self, nav: Navigation, *, config: MkDocsConfig, files: Files) -> Navigation | None:
        """Start checking every block of every page, in page order.

        Here rather than in ``on_files``: every plugin's ``on_files`` has run, so mkdocs-jupyter
        has made its notebooks pages wherever it stands in ``plugins:``. The checks run in the
        background while MkDocs renders: the first pages wait for TensorFlow's import, the
        later ones mostly find their results ready.
        """
        self.pages = [file for file in files.documentation_pages() if file is not self.report]
        self.jupyter.begin_build()
        if self.session is None:  # turned off: each formula keeps its card's anchor
            self.blocks = [block for file in self.pages for block in self._blocks(file)]
            for block in self.blocks:  # a fence that could never be checked is the page's
                if block.error is not None:  # fault, and needs no worker to be told
                    site.log_result(block.error_result(), self.options.fail_on)
            return nav
        with site.plugin_errors():
            self.session.begin_build()  # a rebuild starts after the last batch has ended
        self.blocks = [block for file in self.pages for block in self._blocks(file)]
        self.tally = Tally(self.options.fail_on)
        self.tally.start(self.blocks, len(self.pages), self.options.worker_count())
        self.session.check_in_background(self.blocks)
        snippets = watching.snippet_files(self.blocks, self.root)
        self.watcher.add(snippets)
        self.edits.begin([*snippets, *(Path(f.abs_src_path) for f in self.pages if f.abs_src_path)])
        return nav

    def _blocks(self, file: File) -> list[PageBlock]:
        page = site.page_path(file, self.root)
        if self._is_notebook(file):
            return self.jupyter.read(file.content_bytes, page, self.settings)
        source = decode_page(file.content_bytes, page)
        if source.problem is not None:
            site.render_as_decoded(file, source.text)
        return source_blocks(source, page=page, settings=self.settings)

    def _is_notebook(self, file: File) -> bool:
        return self.jupyter.is_notebook(
            file.src_uri, documentation_page=file.is_documentation_page()
        )

    def on_page_markdown(
        self, markdown: str, *, page: Page, config: MkDocsConfig, files: Files
    ) -> str | None:
        """Tell the session which page renders and how many lines MkDocs cut off its top;
        make the page's notebook, if it is to have one. A notebook page's "Markdown" is its
        JSON: its cards are placed in ``on_page_content``."""
        path = site.page_path(page.file, self.root)
        if self.jupyter.holds(path):
            return markdown
        try:
            dest = page.file.dest_uri
            self.notebooks.add(markdown, page=path, dest=dest, meta=page.meta, files=files)
        except FormulaCheckError as exc:
            site.log.warning(str(exc))
        if self.session is not None:
            self.session.enter_page(
                PageContext(
                    path=site.page_path(page.file, self.root),
                    line_offset=front_matter_lines(page.file.content_string, markdown),
                    meta=dict(page.meta),
                    url=page.url,
                    front_matter_error=front_matter_problem(markdown.split("\n")),
                )
            )
        return markdown

    def on_page_content(
        self, html: str, *, page: Page, config: MkDocsConfig, files: Files
    ) -> str | None:
        """Tell MkDocs' anchor validation about the cards' ``#fc-<id>`` anchors: a fence's
        HTML is stashed before MkDocs looks for ids in raw HTML, so it never sees them. With
        the checks off there is no card: the anchor goes on the formula itself."""
        path = site.page_path(page.file, self.root)
        if self.jupyter.holds(path):
            return self._notebook_cards(html, page, path)
        html = self._notebook_link(page, config) + html
        if not self.blocks or page.present_anchor_ids is None:
            return html
        anchors = site.card_anchors(self.blocks, path)
        if self.session is None:
            anchored = site.anchor_unchecked(html, anchors, path)
            if anchored is None:
                return html
            html = anchored
        page.present_anchor_ids.update(anchors)
        return html

    def _notebook_cards(self, html: str, page: Page, path: str) -> str:
        """A notebook page rendered by mkdocs-jupyter: its cards placed by cell (none while
        checks are off: nbconvert shows a fence as code, there is no formula to anchor)."""
        if self.session is None:
            return html
        self.session.enter_page(PageContext(path=path, meta=dict(page.meta), url=page.url))
        labels = self.session.labels_for_page(page.meta)
        with site.plugin_errors():
            placed = self.jupyter.with_cards(html, path, self.session, labels)
        if placed.note(path):
            site.log.info(placed.note(path))
        if page.present_anchor_ids is not None:
            page.present_anchor_ids.update(site.card_anchors(self.blocks, path))
        return placed.html

    def _notebook_link(self, page: Page, config: MkDocsConfig) -> str:
        language = str(page.meta.get("language") or self._language(config))
        return self.notebooks.link(site.page_path(page.file, self.root), labels_for(language))

    # -- output ----------------------------------------------------------------------------

    @event_priority(100)  # before plugins that rewrite the HTML (minifiers) see placeholders
    def on_post_page(self, output: str, *, page: Page, config: MkDocsConfig) -> str | None:
        """Put the cards (and the report's table) in place of their placeholders."""
        if self.session is None:
            return output
        with site.plugin_errors():
            output = self.session.fill_placeholders(output)
            if self.report is not None and page.file is self.report:
                table = self._report_table(self.session, self.report)
                output = output.replace(report.placeholder(self.session.nonce), table)
        return output

    def _report_table(self, session: FormulaSession, page: File) -> str:
        session.wait_all()  # a batch stopped by a newer edit left some blocks out
        urls = {site.page_path(file, self.root): file.url for file in self.pages}
        return report.report_table(session.results(self.blocks), session.labels, urls, page.url)

    def on_build_error(self, *, error: Exception) -> None:
        """A failed build still lets its checks end before the next build starts."""
        if self.session is not None:
            with contextlib.suppress(Exception):
                self.session.wait_all()

    def on_post_build(self, *, config: MkDocsConfig) -> None:
        """Write the figures and the JSON report (every result, including late ones)."""
        session = self.session
        if session is not None:
            with site.plugin_errors():
                session.wait_all()  # every result is logged before the build ends
            for result in session.results():  # helpers a snippet imported, however deep
                self.watcher.add(self.root / name for name in result.imports)
        self.watcher.refresh()
        if session is None:
            return
        lost = session.unfilled_pages()
        if lost:
            site.log.warning(
                f"cards missing from {', '.join(lost)}: their placeholders were removed or "
                "rewritten before formula-check could fill them (a theme override or another "
                "plugin changing the page's HTML); the checks themselves ran and are logged above"
            )
        summary = self.tally.summary()
        if summary:
            site.log.info(summary)
        if self.serving and any(block.spec is not None for block in self.blocks):
            self._start_engine(session)
        site_dir = Path(config.site_dir)
        self.images.write(site_dir)
        self.notebooks.write(site_dir)
        if self.config.report:
            report.write_json(site_dir, session.results())

    def _start_engine(self, session: FormulaSession) -> None:
        """A first build served from the cache started no worker; start it now, so that the
        first edit of a block does not wait for the TensorFlow import (once per engine: a
        start that failed, without TensorFlow, is not retried every rebuild)."""
        engine = session.get_engine()
        if self.started is not engine:
            self.started = engine
            engine.start_in_background()

    def on_serve(
        self, server: LiveReloadServer, *, config: MkDocsConfig, builder: Any
    ) -> LiveReloadServer | None:
        """Rebuild when a snippet file or a user oracle module changes."""
        self.watcher.attach(server)
        self.watcher.refresh()
        return server
