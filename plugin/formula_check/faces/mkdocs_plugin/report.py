"""The report page and ``formula-check-report.json`` the plugin adds to a site.

The page is generated with its title and a placeholder; the table replaces the placeholder
once every check is done (its links are relative: the table is raw HTML).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from mkdocs.config.defaults import MkDocsConfig
from mkdocs.structure.files import File, InclusionLevel
from mkdocs.utils import get_relative_url

from formula_check.render import Labels, report_body, report_json
from formula_check.results import CheckResult

REPORT_PAGE = "formula-check-report.md"
REPORT_JSON = "formula-check-report.json"


def report_page(config: MkDocsConfig, labels: Labels, nonce: str) -> File:
    """The report page waiting for its table (:func:`placeholder` marks where it goes)."""
    return report_file(config, f"# {labels.report_title}\n\n{placeholder(nonce)}\n")


def disabled_page(config: MkDocsConfig, labels: Labels) -> File:
    """The report page of a build with the checks off: links to it still hold."""
    return report_file(config, f"# {labels.report_title}\n\n{labels.report_disabled}\n")


def report_file(config: MkDocsConfig, content: str) -> File:
    """The report page. A site with a ``nav`` that does not list it gets it as a page outside
    the nav, as MkDocs' ``not_in_nav`` would make it: ``validation: nav: omitted_files`` set
    to ``warn`` must not fail a strict build over a page the plugin added."""
    file = File.generated(config, REPORT_PAGE, content=content)
    if config.nav is not None and REPORT_PAGE not in nav_paths(config.nav):
        file.inclusion = InclusionLevel.NOT_IN_NAV
    return file


def nav_paths(nav: Any) -> set[str]:
    """Every string in a ``nav`` setting: the pages and links it names."""
    if isinstance(nav, str):
        return {nav}
    if isinstance(nav, dict):
        return {path for value in nav.values() for path in nav_paths(value)}
    if isinstance(nav, list):
        return {path for item in nav for path in nav_paths(item)}
    return set()


def placeholder(nonce: str) -> str:
    """Where the report's table goes on its page."""
    return f'<div class="fc-pending" data-fc-report="{nonce}"></div>'


def report_table(
    results: Sequence[CheckResult], labels: Labels, page_urls: dict[str, str], report_url: str
) -> str:
    """The table of ``results``, each linking to its card (``page_urls``: page name to URL; a
    notebook cell's result links into its notebook's page)."""

    def card_url(result: CheckResult) -> str:
        target = get_relative_url(page_urls.get(result.location.file, ""), report_url)
        return (target if not target.endswith("..") else target + "/") + f"#fc-{result.block_id}"

    return report_body(list(results), labels, card_url)


def write_json(site_dir: Path, results: Sequence[CheckResult]) -> None:
    """Every result, machine-readable, beside the site's pages."""
    (site_dir / REPORT_JSON).write_text(report_json(list(results)), encoding="utf-8")
