"""A docs project seen from outside MkDocs: its folder, its plugin options, its pages' blocks.

The CLI and the pytest plugin check pages without running ``mkdocs build``. They read
``mkdocs.yml`` the way MkDocs would (its own YAML loader for ``!ENV`` and ``INHERIT``, the
plugin's own :class:`FormulaCheckConfig` for the options, MkDocs' own file walk for
``exclude_docs``) but never import what the file names: a ``!!python/name:`` tag stays a
string, so a CI job needs neither the theme's extensions nor a network.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path, PurePath
from typing import Any

import yaml
from mkdocs.config.defaults import MkDocsConfig
from mkdocs.exceptions import ConfigurationError
from mkdocs.structure.files import get_files
from mkdocs.utils.yaml import get_yaml_loader, yaml_load

from formula_check.errors import FormulaCheckError
from formula_check.pages.blocks import PageBlock, Settings, decode_page, source_blocks
from formula_check.pages.notebooks import notebook_blocks
from formula_check.project.config import FormulaCheckConfig, options_from, out_of_range
from formula_check.session.options import Options

CONFIG_NAME = "mkdocs.yml"
PLUGIN_NAME = "formula-check"
PAGE_SUFFIXES = frozenset({".md", ".markdown", ".mdown", ".mkdn", ".mkd"})
NOTEBOOK_SUFFIX = ".ipynb"
CHECKED_SUFFIXES = PAGE_SUFFIXES | {NOTEBOOK_SUFFIX}
"""What a folder's walk collects: Markdown pages and Jupyter notebooks."""
# The MkDocs settings that decide which files are pages; everything else is the theme's.
_FILE_KEYS = ("docs_dir", "exclude_docs", "draft_docs", "not_in_nav", "use_directory_urls")


class ProjectError(FormulaCheckError):
    """The project cannot be read: no such path, unreadable ``mkdocs.yml``, bad plugin option."""


@dataclass(frozen=True)
class Project:
    """A project folder (``root``: snippets, cache and page paths are relative to it)."""

    root: Path
    options: Options
    config_file: Path | None = None
    docs_dir: Path | None = None

    def settings(self, timeout: float | None = None) -> Settings:
        """What every block of this project is built with."""
        return self.options.pages(self.root, timeout)

    def page_name(self, path: Path) -> str:
        """A page as messages name it: relative to the project (``docs/attention.md``)."""
        resolved = path.resolve()
        if resolved.is_relative_to(self.root):
            return resolved.relative_to(self.root).as_posix()
        return path.as_posix()

    def load_oracles(self) -> None:
        """Register the project's own oracles; a bad reference is reported as the plugin
        reports it, naming the option and the ``mkdocs.yml``."""
        from formula_check.oracles import load_oracle

        for reference in self.options.oracles:
            try:
                load_oracle(reference, self.root, self.options.env)
            except FormulaCheckError as exc:
                where = self.config_file or self.root
                raise ProjectError(
                    f"{where}: plugin {PLUGIN_NAME!r}, option 'oracles': {exc.message}"
                ) from None


class _SafeLoader(yaml.SafeLoader):  # type: ignore[misc]  # PyYAML ships no types
    """Safe YAML that keeps tags it must not act on as plain values (see the module docstring)."""


def _keep_python_tag(loader: yaml.SafeLoader, suffix: str, node: yaml.Node) -> str:
    # ``!!python/name:pkg.attr`` would import pkg; only its spelling is needed here.
    return f"!!python/{suffix}"


def _keep_scalar(loader: yaml.SafeLoader, node: yaml.Node) -> Any:
    return loader.construct_scalar(node) if isinstance(node, yaml.ScalarNode) else None


_SafeLoader.add_multi_constructor("tag:yaml.org,2002:python/", _keep_python_tag)
_SafeLoader.add_constructor("!relative", _keep_scalar)


def read_config_file(path: Path) -> dict[str, Any]:
    """``mkdocs.yml`` as a dict (``!ENV`` resolved, ``INHERIT`` merged, nothing imported)."""
    try:
        with path.open("rb") as handle:
            data = yaml_load(handle, get_yaml_loader(_SafeLoader))
    except (OSError, ConfigurationError) as exc:
        raise ProjectError(f"{path}: {exc}") from None
    if not isinstance(data, dict):
        raise ProjectError(f"{path}: expected a mapping of settings at the top level")
    return data


