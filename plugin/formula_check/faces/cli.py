"""``formula-check``: check a docs project's formulas in CI, without building the site.

Exit codes: 0 every block came out as its author said; 1 drift, error or timeout (per
``--fail-on``; a broken ``expect=`` promise always); 2 the run itself could not happen
(no such path, bad ``mkdocs.yml``, unknown oracle module, TensorFlow missing).
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import fnmatch
import logging
import os
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path

from formula_check.errors import FormulaCheckError
from formula_check.faces.cli_arguments import build_parser
from formula_check.model import Location
from formula_check.oracles import all_oracles
from formula_check.pages.blocks import PageBlock, Settings
from formula_check.project import ci_formats, merging, sharding
from formula_check.project.loading import (
    CHECKED_SUFFIXES,
    CONFIG_NAME,
    Project,
    ProjectError,
    find_config,
    load_project,
    project_near,
    read_blocks,
    repository_prefix,
    search_limit,
    target_pages,
)
from formula_check.project.progress import Progress, summary, wants_colour
from formula_check.render import report_json
from formula_check.results import CheckResult
from formula_check.session import Checker, EngineMaker, checked_in_order, is_failure, open_engine
from formula_check.session.options import Options
from formula_check.sinks import SafeLines, Sink, for_sink
from formula_check.store import sealed_files as sealed
from formula_check.store.cache import cache_key

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_INTERRUPTED = 0, 1, 2, 130


class UsageError(FormulaCheckError):
    """The command line asks for something that does not exist."""


def _stop(args: argparse.Namespace) -> int:
    from formula_check.session.engine import stop_kept

    stopped = stop_kept()
    print(f"formula-check: stopped {stopped} kept zygote{'s' if stopped != 1 else ''}")
    return EXIT_OK


def _assets(args: argparse.Namespace) -> int:
    from formula_check.project import assets

    folder = args.folder
    if folder is None:
        found = _nearest_site()
        folder = load_project(found).docs_dir if found is not None else None
    if folder is None:
        raise UsageError(f"no {CONFIG_NAME} here or above: name the docs folder to write into")
    mathjax = not args.no_mathjax
    written = assets.write_assets(folder, mathjax=mathjax)
    print(f"formula-check: wrote {len(written)} files under {folder / assets.ASSET_DIR}")
    print("add to mkdocs.yml (the paths are relative to the docs folder):")
    print("extra_css:")
    print("".join(f"  - {path}\n" for path in assets.stylesheets()), end="")
    print("extra_javascript:")
    print("".join(f"  - {path}\n" for path in assets.scripts(mathjax=mathjax)), end="")
    return EXIT_OK


def main(argv: Sequence[str] | None = None, *, make_engine: EngineMaker = open_engine) -> int:
    """Run the command line; returns the exit code (see the module docstring). ``make_engine``
    makes the engine from the settings (the faces' tests give one making a fake)."""
    args = build_parser().parse_args(argv)
    args.make_engine = make_engine
    commands = {
        "check": _check,
        "show": _show,
        "oracles": _list_oracles,
        "stop": _stop,
        "assets": _assets,
        "merge": _merge,
    }
    command = commands[args.command]
    try:
        with _printed(sealed.log):
            return command(args)
    except FormulaCheckError as exc:  # includes MissingTensorFlowError (says what to install)
        print(for_sink(f"formula-check: error: {exc}", Sink.LINE), file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print("formula-check: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        # `formula-check oracles | head`: the reader left; say nothing more to it.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_FAILED


@contextlib.contextmanager
def _printed(logger: logging.Logger) -> Iterator[None]:
    """Print what ``logger`` says (INFO and above) on stderr while a command runs: the cache's
    problems, which a build shows in its log."""
    handler = logging.StreamHandler(sys.stderr)
    handler.addFilter(SafeLines())
    level = logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    try:
        yield
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)


# -- shared steps -----------------------------------------------------------------------------


def _prepare(project: Project, args: argparse.Namespace) -> Settings:
    """Load the project's own oracles and decide the settings every block is built with."""
    project.load_oracles()
    settings = project.settings(args.timeout)
    return dataclasses.replace(settings, timing=False) if args.no_timing else settings


def _nearest_site() -> Path | None:
    """The ``mkdocs.yml`` here or in a folder above: within this repository (the folder
    holding ``.git``); outside one, up to the home folder when below it (a stranger's
    ``mkdocs.yml`` higher up is never taken), else up to the root. The one found above is
    named on stderr."""
    here = Path.cwd().resolve()
    found = find_config(here, stop=search_limit(here))
    if found is not None and found.parent != here:
        print(f"formula-check: checking {found}", file=sys.stderr)
    return found


def _from_repository_top(results: Sequence[CheckResult], prefix: str) -> list[CheckResult]:
    """``results`` with page paths relative to the repository's top (``prefix``: the project
    folder in it) rather than the project folder: GitHub places annotations, and CI systems
    JUnit files, by the path in the repository, and docs often live in a subfolder of it."""
    if not prefix:
        return list(results)
    return [
        dataclasses.replace(
            result,
            location=dataclasses.replace(result.location, path=f"{prefix}/{result.location.path}"),
        )
        for result in results
    ]


def _no_site_here() -> Path:
    raise ProjectError(
        f"no {CONFIG_NAME} here or in a folder above (up to the repository's top, or outside "
        f"a repository up to the home folder); name the site's {CONFIG_NAME}, a docs folder "
        "or a page"
    )


def _options(project: Project, args: argparse.Namespace, workers: int | None) -> Options:
    """The project's options with the command line's over them."""
    options = project.options
    return options.but(
        workers=options.workers if workers is None else workers,
        cache=options.cache and not args.no_cache,
        keep_alive=options.keep_alive if args.keep_alive is None else args.keep_alive,
    )


def _engine(
    options: Options, project: Project, args: argparse.Namespace
) -> contextlib.closing[Checker]:
    """The engine of this run, closed with it."""
    maker: EngineMaker = args.make_engine
    return contextlib.closing(maker(options.engine(project.root)))


def _label(where: Location, block_id: str) -> str:
    return f"{where} [{block_id}]"


def run_blocks(
    engine: Checker, blocks: Sequence[PageBlock], progress: Progress
) -> list[CheckResult]:
    """Results in block order; broken blocks become ERROR results without reaching a worker."""
    labels = [_label(b.location, b.block_id) for b in blocks if b.spec is not None] + [""]
    progress.checking(labels[0])
    results, checked = [], 0
    for block, result in checked_in_order(engine, blocks):
        if block.spec is not None:
            checked += 1
            progress.checking(labels[checked])
        progress.finished(result)
        results.append(result)
    return results


# -- check ------------------------------------------------------------------------------------


def _selected(block: PageBlock, pattern: str | None) -> bool:
    if pattern is None:
        return True
    names = (block.block_id, block.location.path, str(block.location))
    return any(pattern in name or fnmatch.fnmatchcase(name, pattern) for name in names)


def _write(path: Path, data: str | bytes) -> None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(data, bytes):
            path.write_bytes(data)
        else:
            path.write_text(data, encoding="utf-8")
    except OSError as exc:
        raise UsageError(f"{path}: cannot write: {exc.strerror}") from None


def _check(args: argparse.Namespace) -> int:
    project, pages, blocks = _project_blocks(args)
    chosen = [block for block in blocks if _selected(block, args.pattern)]
    if blocks and not chosen:
        # A mistyped -k must not pass CI by checking nothing.
        raise UsageError(f"-k {args.pattern!r} matches none of the {len(blocks)} blocks")
    split = _shard_split(chosen, args) if args.shard else []
    facts = _run_facts(project, args, (len(pages), blocks, chosen), split)
    positions = (
        [at for at, found in enumerate(split) if found == args.shard.index - 1]
        if args.shard
        else list(range(len(chosen)))
    )
    mine = [chosen[position] for position in positions]
    options = _options(project, args, args.workers)
    with _engine(options, project, args) as engine, Progress(sys.stderr, len(mine)) as bar:
        results = run_blocks(engine, mine, bar)
        seconds = bar.elapsed()
        startup, starters = engine.startup_seconds, options.worker_count()
    if args.json is not None:
        report = report_json(results)
        if args.shard:
            mine_ran = list(zip(positions, results, strict=True))
            report = merging.shard_report(
                report,
                args.shard,
                facts,
                mine_ran,
                seconds=seconds,
                startup=startup,
                workers=starters,
            )
        _write(args.json, report)
    pages_held = len({block.location.path for block in mine}) if args.shard else facts.pages
    ran = _Ran(results, pages_held, seconds, startup, starters)
    shard = [("shard", str(args.shard))] if args.shard else []
    return _tell(ran, facts, args, junit_properties=shard)


def _project_blocks(args: argparse.Namespace) -> tuple[Project, list[Path], list[PageBlock]]:
    """The project ``check`` names (or the nearest), its pages and every block they hold."""
    target = args.path or _nearest_site() or _no_site_here()
    project, pages = target_pages(target)
    settings = _prepare(project, args)
    if not pages and project.config_file is None:
        # Neither a site nor a page: a mistyped path must not pass CI by checking nothing.
        raise UsageError(
            f"{target}: nothing to check: no {CONFIG_NAME} here or in a folder above, and no "
            f"page ({', '.join(sorted(CHECKED_SUFFIXES))}) in it"
        )
    return project, pages, [b for page in pages for b in read_blocks(page, project, settings)]


def _run_facts(
    project: Project,
    args: argparse.Namespace,
    found: tuple[int, Sequence[PageBlock], Sequence[PageBlock]],
    split: Sequence[int],
) -> merging.RunFacts:
    """What every shard of a run agrees on (``found``: the pages, blocks and chosen blocks):
    merging refuses shards of another selection, split or ``--fail-on``."""
    pages, blocks, chosen = found
    fail_on = args.fail_on if args.fail_on is not None else project.options.fail_on
    deselected = len(blocks) - len(chosen)
    return merging.RunFacts(
        selection=merging.selection_digest(
            sharding.identities(_places(chosen)), [_content(block) for block in chosen]
        ),
        split=merging.split_digest(split),
        blocks=len(chosen),
        # pages checked: with -k, those holding a chosen block
        pages=len({block.location.path for block in chosen}) if deselected else pages,
        deselected=deselected,
        fail_on=tuple(sorted(fail_on)),
        prefix=repository_prefix(project.root),
    )


@dataclasses.dataclass(frozen=True)
class _Ran:
    """What a run (or the shards of one, merged) tells: its results and its costs."""

    results: Sequence[CheckResult]
    pages: int
    seconds: float
    startup: float
    starters: int


def _tell(
    ran: _Ran,
    facts: merging.RunFacts,
    args: argparse.Namespace,
    *,
    junit_properties: Sequence[tuple[str, str]] = (),
    lead: Sequence[str] = (),
) -> int:
    """JUnit, annotations, the summary; the exit code the results make."""
    fail_on = frozenset(facts.fail_on)

    def failing(result: CheckResult) -> bool:
        return is_failure(result, fail_on)

    results = ran.results
    from_top = _from_repository_top(results, facts.prefix)
    if args.junit_xml is not None:
        _write(args.junit_xml, ci_formats.junit_xml(from_top, failing, junit_properties))
    if args.github:
        for line in ci_formats.github_annotations(from_top, failing):
            print(line)
    told = summary(
        results,
        pages=ran.pages,
        seconds=ran.seconds,
        deselected=facts.deselected,
        is_failure=failing,
        startup=ran.startup,
        starters=ran.starters,
        colour=not args.github and wants_colour(sys.stdout),
    )
    told = "\n".join([*lead, told, *ci_formats.formula_notes(results)])
    print(ci_formats.github_safe(told))  # runners read workflow commands off any step's output
    return EXIT_FAILED if any(failing(result) for result in results) else EXIT_OK


def _places(blocks: Sequence[PageBlock]) -> list[tuple[str, str]]:
    return [(block.location.path, block.block_id) for block in blocks]


def _shard_split(chosen: Sequence[PageBlock], args: argparse.Namespace) -> list[int]:
    """The shard (from 0) of each block of ``chosen``; this shard's count said on stderr."""
    seconds: dict[str, float] = {}
    if args.timings is not None and not args.timings.exists():
        # The first run of a CI cache has no report yet: that costs balance, never a verdict.
        print(
            f"formula-check: no {args.timings} yet: shards balanced by block count", file=sys.stderr
        )
    elif args.timings is not None:
        seconds = sharding.read_timings(args.timings)
    places = _places(chosen)
    shards = sharding.split(places, seconds, args.shard.count)
    known = sum(name in seconds for name in sharding.identities(places))
    balance = f"balanced by the time of {known}" if args.timings else "balanced by count"
    mine = sum(found == args.shard.index - 1 for found in shards)
    print(
        f"formula-check: shard {args.shard}: {mine} of {len(chosen)} blocks ({balance})",
        file=sys.stderr,
    )
    return shards


def _content(block: PageBlock) -> str:
    """What a block checks, as a digest: its check's key, or its error."""
    if block.spec is not None:
        try:
            return cache_key(block.spec, "", "")
        except FormulaCheckError as exc:  # an unknown oracle: checking it says so
            return f"error: {exc.message}"
    return f"error: {block.error.message if block.error else ''}"


# -- merge ------------------------------------------------------------------------------------


_OLD_MERGE = (
    "formula-check: deprecated: 'merge OUT_JSON SHARD_JSON...' names its output first; write "
    "'merge --json OUT_JSON SHARD_JSON...', as check takes --json (the old form will go)"
)


def _merge_paths(args: argparse.Namespace) -> tuple[Path, list[Path]]:
    """The merged report's path and the shards' paths: ``--json OUT``, or, deprecated, the
    first of two or more positional paths (the form before ``--json``)."""
    reports: list[Path] = args.reports
    if args.json is not None:
        return args.json, reports
    if len(reports) < 2:
        raise UsageError("merge: name the merged report to write with --json FILE")
    print(_OLD_MERGE, file=sys.stderr)
    return reports[0], reports[1:]


def _merge(args: argparse.Namespace) -> int:
    out, shards = _merge_paths(args)
    run = merging.merge([merging.read_shard(path) for path in shards])
    _write(out, report_json(run.results))
    if args.report_page is not None:
        project = project_near(Path.cwd())
        _write(args.report_page, merging.report_page(run.results, project, args.report_page))
    times = ", ".join(f"{shard.seconds:.1f} s" for shard in run.shards)
    lead = [f"formula-check: merged {len(run.shards)} shards ({times})"]
    ran = _Ran(run.results, run.facts.pages, run.seconds, run.startup, run.workers)
    return _tell(ran, run.facts, args, lead=lead)


# -- show -------------------------------------------------------------------------------------


def _parse_where(text: str) -> tuple[Path, int]:
    page, sep, line = text.rpartition(":")
    if not sep or not line.isdigit() or not page:
        raise UsageError(f"{text!r}: expected PAGE:LINE, e.g. docs/attention.md:42")
    path = Path(page)
    if not path.is_file():
        raise UsageError(f"{page}: no such page")
    return path, int(line)


def _last_line(opening: int, body: str, closed: bool) -> int:
    """The page line where a fence opening at ``opening`` ends (its closing fence; an unclosed
    one runs to the end of the page). An empty fence reads as holding one blank line: the
    scanner's text cannot tell the two apart, and one line too many beats one too few."""
    return opening + body.count("\n") + 1 + (1 if closed else 0)


def block_lines(block: PageBlock) -> range:
    """The page lines of ``block``: from its formula fence to the end of the python fence it
    runs (the prose between them included), or of the formula fence when its code lies
    elsewhere (``code=``)."""
    fence = block.fence
    end = _last_line(fence.line, fence.latex, fence.closed)
    code = fence.snippet
    if code is not None and (block.spec is None or block.spec.snippet.origin == "inline"):
        end = _last_line(fence.line - fence.row + code.row, code.body, code.closed)
    return range(fence.line, end + 1)


def block_at(blocks: Sequence[PageBlock], line: int) -> PageBlock | None:
    """The block whose lines (:func:`block_lines`) hold ``line``, if any."""
    return next((block for block in reversed(blocks) if line in block_lines(block)), None)


def _show(args: argparse.Namespace) -> int:
    path, line = _parse_where(args.where)
    project = project_near(path.parent)
    settings = _prepare(project, args)
    blocks = read_blocks(path, project, settings)
    block = block_at(blocks, line)
    if block is None:
        starts = ", ".join(str(b.location.line) for b in blocks) or "none"
        raise UsageError(f"{path}:{line}: no formula block here (blocks open at lines: {starts})")
    with _engine(_options(project, args, 1), project, args) as engine:
        [(_, result)] = checked_in_order(engine if block.spec else None, [block])
    print(ci_formats.text_card(result, project.root))
    return EXIT_FAILED if is_failure(result, project.options.fail_on) else EXIT_OK


# -- oracles ----------------------------------------------------------------------------------


def _list_oracles(args: argparse.Namespace) -> int:
    config = args.path if args.path is not None else Path(CONFIG_NAME)
    if args.path is not None or config.is_file():
        if not config.is_file():
            raise UsageError(f"{config}: no such file")
        load_project(config).load_oracles()
    for oracle in all_oracles():
        dims = " ".join(f"{name}={size}" for name, size in oracle.dims.items())
        print(f"{oracle.name}: {oracle.title}")
        print(f"  {oracle.signature()}")
        print(f"  default dims: {dims}")
        print(f"  {' '.join(oracle.latex.split())}")
        print(f"  source: {oracle.source}")
    return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
