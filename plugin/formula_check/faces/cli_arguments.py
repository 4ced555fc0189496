"""The ``formula-check`` command line's words: its commands, their options and how each
option's text is read (a bad value is argparse's usage error, naming the option)."""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, TypeAlias

from formula_check.planning.option_values import timeout
from formula_check.project import sharding
from formula_check.session.options import STATUSES
from formula_check.version import __version__

if TYPE_CHECKING:
    Commands: TypeAlias = argparse._SubParsersAction[argparse.ArgumentParser]
    """The subcommands of the parser, each added by its own function below."""


def _statuses(text: str) -> frozenset[str]:
    chosen = frozenset(word.strip() for word in text.split(",") if word.strip())
    unknown = sorted(chosen - set(STATUSES))
    if unknown:
        raise argparse.ArgumentTypeError(
            f"unknown status {', '.join(unknown)}; choose from {', '.join(STATUSES)}"
        )
    return chosen


def _timeout(text: str) -> float:
    """``--timeout``, read as a block's ``timeout=`` is."""
    try:
        return timeout(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"{exc}: {text!r}") from None


def _positive(kind: Callable[[str], float], *, zero: bool = False) -> Callable[[str], float]:
    def parse(text: str) -> float:
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
        if not math.isfinite(value) or value < 0 or (value == 0 and not zero):
            raise argparse.ArgumentTypeError(
                f"must be {'0 or more' if zero else 'positive'}: {text!r}"
            )
        return value

    return parse


def _run_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--no-cache", action="store_true", help="ignore and do not write cache")
    parser.add_argument("--timeout", type=_timeout, metavar="S", help="seconds per block")
    parser.add_argument("--no-timing", action="store_true", help="skip timing the snippets")
    parser.add_argument(
        "--keep-alive",
        type=_positive(float, zero=True),
        metavar="S",
        help="keep TensorFlow imported S seconds for the next run (0: no)",
    )


def _shard(text: str) -> sharding.Shard:
    try:
        return sharding.parse_shard(text)
    except sharding.ShardError as exc:
        raise argparse.ArgumentTypeError(exc.message.removeprefix(f"--shard {text!r}: ")) from None


_EPILOG = """\
exit codes:
  0  every block came out as its author said
  1  drift, error or timeout (per --fail-on; a broken expect= promise always)
  2  the run itself could not happen (no such path, bad mkdocs.yml, unknown oracle
     module, TensorFlow missing)

'formula-check COMMAND --help' lists a command's options."""


def _command(commands: Commands, name: str, text: str) -> argparse.ArgumentParser:
    """A subcommand whose own --help opens with the line the command list shows for it."""
    return commands.add_parser(name, help=text, description=text[0].upper() + text[1:] + ".")


def build_parser() -> argparse.ArgumentParser:
    """The ``formula-check`` argument parser."""
    parser = argparse.ArgumentParser(
        prog="formula-check",
        description="Verify the LaTeX formulas of MkDocs pages.",
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--version",
        action="version",
        version=f"formula-check {__version__}",
        help="print the version and exit",
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for add in (_add_check, _add_merge, _add_show, _add_oracles, _add_stop, _add_assets):
        add(commands)
    return parser


def _add_check(commands: Commands) -> None:
    check = _command(commands, "check", "check every formula block of a project")
    check.add_argument(
        "path",
        nargs="?",
        type=Path,
        help="mkdocs.yml, a docs folder or one page (default: the nearest mkdocs.yml, here "
        "or in a folder above: within the repository, or outside one up to the home folder)",
    )
    check.add_argument(
        "--workers",
        type=_positive(int, zero=True),
        metavar="N",
        help="worker processes (0: one per core, at most 4)",
    )
    _run_options(check)
    check.add_argument(
        "-k",
        dest="pattern",
        metavar="PATTERN",
        help="only the blocks whose id, page or PAGE:LINE contains it or matches it as a "
        "glob (e.g. 'sdpa*')",
    )
    _report_options(check)
    check.add_argument(
        "--fail-on",
        type=_statuses,
        metavar="STATUSES",
        help=f"the statuses that fail the run, comma-separated, from {','.join(STATUSES)} "
        "(default: the project's fail_on option, else mismatch,error,timeout)",
    )
    check.add_argument(
        "--shard", type=_shard, metavar="I/N", help="check the I-th of N balanced parts (1-based)"
    )
    check.add_argument(
        "--timings",
        type=Path,
        metavar="REPORT",
        help="an earlier JSON report: --shard balances by its blocks' seconds",
    )


def _report_options(parser: argparse.ArgumentParser) -> None:
    """The reports a run writes: ``check``'s and ``merge``'s alike."""
    parser.add_argument("--json", type=Path, metavar="FILE", help="write the JSON report")
    parser.add_argument("--junit-xml", type=Path, metavar="FILE", help="write JUnit XML")
    parser.add_argument("--github", action="store_true", help="print GitHub annotations")


def _add_merge(commands: Commands) -> None:
    merged = _command(
        commands, "merge", "merge the JSON reports of a run's shards into the run's report"
    )
    merged.add_argument(
        "reports",
        nargs="+",
        type=Path,
        metavar="SHARD_JSON",
        help="each shard's report (check --shard I/N --json FILE), in any order",
    )
    _report_options(merged)
    merged.add_argument(
        "--report-page",
        type=Path,
        metavar="PAGE",
        help="write the site's report page there (in the docs of the nearest mkdocs.yml)",
    )


def _add_show(commands: Commands) -> None:
    show = _command(commands, "show", "check one block and print its full card")
    show.add_argument("where", metavar="PAGE:LINE", help="e.g. docs/attention.md:42")
    _run_options(show)


def _add_oracles(commands: Commands) -> None:
    oracles = _command(commands, "oracles", "list the oracle catalog")
    oracles.add_argument(
        "path",
        nargs="?",
        type=Path,
        help="a mkdocs.yml whose oracles option names your own oracles (default: the "
        "builtin catalog alone)",
    )


def _add_stop(commands: Commands) -> None:
    _command(commands, "stop", "stop the TensorFlow processes kept alive (keep_alive)")


def _add_assets(commands: Commands) -> None:
    written = _command(
        commands,
        "assets",
        "write the cards' stylesheet and MathJax into a docs folder (for Zensical, or any "
        "build without the MkDocs plugin) and print the lines mkdocs.yml needs",
    )
    written.add_argument(
        "folder",
        nargs="?",
        type=Path,
        help="where to write them (default: the docs folder of the nearest mkdocs.yml)",
    )
    written.add_argument("--no-mathjax", action="store_true", help="your site loads its own")
