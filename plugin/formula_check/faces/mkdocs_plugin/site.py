"""What the plugin adds to the site MkDocs builds: the extension, assets, figures, anchors, log.

Functions of MkDocs' objects only; the hooks in :mod:`.plugin` call them in order.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from html import escape
from pathlib import Path
from typing import Any

from mkdocs.config.defaults import MkDocsConfig
from mkdocs.exceptions import PluginError
from mkdocs.plugins import get_plugin_logger
from mkdocs.structure.files import File, Files
from mkdocs.utils import get_relative_url

from formula_check.errors import MissingTensorFlowError, PageError
from formula_check.faces.markdown_ext import UNCHECKED
from formula_check.pages.blocks import PageBlock
from formula_check.project import assets
from formula_check.project.ci_formats import formula_note
from formula_check.render import Figure
from formula_check.results import CheckResult
from formula_check.session import PageContext, is_failure
from formula_check.sinks import SafeLines
from formula_check.store.sealed_files import log as cache_log

log = get_plugin_logger("formula_check.faces.mkdocs_plugin").logger
# Every line the plugin logs may quote a page or a snippet, and a CI runner reads the log:
# each is made a safe line where it is logged, whichever module logs it.
for _logger in (log, cache_log):
    _logger.addFilter(SafeLines())


class SiteImages:
    """Collects figures while pages render; :meth:`write` puts them into the site after the
    build (MkDocs empties the site folder before it)."""

    def __init__(self) -> None:
        self.files: dict[str, bytes] = {}

    def url(self, figure: Figure, page: PageContext) -> str:
        """Remember the figure and link to it relative to the page."""
        name = figure.file_name
        self.files[name] = figure.data
        return get_relative_url(f"{assets.ASSET_DIR}/{name}", page.url)

    def write(self, site_dir: Path) -> None:
        """Write every collected figure under ``site_dir``."""
        folder = site_dir / assets.ASSET_DIR
        folder.mkdir(parents=True, exist_ok=True)
        for name, data in self.files.items():
            (folder / name).write_bytes(data)


def log_result(result: CheckResult, fail_on: frozenset[str]) -> None:
    """One line per result: a WARNING for a failure (``--strict`` fails), INFO for another
    outcome that is not clean, DEBUG for a pass; plus an INFO line when the formula itself
    went unchecked. The line starts with the clickable ``page:line``."""
    if is_failure(result, fail_on):
        log.warning(result.headline())
    elif not result.outcome_ok or result.expected_failure:
        log.info(result.headline())
    else:
        log.debug(result.headline())
    note = formula_note(result)
    if note is not None:  # fails nothing, but the formula went unchecked: not only on the card
        log.info(note)


def register_extension(config: MkDocsConfig, options: dict[str, Any]) -> None:
    """Load SuperFences and our extension with ``options`` (once, whatever the rebuilds)."""
    names = [ext if isinstance(ext, str) else str(ext) for ext in config.markdown_extensions]
    if "pymdownx.superfences" not in names:
        config.markdown_extensions.append("pymdownx.superfences")
    if "formula_check" not in names:
        config.markdown_extensions.append("formula_check")
    config.mdx_configs["formula_check"] = options


def register_assets(config: MkDocsConfig, *, mathjax: bool) -> None:
    """Link the stylesheets and scripts (an offline MathJax with ``mathjax``) from every page.

    A site that loads its own MathJax keeps it, and one INFO line says so: a second copy
    would fight it over ``window.MathJax`` (see :mod:`formula_check.project.assets`)."""
    if mathjax:
        theirs = assets.site_mathjax(_scripts(config))
        if theirs is not None:
            log.info(
                f"formula-check: the site loads its own MathJax (extra_javascript: {theirs}); "
                "it typesets the cards' formulas and the plugin's offline copy is left out"
            )
            mathjax = False
        else:
            try:
                assets.mathjax_root()
            except assets.MissingMathJaxError as exc:
                raise PluginError(f"formula-check: option 'mathjax': {exc}") from None
    for path in assets.stylesheets(report=True):
        if path not in config.extra_css:
            config.extra_css.append(path)
    for path in assets.scripts(mathjax=mathjax, report=True):
        if path not in _scripts(config):
            config.extra_javascript.append(path)


def _scripts(config: MkDocsConfig) -> list[str]:
    # An entry is a path or an ExtraScriptValue (`- path: ...` with `type`/`async`).
    return [str(script) for script in config.extra_javascript]


def add_assets(files: Files, config: MkDocsConfig, *, mathjax: bool) -> None:
    """Add the asset files to the site; an author's own copy of one wins. A site with its own
    MathJax gets none of ours."""
    mathjax = mathjax and assets.site_mathjax(_scripts(config)) is None
    for asset in assets.site_assets(mathjax=mathjax, report=True):
        uri = f"{assets.ASSET_DIR}/{asset.name}"
        if files.get_file_from_path(uri) is not None:
            continue
        if asset.source is not None:
            files.append(File.generated(config, uri, abs_src_path=str(asset.source)))
        else:
            files.append(File.generated(config, uri, content=asset.text))


def render_as_decoded(file: File, text: str) -> None:
    """MkDocs reads a page again to render it, and stops the whole build at a byte that is
    not UTF-8: it renders ``text`` instead (such bytes shown as U+FFFD; the page's error block
    says where), still known by its own file for its messages, edit link and ``serve``."""
    path = file.abs_src_path
    file.content_string = text
    file.abs_src_path = path


def page_path(file: File, root: Path) -> str:
    """The page as messages name it: relative to the project folder (``docs/attention.md``)."""
    if file.abs_src_path:
        path = Path(file.abs_src_path).resolve()
        if path.is_relative_to(root):
            return path.relative_to(root).as_posix()
    return file.src_uri


def card_anchors(blocks: Sequence[PageBlock], path: str) -> list[str]:
    """The ``#fc-<id>`` anchors of the page ``path``'s cards, in page order, a notebook's cells
    included (a problem of the whole page, such as bytes that are not UTF-8, is no formula of
    it)."""
    return [
        f"fc-{block.block_id}"
        for block in blocks
        if block.location.file == path and not isinstance(block.error, PageError)
    ]


def anchor_unchecked(html: str, anchors: Sequence[str], path: str) -> str | None:
    """With the checks off there is no card: each formula gets its card's anchor. ``None``
    when the page shows other formulas than the source holds (another extension added or hid
    some): no guess is made, and an INFO line says so."""
    opening = f'<div class="{UNCHECKED}">'
    if html.count(opening) != len(anchors):
        log.info(
            f"{path}: {len(anchors)} formula blocks in the source but "
            f"{html.count(opening)} on the page (another extension added or hid "
            "some): its formulas get no #fc- anchors while checks are off"
        )
        return None
    pieces = html.split(opening)
    return pieces[0] + "".join(
        f'<div class="{UNCHECKED}" id="{escape(anchor, quote=True)}">{piece}'
        for anchor, piece in zip(anchors, pieces[1:], strict=True)
    )


@contextlib.contextmanager
def plugin_errors() -> Iterator[None]:
    """A missing TensorFlow stops the build with one clear message, not a traceback."""
    try:
        yield
    except MissingTensorFlowError as exc:
        raise PluginError(f"formula-check: {exc.message}") from None