def plugin_entry(data: Mapping[str, Any]) -> dict[str, Any]:
    """The options under ``plugins: - formula-check: {...}`` (empty when listed bare or absent)."""
    plugins = data.get("plugins") or []
    entries = plugins.items() if isinstance(plugins, Mapping) else _list_entries(plugins)
    for name, options in entries:
        if name == PLUGIN_NAME:
            return dict(options or {})
    return {}


def _list_entries(plugins: Any) -> list[tuple[str, Any]]:
    entries: list[tuple[str, Any]] = []
    for item in plugins if isinstance(plugins, list) else []:
        if isinstance(item, str):
            entries.append((item, None))
        elif isinstance(item, Mapping):
            entries.extend(item.items())
    return entries


def validate_options(raw: Mapping[str, Any], where: str) -> Options:
    """The plugin's own config class judges the options; an unknown option is an error too."""
    config = FormulaCheckConfig()
    config.load_dict(dict(raw))
    failed, warnings = config.validate()
    for key, problem in [*failed, *warnings]:
        raise ProjectError(f"{where}: plugin {PLUGIN_NAME!r}, option {key!r}: {problem}")
    problem = out_of_range(config)
    if problem:
        raise ProjectError(f"{where}: plugin {PLUGIN_NAME!r}: {problem}")
    return options_from(config)


def find_config(start: Path, stop: Path | None = None) -> Path | None:
    """The nearest ``mkdocs.yml`` in ``start`` or a folder above it (not above ``stop``)."""
    folder = start.resolve()
    limit = stop.resolve() if stop is not None else None
    for candidate in (folder, *folder.parents):
        if (candidate / CONFIG_NAME).is_file():
            return candidate / CONFIG_NAME
        if candidate == limit:
            break
    return None


def load_project(config_file: Path) -> Project:
    """The project ``config_file`` describes."""
    data = read_config_file(config_file)
    options = validate_options(plugin_entry(data), str(config_file))
    root = config_file.resolve().parent
    docs_dir = root / str(data.get("docs_dir") or "docs")
    return Project(root, options, config_file, docs_dir)


def bare_project(root: Path) -> Project:
    """A folder without ``mkdocs.yml``: the plugin's defaults."""
    return Project(root.resolve(), Options())


def site_pages(project: Project) -> list[Path]:
    """The pages MkDocs would build, in MkDocs' order (``index`` first in each folder)."""
    assert project.config_file is not None and project.docs_dir is not None
    if not project.docs_dir.is_dir():
        raise ProjectError(f"{project.config_file}: docs_dir {project.docs_dir} is not a folder")
    data = read_config_file(project.config_file)
    config = MkDocsConfig(config_file_path=str(project.config_file))
    config.load_dict(
        {"site_name": "formula-check", **{k: data[k] for k in _FILE_KEYS if k in data}}
    )
    failed, _ = config.validate()
    for key, problem in failed:
        raise ProjectError(f"{project.config_file}: option {key!r}: {problem}")
    files = get_files(config)
    pages = [Path(str(file.abs_src_path)) for file in files.documentation_pages()]
    jupyter = dict(_list_entries(data.get("plugins") or [])).get(JUPYTER_PLUGIN, _ABSENT)
    if jupyter is _ABSENT:
        return pages
    return pages + _jupyter_notebooks(files, jupyter if isinstance(jupyter, Mapping) else {})


JUPYTER_PLUGIN = "mkdocs-jupyter"
_ABSENT = object()


def _jupyter_notebooks(files: Any, options: Mapping[str, Any]) -> list[Path]:
    """The notebooks mkdocs-jupyter makes pages of, as its ``include`` and ``ignore`` patterns
    choose them (its defaults: every ``.ipynb``); its ``.py`` scripts are not read."""
    include = options.get("include") or ["*.py", "*.ipynb", "*.md"]
    ignore = options.get("ignore") or []
    notebooks = []
    for file in files:
        path = PurePath(str(file.abs_src_path))
        if path.suffix != NOTEBOOK_SUFFIX or not file.inclusion.is_included():
            continue
        if any(path.match(str(p)) for p in ignore) or not any(path.match(str(p)) for p in include):
            continue
        notebooks.append(Path(path))
    return notebooks


