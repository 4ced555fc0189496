"""Shards' JSON reports -> the report, JUnit and summary of the run they split.

A sharded run's report (``check --shard i/n --json FILE``) is the usual report of its own
blocks plus a ``shard`` object: which shard, of what (a digest of every block the whole run
selected, in run order, and how many), the checker that made it, what the summary and the
exit code need (pages, deselected blocks, ``fail_on``) and each of its results whole, with
its place in the run. :func:`merge` checks that the shards fit together (one checker, one
run, each shard once, none missing, no block twice) and gives the results in run order, from
which the merged report is the unsharded run's own: the same function writes it.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from formula_check.errors import FormulaCheckError
from formula_check.project.loading import Project
from formula_check.project.sharding import Shard
from formula_check.results import CheckResult
from formula_check.sinks import Sink, for_sink
from formula_check.store.cache import result_from_json, result_to_json
from formula_check.store.digest import checker_digest
from formula_check.version import __version__

SHARD_FORMAT = 1
"""Bumped whenever a field of the ``shard`` object changes meaning."""


class MergeError(FormulaCheckError):
    """Shards' reports that do not make one run."""


def checker() -> str:
    """This checker: its version and the digest of its source (a report made by another
    cannot be merged with this one's: its verdicts may differ)."""
    return f"{__version__} (source {checker_digest()})"


def selection_digest(identities: Sequence[str], contents: Sequence[str]) -> str:
    """A digest of every block a run selected, in order, each with a digest of its content
    (its check's cache key, or its error): shards of one run agree on it, and shards made
    from two versions of a page whose blocks kept their ids do not."""
    lines = (f"{name}\0{content}" for name, content in zip(identities, contents, strict=True))
    return hashlib.sha256("\n".join(lines).encode()).hexdigest()[:16]


def split_digest(shards: Sequence[int]) -> str:
    """A digest of the shard each block (in run order) went to."""
    return hashlib.sha256(",".join(map(str, shards)).encode()).hexdigest()[:16]


@dataclasses.dataclass(frozen=True)
class RunFacts:
    """What a shard knows of the whole run: the merge checks that every shard says the same."""

    selection: str
    """A digest of every selected block, its content included (:func:`selection_digest`)."""
    split: str
    """A digest of which shard each block went to: shards split with different timings
    files disagree here, and would check some blocks twice and others never."""
    blocks: int
    pages: int
    deselected: int
    fail_on: tuple[str, ...]
    prefix: str
    """The project's folder within its repository (``""`` at its top): JUnit and annotations
    name pages from the repository's top."""


@dataclasses.dataclass(frozen=True)
class ShardReport:
    """One shard's report, read back."""

    path: Path
    shard: Shard
    checker: str
    facts: RunFacts
    seconds: float
    startup: float
    workers: int
    results: tuple[tuple[int, CheckResult], ...]
    """Each result with its place in the run's order."""


def shard_report(
    report: str,
    shard: Shard,
    facts: RunFacts,
    results: Sequence[tuple[int, CheckResult]],
    *,
    seconds: float,
    startup: float,
    workers: int,
) -> str:
    """``report`` (the JSON of the shard's own blocks) with its ``shard`` object, whose
    results hold any text a snippet printed as UTF-8 can (see :data:`~..sinks.Sink.UTF8`)."""
    document = json.loads(report)
    document["shard"] = {
        "format": SHARD_FORMAT,
        "index": shard.index,
        "count": shard.count,
        "checker": checker(),
        **dataclasses.asdict(facts),
        "fail_on": list(facts.fail_on),
        "seconds": round(seconds, 4),
        "startup": round(startup, 4),
        "workers": workers,
        "results": [
            {"position": position, "result": result_to_json(result)} for position, result in results
        ],
    }
    text = json.dumps(document, sort_keys=True, indent=2, ensure_ascii=False) + "\n"
    return for_sink(text, Sink.UTF8)


def read_shard(path: Path) -> ShardReport:
    """A shard's report; a file that is none says so."""
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise MergeError(f"{path}: cannot read: {exc.strerror}") from None
    except ValueError as exc:
        raise MergeError(f"{path}: not JSON: {exc}") from None
    part = document.get("shard") if isinstance(document, dict) else None
    if not isinstance(part, dict):
        raise MergeError(f"{path}: not a shard's report (made without --shard)")
    if part.get("format") != SHARD_FORMAT:
        raise MergeError(
            f"{path}: a shard report of format {part.get('format')!r}, not "
            f"{SHARD_FORMAT}: made by another version of formula-check"
        )
    try:
        return _shard_from(path, part)
    except (KeyError, TypeError, ValueError) as exc:
        raise MergeError(f"{path}: a damaged shard report ({type(exc).__name__}: {exc})") from None


def _shard_from(path: Path, part: Mapping[str, Any]) -> ShardReport:
    facts = RunFacts(
        selection=str(part["selection"]),
        split=str(part.get("split", "")),
        blocks=int(part["blocks"]),
        pages=int(part["pages"]),
        deselected=int(part["deselected"]),
        fail_on=tuple(str(status) for status in part["fail_on"]),
        prefix=str(part["prefix"]),
    )
    return ShardReport(
        path=path,
        shard=Shard(int(part["index"]), int(part["count"])),
        checker=str(part["checker"]),
        facts=facts,
        seconds=float(part["seconds"]),
        startup=float(part["startup"]),
        workers=int(part["workers"]),
        results=tuple(
            (int(entry["position"]), result_from_json(entry["result"], {}))
            for entry in part["results"]
        ),
    )


