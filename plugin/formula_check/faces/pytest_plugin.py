"""The pytest face: every formula block of a docs folder as a test item.

``pytest --formula-check docs/`` (or ``formula_check_paths = docs`` in the ini file) collects
each page, and each Jupyter notebook (read, never run: :mod:`..pages.notebooks`), as a file node
and each block as an item named by its id (``docs/attention.md::sdpa``). A failure shows
the block's headline and its numbers, never a traceback of ours; a block marked ``expect=``
is an xfail whose promise is strict (a block that verifies when it should fail is a failure).

pytest loads this module in every run, through its entry point: until one of the two
switches is given it registers options and nothing else, and imports nothing of ours (the
engine and the oracles stay unloaded). Each pytest process (each xdist worker)
keeps one warm engine per project for the whole session and closes it at the end.

Under pytest-xdist the workers' engines share one zygote, the process that imports
TensorFlow and forks the workers: each xdist worker keeps it alive (``keep_alive``, at least
:data:`XDIST_KEEP_ALIVE` seconds), and a kept zygote serves every run of the same project,
interpreter, checker and settings. ``-n 4`` pays one TensorFlow import, not four.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from _pytest._code.code import ExceptionInfo, TerminalRepr, TracebackStyle
    from _pytest.terminal import TerminalReporter

    from formula_check.pages.blocks import PageBlock
    from formula_check.project.loading import Project
    from formula_check.results import CheckResult

RUN = pytest.StashKey["FormulaCheckRun"]()
"""Where the switched-on plugin keeps its run (``config.stash[RUN]``): a conftest may give
its ``engines`` a maker of fakes."""
XDIST_KEEP_ALIVE = 10.0
"""Seconds the zygote the xdist workers share outlives the last of them (``formula-check
stop`` ends it sooner): long enough that a worker starting late still finds it."""
_NOTE = "formula_check_note"
"""The user property of an item whose formula was not checked: the line saying so."""


class BlockFailedError(Exception):
    """A block came out otherwise than its author said; ``report`` is what the user sees."""

    def __init__(self, report: str) -> None:
        super().__init__(report)
        self.report = report


def pytest_addoption(parser: pytest.Parser) -> None:
    """``--formula-check``, ``--formula-check-no-cache`` and the ``formula_check_paths`` ini."""
    group = parser.getgroup("formula-check", "verify the formulas of MkDocs pages")
    group.addoption(
        "--formula-check",
        action="store_true",
        help="collect every formula block of the Markdown pages and notebooks given as paths",
    )
    group.addoption(
        "--formula-check-no-cache",
        action="store_true",
        help="check every block afresh instead of reusing cached results",
    )
    parser.addini(
        "formula_check_paths",
        type="paths",
        default=[],
        help="docs folders whose formula blocks are always collected (turns the plugin on)",
    )


def pytest_configure(config: pytest.Config) -> None:
    """Switch on only when asked (see the module docstring)."""
    paths: list[Path] = config.getini("formula_check_paths")
    flag = bool(config.getoption("formula_check"))
    if not (flag or paths):
        return
    if paths and config.args_source is pytest.Config.ArgsSource.TESTPATHS:
        # No paths on the command line: the docs join the test folders instead of needing
        # to be listed in testpaths too.
        config.args = [*config.args, *(str(path) for path in paths)]
    run = FormulaCheckRun(config, paths, any_page=flag)
    config.stash[RUN] = run
    config.pluginmanager.register(run, "formula-check-run")


class FormulaCheckRun:
    """The plugin once switched on: which pages to collect, and the warm engines."""

    def __init__(self, config: pytest.Config, paths: list[Path], *, any_page: bool) -> None:
        self.config = config
        self.roots = [path.resolve() for path in paths]
        self.any_page = any_page
        self.use_cache = not config.getoption("formula_check_no_cache")
        self.xdist_worker = hasattr(config, "workerinput")
        """A worker of pytest-xdist: its engine shares a kept zygote with the others."""
        self.projects: dict[Path, Project] = {}
        self.site_pages: dict[Path, frozenset[Path]] = {}
        from formula_check.session import Engines

        self.engines = Engines()
        """One warm engine per project settings for the whole session."""
        self.unavailable = ""
        self.notes: list[str] = []

    def pytest_collect_file(self, file_path: Path, parent: pytest.Collector) -> pytest.File | None:
        """A page node for every Markdown page and notebook in the chosen paths."""
        from formula_check.project.loading import CHECKED_SUFFIXES

        if file_path.suffix not in CHECKED_SUFFIXES:
            return None
        resolved = file_path.resolve()
        if not (self.any_page or any(resolved.is_relative_to(root) for root in self.roots)):
            return None
        return FormulaPage.from_parent(parent, path=file_path)

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        """Keep each block's note that its formula was not checked, for the summary."""
        self.notes += [str(value) for name, value in report.user_properties if name == _NOTE]

    def pytest_terminal_summary(self, terminalreporter: TerminalReporter) -> None:
        """Name every block whose formula was not checked: it passed on its code alone."""
        notes = sorted(set(self.notes))
        if notes:
            terminalreporter.section("formula-check: formulas not checked")
            for note in notes:
                terminalreporter.line(note)

    def pytest_sessionfinish(self) -> None:
        """Stop the workers."""
        self.engines.close()

    def project_for(self, page: Path) -> Project:
        """The page's project (nearest ``mkdocs.yml`` up to the rootdir), oracles loaded."""
        from formula_check.project.loading import project_near

        folder = page.resolve().parent
        if folder not in self.projects:
            rootdir = self.config.rootpath
            project = project_near(folder, stop=rootdir, fallback=rootdir)
            project.load_oracles()
            self.projects[folder] = project
        return self.projects[folder]

    def is_built(self, page: Path, project: Project) -> bool:
        """Would MkDocs build this page? (``exclude_docs`` and hidden files say no.) A notebook
        is no page of the site: it is checked wherever it is collected."""
        from formula_check.project.loading import NOTEBOOK_SUFFIX, site_pages

        docs = project.docs_dir
        if project.config_file is None or docs is None or not page.is_relative_to(docs):
            return True
        if page.suffix == NOTEBOOK_SUFFIX:
            return True
        if project.config_file not in self.site_pages:
            pages = frozenset(path.resolve() for path in site_pages(project))
            self.site_pages[project.config_file] = pages
        return page in self.site_pages[project.config_file]

    def check(self, block: PageBlock, project: Project) -> CheckResult:
        """One block's result, on this process's warm engine for the project."""
        from formula_check.errors import FormulaCheckError
        from formula_check.session import checked_in_order

        if block.spec is None:
            return block.error_result()
        if self.unavailable:
            raise BlockFailedError(self.unavailable)
        options = project.options.but(
            workers=1,
            cache=self.use_cache and project.options.cache,
            keep_alive=max(project.options.keep_alive, XDIST_KEEP_ALIVE)
            if self.xdist_worker
            else project.options.keep_alive,
        )
        try:
            engine = self.engines.get(options.engine(project.root))
            [(_, result)] = checked_in_order(engine, [block])
            return result
        except FormulaCheckError as exc:  # no TensorFlow, no worker: every block would fail so
            self.unavailable = f"formula-check cannot run: {exc}"
            raise BlockFailedError(self.unavailable) from None