def folder_pages(folder: Path, suffixes: frozenset[str] = CHECKED_SUFFIXES) -> list[Path]:
    """Every page and notebook under ``folder`` (hidden files and folders skipped, as MkDocs
    does: ``.ipynb_checkpoints`` too)."""
    pages = []
    for directory, subfolders, names in os.walk(folder):
        subfolders[:] = sorted(name for name in subfolders if not name.startswith("."))
        for name in sorted(names, key=lambda n: (Path(n).stem not in ("index", "README"), n)):
            if Path(name).suffix in suffixes and not name.startswith("."):
                pages.append(Path(directory) / name)
    return pages


def read_blocks(path: Path, project: Project, settings: Settings) -> list[PageBlock]:
    """A page's formula blocks, split from its front matter exactly as the MkDocs plugin does;
    a notebook's, cell by cell (:mod:`..pages.notebooks`: it is read, never run)."""
    page = project.page_name(path)
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise ProjectError(f"{path}: cannot read page: {exc}") from None
    if path.suffix == NOTEBOOK_SUFFIX:
        return notebook_blocks(data, notebook=page, settings=settings)
    # decoded as MkDocs does (a byte-order mark dropped, so line numbers agree with its build);
    # a page that is not UTF-8 is that page's error, and its other blocks are still checked
    return source_blocks(decode_page(data, page), page=page, settings=settings)


def project_near(start: Path, *, stop: Path | None = None, fallback: Path | None = None) -> Project:
    """The project of the nearest ``mkdocs.yml`` above ``start``, else a bare ``fallback``."""
    config_file = find_config(start, stop)
    if config_file is not None:
        return load_project(config_file)
    return bare_project(fallback if fallback is not None else Path.cwd())


def target_pages(target: Path) -> tuple[Project, list[Path]]:
    """What ``formula-check check TARGET`` checks: a site (``mkdocs.yml`` or its folder), a
    folder of pages and notebooks, or one of them; the settings come from the nearest
    ``mkdocs.yml``. A site is its pages, as MkDocs builds them: its notebooks are checked when
    a folder or a notebook is named."""
    if not target.exists():
        raise ProjectError(f"{target}: no such file or folder")
    if target.is_dir() and (target / CONFIG_NAME).is_file():
        target = target / CONFIG_NAME
    if target.is_file() and target.suffix in {".yml", ".yaml"}:
        project = load_project(target)
        return project, site_pages(project)
    if target.is_file() and target.suffix in CHECKED_SUFFIXES:
        return project_near(target.parent), [target]
    if not target.is_dir():
        raise ProjectError(
            f"{target}: expected a docs folder, a Markdown page, a notebook or mkdocs.yml"
        )
    project = project_near(target)
    folder = target.resolve()
    if project.docs_dir is not None and folder.is_relative_to(project.docs_dir.resolve()):
        # Inside the site's docs: the site's exclusions still apply to its pages.
        pages = [p for p in site_pages(project) if p.resolve().is_relative_to(folder)]
        return project, pages + folder_pages(target, frozenset({NOTEBOOK_SUFFIX}))
    return project, folder_pages(target)


def repository_top(here: Path) -> Path | None:
    """The folder holding ``.git`` at or above ``here`` (git's top level), if any."""
    return next((p for p in (here, *here.parents) if (p / ".git").exists()), None)


def repository_prefix(root: Path) -> str:
    """The project folder within its repository (``""`` at its top or outside one)."""
    top = repository_top(root.resolve())
    return "" if top is None else root.resolve().relative_to(top).as_posix().strip(".")


def search_limit(here: Path) -> Path:
    """How far above ``here`` the nearest ``mkdocs.yml`` is looked for: the repository's top;
    outside one, the home folder when below it (a stranger's ``mkdocs.yml`` higher up is
    never taken), else the root."""
    repository = repository_top(here)
    if repository is not None:
        return repository
    home = Path.home().resolve()
    return home if here.is_relative_to(home) else Path(here.anchor)