@dataclasses.dataclass(frozen=True)
class MergedRun:
    """The shards of one run put together."""

    shards: tuple[ShardReport, ...]
    results: tuple[CheckResult, ...]
    """In the unsharded run's order."""

    @property
    def facts(self) -> RunFacts:
        """What every shard said of the run."""
        return self.shards[0].facts

    @property
    def seconds(self) -> float:
        """The slowest shard's time: the run's, when the shards ran side by side."""
        return max(shard.seconds for shard in self.shards)

    @property
    def startup(self) -> float:
        """Worker start-up (TensorFlow imports), summed over the shards."""
        return sum(shard.startup for shard in self.shards)

    @property
    def workers(self) -> int:
        """Worker processes, summed over the shards."""
        return sum(shard.workers for shard in self.shards)


def merge(shards: Sequence[ShardReport]) -> MergedRun:
    """Put the shards of one run together; :class:`MergeError` when they are not that."""
    if not shards:
        raise MergeError("no shard reports to merge")
    _one_checker(shards)
    _one_run(shards)
    _one_tensorflow(shards)
    _every_shard_once(shards)
    by_position: dict[int, tuple[CheckResult, Path]] = {}
    for shard in shards:
        for position, result in shard.results:
            earlier = by_position.get(position)
            if earlier is not None:
                raise MergeError(
                    f"{result.location} [{result.block_id}] is in two shards: {earlier[1]} "
                    f"and {shard.path} (shards overlap)"
                )
            by_position[position] = (result, shard.path)
    total = shards[0].facts.blocks
    missing = sorted(set(range(total)) - set(by_position))
    if missing or len(by_position) != total:
        raise MergeError(
            f"the shards hold {len(by_position)} of the run's {total} blocks: a shard's report "
            "was cut short or edited"
        )
    ordered = tuple(by_position[position][0] for position in range(total))
    return MergedRun(tuple(sorted(shards, key=lambda s: s.shard.index)), ordered)


def _one_checker(shards: Sequence[ShardReport]) -> None:
    makers: dict[str, list[str]] = {}
    for shard in shards:
        makers.setdefault(shard.checker, []).append(str(shard.path))
    if len(makers) > 1:
        listed = "; ".join(
            f"{', '.join(paths)}: formula-check {name}" for name, paths in makers.items()
        )
        raise MergeError(
            f"the shards were made by different checkers ({listed}): run every "
            "shard with one version"
        )


def _one_run(shards: Sequence[ShardReport]) -> None:
    first = shards[0]
    for shard in shards[1:]:
        if shard.shard.count != first.shard.count:
            raise MergeError(
                f"{first.path} is shard {first.shard} but {shard.path} is shard {shard.shard}: "
                "shards of one run share their N"
            )
        if shard.facts.split != first.facts.split and shard.facts.selection == (
            first.facts.selection
        ):
            raise MergeError(
                f"{first.path} and {shard.path} split the run differently: they were given "
                "different --timings files (or one was given none); give every shard the same "
                "file, or none"
            )
        if shard.facts != first.facts:
            differ = [
                field.name
                for field in dataclasses.fields(RunFacts)
                if getattr(shard.facts, field.name) != getattr(first.facts, field.name)
            ]
            raise MergeError(
                f"{first.path} and {shard.path} are shards of different runs (their "
                f"{', '.join(differ)} differ: another site or version of its pages, -k or "
                "--fail-on)"
            )


def _one_tensorflow(shards: Sequence[ShardReport]) -> None:
    """The shards ran under one TensorFlow: verdicts made under two are not one run's."""
    versions: dict[str, Path] = {}
    for shard in shards:
        for _, result in shard.results:
            version = result.environment.tf_version
            if version and version not in versions:
                versions[version] = shard.path
    if len(versions) > 1:
        said = ", ".join(f"{version} ({path})" for version, path in versions.items())
        raise MergeError(f"the shards ran under different TensorFlow versions: {said}")


def _every_shard_once(shards: Sequence[ShardReport]) -> None:
    count = shards[0].shard.count
    seen: dict[int, Path] = {}
    for shard in shards:
        index = shard.shard.index
        if index in seen:
            raise MergeError(f"shard {shard.shard} given twice: {seen[index]} and {shard.path}")
        seen[index] = shard.path
    missing = [str(Shard(index, count)) for index in range(1, count + 1) if index not in seen]
    if missing:
        raise MergeError(f"shard{'s' if len(missing) > 1 else ''} {', '.join(missing)} missing")


def report_page(results: Sequence[CheckResult], project: Project, page: Path) -> str:
    """The site's report page (``formula-check-report.md``) for ``results``, to write at
    ``page`` in the docs folder of a build that does not check (``enabled: false``, ``report:
    false``): the page a checking build makes, its links resolved as MkDocs resolves them."""
    from mkdocs.structure.files import File
    from mkdocs.utils import get_relative_url

    from formula_check.project.loading import plugin_entry, read_config_file
    from formula_check.render import labels_for, report_markdown

    if project.config_file is None or project.docs_dir is None:
        raise MergeError(f"--report-page {page}: no mkdocs.yml here or above to write it for")
    docs = project.docs_dir.resolve()
    if not page.resolve().is_relative_to(docs):
        raise MergeError(f"--report-page {page}: not in the site's docs folder {docs}")
    data = read_config_file(project.config_file)
    directory_urls = bool(data.get("use_directory_urls", True))

    def url(path: Path) -> str:
        source = path.resolve().relative_to(docs).as_posix()
        return str(File(source, str(docs), str(project.root / "site"), directory_urls).url)

    here = url(page)

    def card(result: CheckResult) -> str:
        target = get_relative_url(url(project.root / result.location.file), here)
        return (target if not target.endswith("..") else target + "/") + f"#fc-{result.block_id}"

    theme = data.get("theme")
    language = plugin_entry(data).get("language") or (
        theme.get("language") if isinstance(theme, dict) else None
    )
    return report_markdown(list(results), labels_for(str(language or "en")), card)