class FormulaPage(pytest.File):
    """A Markdown page or a notebook; its children are its formula blocks."""

    def collect(self) -> Iterator[pytest.Item]:
        """One item per block, named by its id (a repeated id gets ``@line``, in a notebook
        ``@cellN:line``)."""
        from formula_check.project.loading import read_blocks

        run = self.config.stash[RUN]
        project = run.project_for(self.path)
        if not run.is_built(self.path.resolve(), project):
            return
        seen: set[str] = set()
        for block in read_blocks(self.path, project, project.settings()):
            name = block.block_id
            if name in seen:
                where = block.location
                cell = f"cell{where.cell}:" if where.cell is not None else ""
                name = f"{name}@{cell}{where.line}"
            seen.add(name)
            yield FormulaItem.from_parent(self, name=name, block=block, project=project)

    def repr_failure(
        self, excinfo: ExceptionInfo[BaseException], style: TracebackStyle | None = None
    ) -> str | TerminalRepr:
        """A project that cannot be read says why, not where in our code."""
        from formula_check.errors import FormulaCheckError

        if isinstance(excinfo.value, FormulaCheckError):
            return str(excinfo.value)
        return super().repr_failure(excinfo)


class FormulaItem(pytest.Item):
    """One formula block, checked against its oracle."""

    def __init__(self, *, block: PageBlock, project: Project, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.block = block
        self.project = project

    def runtest(self) -> None:
        """Check the block; pass, fail, xfail or skip as its result and ``expect=`` say."""
        from formula_check.project.ci_formats import failure_report, formula_lines, formula_note
        from formula_check.session import is_failure

        result = self.config.stash[RUN].check(self.block, self.project)
        self.user_properties.append(("formula_check_status", result.status.value))
        if result.formula is not None:
            self.user_properties.append(("formula_check_formula", result.formula.state))
            self.add_report_section("call", "formula", "\n".join(formula_lines(result.formula)))
        note = formula_note(result)
        if note is not None:  # read back from the report, also under xdist
            self.user_properties.append((_NOTE, note))
        if is_failure(result, self.project.options.fail_on):
            raise BlockFailedError(failure_report(result, self.project.root))
        if result.expected_failure and result.outcome_ok:
            pytest.xfail(result.headline())
        if not result.outcome_ok:  # skipped, or a status the project's fail_on tolerates
            pytest.skip(result.headline() + (f"; {note}" if note else ""))

    def repr_failure(
        self, excinfo: ExceptionInfo[BaseException], style: TracebackStyle | None = None
    ) -> str | TerminalRepr:
        """The block's report instead of a traceback through the plugin."""
        if isinstance(excinfo.value, BlockFailedError):
            return excinfo.value.report
        return super().repr_failure(excinfo, style)

    def reportinfo(self) -> tuple[Path, int | None, str]:
        """Where the block is: its page and the line its fence opens on (0-based); in a
        notebook no line (a cell's line is not the file's), the name says the cell."""
        where = self.block.location
        if where.cell is not None:
            return self.path, None, f"{self.name} (cell {where.cell}:line {where.line})"
        return self.path, where.line - 1, self.name
