"""``formula-check`` on the fixture sites: exit codes, summaries and the CI formats.

The three sites are first checked together, each by the real console entry point in its own
process (so the TensorFlow imports overlap), once for the whole test run; that fills each
copy's result cache, and the in-process ``main()`` runs after it read the cache instead of
starting TensorFlow again.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from fakes import FakeMaker
from formula_check.errors import MissingTensorFlowError
from formula_check.faces import cli
from formula_check.model import Location, Status
from formula_check.oracles import all_oracles
from formula_check.project import ci_formats
from formula_check.project.ci_formats import github_annotation, github_safe
from formula_check.project.loading import load_project
from formula_check.project.progress import Progress, summary
from formula_check.results import CheckResult
from sites import built_once

ROOT = Path(__file__).resolve().parent.parent
FIXTURE_SITES = ROOT / "fixtures" / "sites"
EXAMPLES = ROOT / "docs" / "examples"
SITES = ("good", "drift", "bad-input")


@dataclass
class Run:
    """A finished command: exit code, what it printed, and the project it ran in."""

    code: int
    out: str
    err: str
    project: Path


def formula_lines(page: Path) -> list[int]:
    """The line of every formula fence of a fixture page, read independently of the code."""
    text = page.read_text(encoding="utf-8").splitlines()
    return [number for number, line in enumerate(text, 1) if line.startswith("```formula")]


def run_sites(folder: Path) -> None:
    """Each site copied into ``folder`` and checked by the console script, all three at
    once; each run's exit code and output kept beside its project."""
    started = {}
    for name in SITES:
        project = folder / name
        shutil.copytree(FIXTURE_SITES / name, project, ignore=shutil.ignore_patterns(".cache"))
        command = [sys.executable, "-m", "formula_check.faces.cli", "check", "--no-timing"]
        if name == "bad-input":
            # Its hang and its crash each cost a worker restart; two workers overlap them.
            command += ["--workers", "2"]
        process = subprocess.Popen(
            command, cwd=project, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        started[name] = (process, project)
    for process, project in started.values():
        out, err = process.communicate(timeout=300)
        said = {"code": process.returncode, "out": out, "err": err}
        project.with_suffix(".json").write_text(json.dumps(said), encoding="utf-8")


@pytest.fixture(scope="module")
def first_runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Run]:
    """The three first runs, made once for the whole test run (:func:`sites.built_once`)."""
    folder = built_once(tmp_path_factory, "cli", run_sites)
    return {
        name: Run(**json.loads((folder / f"{name}.json").read_text("utf-8")), project=folder / name)
        for name in SITES
    }


def check(
    first_runs: dict[str, Run],
    site: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    *args: str,
) -> Run:
    """``formula-check check --no-timing ARGS`` in-process, in a site whose cache is warm."""
    project = first_runs[site].project
    monkeypatch.chdir(project)
    code = cli.main(["check", "--no-timing", *args])
    captured = capsys.readouterr()
    return Run(code, captured.out, captured.err, project)


# -- exit codes and summaries ------------------------------------------------------------------


@pytest.mark.tf
def test_good_site_exits_0_with_a_summary(first_runs: dict[str, Run]) -> None:
    run = first_runs["good"]
    assert run.code == 0, run.out + run.err
    assert "formula-check: 13 blocks on 3 pages in " in run.out
    assert ": 12 verified, 1 expected failure" in run.out
    assert "slowest:" in run.out
    assert re.search(
        r"starting workers \(TensorFlow import(, summed over \d workers)?\): ", run.out
    )
    assert "failures" not in run.out
    # Not a terminal: one plain progress line per block, no carriage returns.
    assert "[13/13] " in run.err
    assert "\r" not in run.err


@pytest.mark.tf
def test_drift_site_exits_1_naming_every_drift(first_runs: dict[str, Run]) -> None:
    run = first_runs["drift"]
    assert run.code == 1, run.err
    lines = formula_lines(run.project / "docs" / "index.md")
    assert len(lines) == 9
    failures = run.out.split("failures (9):\n", 1)[1].splitlines()
    failures = [line for line in failures if line.startswith("  docs/")]
    assert [line.split(" [", 1)[0].strip() for line in failures] == [
        f"docs/index.md:{line}" for line in lines
    ]
    assert all("mismatch: output: max |Δ| = " in line for line in failures)


@pytest.mark.tf
def test_bad_input_site_exits_1(first_runs: dict[str, Run]) -> None:
    run = first_runs["bad-input"]
    assert run.code == 1, run.err
    assert "1 verified, 7 error, 1 timeout" in run.out
    assert "docs/index.md:55 [hangs]: timeout: " in run.out
    assert "docs/index.md:21 [typo-oracle]: error: SpecError: " in run.out


@pytest.mark.tf
def test_a_cached_rerun_reads_the_cache(first_runs, monkeypatch, capsys) -> None:
    run = check(first_runs, "good", monkeypatch, capsys)
    assert run.code == 0
    assert "(13 cached)" in run.out
    assert "starting workers" not in run.out  # nothing ran: no worker was started


@pytest.mark.tf
def test_one_page_or_one_folder(first_runs, monkeypatch, capsys) -> None:
    run = check(first_runs, "good", monkeypatch, capsys, "docs/layers.md")
    assert "5 blocks on 1 page in " in run.out
    run = check(first_runs, "good", monkeypatch, capsys, "docs")
    assert "13 blocks on 3 pages in " in run.out


@pytest.mark.tf
def test_fail_on_decides_what_fails(first_runs, monkeypatch, capsys) -> None:
    run = check(first_runs, "drift", monkeypatch, capsys, "--fail-on", "error,timeout")
    assert run.code == 0
    assert "9 mismatch" in run.out


# -- selection ------------------------------------------------------------------------------


@pytest.mark.tf
@pytest.mark.parametrize(
    ("pattern", "count", "pages"),
    [
        ("softmax", 2, "1 page"),
        ("sdpa*", 2, "1 page"),
        ("docs/layers.md", 5, "1 page"),
        ("docs/index.md:30", 1, "1 page"),
    ],
)
def test_k_selects_by_id_or_page(first_runs, monkeypatch, capsys, pattern, count, pages) -> None:
    run = check(first_runs, "good", monkeypatch, capsys, "-k", pattern)
    assert run.code == 0
    # the pages counted are those holding a chosen block
    assert f"formula-check: {count} block{'s' if count > 1 else ''} on {pages} in " in run.out
    assert f"({13 - count} deselected)" in run.out or f"cached, {13 - count} deselected" in run.out


@pytest.mark.tf
def test_k_matching_nothing_exits_2(first_runs, monkeypatch, capsys) -> None:
    run = check(first_runs, "good", monkeypatch, capsys, "-k", "nope")
    assert run.code == 2
    assert "-k 'nope' matches none of the 13 blocks" in run.err


# -- the CI formats ---------------------------------------------------------------------------


@pytest.mark.tf
def test_json_report_has_every_block_status(first_runs, monkeypatch, capsys, tmp_path) -> None:
    report = tmp_path / "out" / "report.json"
    run = check(first_runs, "good", monkeypatch, capsys, "--json", str(report))
    assert run.code == 0
    document = json.loads(report.read_text(encoding="utf-8"))
    statuses = {block["id"]: block["status"] for block in document["blocks"]}
    assert len(statuses) == 13
    assert statuses.pop("softmax-wrong-axis") == "mismatch"
    assert set(statuses.values()) == {"verified"}
    assert document["summary"]["failed"] == 0


@pytest.mark.tf
def test_junit_xml_one_testcase_per_block(first_runs, monkeypatch, capsys, tmp_path) -> None:
    good, drift = tmp_path / "good.xml", tmp_path / "drift.xml"
    check(first_runs, "good", monkeypatch, capsys, "--junit-xml", str(good))
    check(first_runs, "drift", monkeypatch, capsys, "--junit-xml", str(drift))
    suite = ET.parse(good).getroot()
    cases = suite.findall("testcase")
    assert (len(cases), suite.get("failures"), suite.get("skipped")) == (13, "0", "1")
    skipped = [case for case in cases if case.find("skipped") is not None]
    assert skipped[0].get("name") == "softmax-wrong-axis"
    assert skipped[0].get("classname") == "docs/index.md"
    assert "expected failure (mismatch)" in skipped[0].find("skipped").get("message")
    suite = ET.parse(drift).getroot()
    failures = [case.find("failure") for case in suite.findall("testcase")]
    assert suite.get("failures") == "9"
    assert failures[0].get("message").startswith("docs/index.md:13 [scale-by-dk]: mismatch: ")


@pytest.mark.tf
def test_github_annotations(first_runs, monkeypatch, capsys) -> None:
    run = check(first_runs, "drift", monkeypatch, capsys, "--github")
    annotations = [line for line in run.out.splitlines() if line.startswith("::")]
    assert len(annotations) == 9
    pattern = re.compile(
        r"::error file=docs/index\.md,line=(\d+),title=formula-check \[([\w.-]+)\]::"
        r"docs/index\.md:(\d+) \[([\w.-]+)\]: mismatch: .*max \|Δ\|"
    )
    for line in annotations:
        match = pattern.match(line)
        assert match, line
        assert match[1] == match[3] and match[2] == match[4]


def test_no_line_of_user_text_reads_as_a_github_command() -> None:
    """A snippet's error message is quoted in the summary: a line of it must not start a
    workflow command (the runner ignores blanks before ``::``)."""
    said = "boom\n::error file=x::forged\n    ::add-mask::secret\nkeep :: this"
    safe = github_safe(said)
    assert [line.lstrip().startswith("::") for line in safe.split("\n")] == [False] * 4
    assert safe.split("\n")[3] == "keep :: this" and safe.replace("\u200b", "") == said
    # the older command form, anywhere in a line, and a lone carriage return as a line end
    odd = github_safe("text ##[error]forged\rthen\r::warning::forged too")
    assert "##[" not in odd and not any(line.startswith("::") for line in odd.split("\n"))


def test_github_annotation_escapes_per_github_rules() -> None:
    result = CheckResult(
        "odd", Location("docs/a,b:c.md", 7), "softmax", Status.ERROR, message="50%\r\nnext"
    )
    line = github_annotation(result, failing=True)
    assert line.startswith("::error file=docs/a%2Cb%3Ac.md,line=7,title=formula-check [odd]::")
    assert line.endswith("error: 50%25 next"), "a headline is one line; the % is escaped"
    assert "\n" not in line
    assert ci_formats._escape_data("50%\r\nnext") == "50%25%0D%0Anext"


# -- usage errors exit 2 ----------------------------------------------------------------------


def test_missing_path_exits_2(tmp_path, capsys) -> None:
    assert cli.main(["check", str(tmp_path / "nowhere")]) == 2
    assert "no such file or folder" in capsys.readouterr().err


def test_missing_mkdocs_yml_exits_2(tmp_path, monkeypatch, capsys) -> None:
    monkeypatch.chdir(tmp_path)
    assert cli.main(["check"]) == 2
    assert "no mkdocs.yml here or in a folder above" in capsys.readouterr().err


def test_a_site_above_is_found_within_the_repository_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "mkdocs.yml").write_text("site_name: someone else's\n", encoding="utf-8")
    work = tmp_path / "repository" / "notes"
    work.mkdir(parents=True)
    (tmp_path / "repository" / ".git").mkdir()
    monkeypatch.chdir(work)
    assert cli.main(["check"]) == 2, "the mkdocs.yml outside the repository is not ours"
    assert "no mkdocs.yml here or in a folder above" in capsys.readouterr().err


def test_outside_a_repository_a_site_above_is_found_up_to_the_home_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    home = tmp_path / "home"
    docs = home / "site" / "docs"
    docs.mkdir(parents=True)
    (home / "site" / "mkdocs.yml").write_text("site_name: ours\n", encoding="utf-8")
    (tmp_path / "mkdocs.yml").write_text("site_name: someone else's\n", encoding="utf-8")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.chdir(docs)
    assert cli._nearest_site() == home / "site" / "mkdocs.yml"
    assert f"formula-check: checking {home / 'site' / 'mkdocs.yml'}" in capsys.readouterr().err
    monkeypatch.chdir(home)
    assert cli._nearest_site() is None, "not above the home folder"


@pytest.mark.tf
def test_run_inside_the_docs_folder_checks_the_site_above(
    first_runs: dict[str, Run], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    project = first_runs["good"].project
    (project / ".git").mkdir(exist_ok=True)  # a repository holding the site
    monkeypatch.chdir(project / "docs")
    assert cli.main(["check", "--no-timing", "-k", "sdpa"]) == 0
    out = capsys.readouterr().out
    assert "2 blocks on 1 page" in out and "2 verified" in out
    assert "11 deselected" in out, "the whole site was read, not only this folder"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("site_name: [unclosed\n", "error parsing the configuration file"),
        ("plugins:\n  - formula-check:\n      workers: many\n", "option 'workers'"),
        ("plugins:\n  - formula-check:\n      wrokers: 2\n", "option 'wrokers'"),
        ("plugins:\n  - formula-check:\n      fail_on: [drift]\n", "option 'fail_on'"),
        (
            "plugins:\n  - formula-check:\n      workers: -1\n",
            "option 'workers' has a bad value -1",
        ),
        (
            "plugins:\n  - formula-check:\n      keep_alive: -1\n",
            "option 'keep_alive' has a bad value -1 (seconds, 0 to stop with the run)",
        ),
        (
            "plugins:\n  - formula-check:\n      oracles: ['no_such_pkg.mod:x']\n",
            "mkdocs.yml: plugin 'formula-check', option 'oracles': cannot import oracle module "
            "'no_such_pkg.mod': No module named 'no_such_pkg'",
        ),
        ("- just\n- a list\n", "expected a mapping"),
    ],
)
def test_bad_mkdocs_yml_exits_2(tmp_path, capsys, text, message) -> None:
    (tmp_path / "docs").mkdir()
    (tmp_path / "mkdocs.yml").write_text(text, encoding="utf-8")
    assert cli.main(["check", str(tmp_path / "mkdocs.yml")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("formula-check: error: ")
    assert message in err


def test_bad_command_line_exits_2(capsys) -> None:
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["check", "--fail-on", "drift"])
    assert exit_info.value.code == 2
    assert "unknown status drift" in capsys.readouterr().err


def test_missing_tensorflow_names_what_to_install(tmp_path, monkeypatch, capsys) -> None:
    """The command works however the package was installed: before a release, from a clone,
    `pip install 'mkdocs-formula-check[cpu]'` finds nothing to install."""

    def no_tensorflow(spec):
        raise MissingTensorFlowError("python3")

    project = tmp_path / "good"
    shutil.copytree(FIXTURE_SITES / "good", project, ignore=shutil.ignore_patterns(".cache"))
    monkeypatch.chdir(project)
    code = cli.main(["check", "--no-cache"], make_engine=FakeMaker(no_tensorflow))
    assert code == 2
    err = capsys.readouterr().err
    assert "`pip install tensorflow-cpu`" in err and "mkdocs-formula-check[" not in err


def test_mkdocs_yml_with_python_and_env_tags(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("FC_TIMEOUT", "9")
    (tmp_path / "docs").mkdir()
    (tmp_path / "mkdocs.yml").write_text(
        "site_name: !ENV [SITE_NAME, Tags]\n"
        "markdown_extensions:\n"
        "  - pymdownx.emoji:\n"
        "      emoji_index: !!python/name:no_such_module.twemoji\n"
        "  - pymdownx.snippets:\n"
        "      base_path: !relative $config_dir\n"
        "plugins:\n"
        "  - search\n"
        "  - formula-check:\n"
        "      timeout: !ENV FC_TIMEOUT\n"
        "      fail_on: [error]\n",
        encoding="utf-8",
    )
    project = load_project(tmp_path / "mkdocs.yml")
    assert project.options.timeout == 9.0
    assert project.options.fail_on == frozenset({"error"})
    assert cli.main(["check", str(tmp_path)]) == 0


# -- oracles and show -------------------------------------------------------------------------


def test_oracles_lists_the_catalog(tmp_path, monkeypatch, capsys) -> None:
    monkeypatch.chdir(tmp_path)
    assert cli.main(["oracles"]) == 0
    out = capsys.readouterr().out
    for oracle in all_oracles():
        assert f"\n{oracle.name}: {oracle.title}\n" in f"\n{out}"
        assert oracle.signature() in out
    assert "attention(q: (b, n, d_k), k: (b, m, d_k), v: (b, m, d_v)" in out


@pytest.mark.tf
def test_show_prints_the_full_card(first_runs, monkeypatch, capsys) -> None:
    monkeypatch.chdir(first_runs["good"].project)
    # Line 8 is inside the block whose fence opens at line 5.
    assert cli.main(["show", "--no-timing", "docs/index.md:8"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("docs/index.md:5 [sdpa]: verified: ")
    assert "input  q (b, n, d_k) = (2, 5, 16)" in out
    assert "ok   output (b, n, d_v)" in out
    assert "max |Δ| = " in out


@pytest.mark.tf
def test_show_a_drift_exits_1_with_its_numbers(first_runs, monkeypatch, capsys) -> None:
    monkeypatch.chdir(first_runs["drift"].project)
    assert cli.main(["show", "--no-timing", "docs/index.md:13"]) == 1
    out = capsys.readouterr().out
    assert "FAIL output (b, n, d_v)" in out
    assert re.search(r"max \|Δ\| = [\d.e-]+ at \(\d+, \d+, \d+\)", out)
    assert re.search(
        r"worst against its tolerance at \(\d+, \d+, \d+\): expected -?[\d.]+, got -?[\d.]+, "
        r"tolerance there [\d.e-]+",
        out,
    )
    assert "tolerance: derived: 64 × float32 rounding" in out
    assert "40 of 40 elements out of tolerance" in out
    assert "FAIL output (b, n, d_v) on the large logits inputs" in out


@pytest.mark.tf
def test_show_an_error_quotes_the_snippet_line(first_runs, monkeypatch, capsys) -> None:
    monkeypatch.chdir(first_runs["bad-input"].project)
    assert cli.main(["show", "docs/index.md:81"]) == 1
    out = capsys.readouterr().out
    assert "ValueError at docs/index.md:87: <script>alert(1)</script>" in out
    assert '     87 |     raise ValueError("<script>alert(1)</script>")' in out


@pytest.mark.tf
def test_show_before_any_block_exits_2(first_runs, monkeypatch, capsys) -> None:
    monkeypatch.chdir(first_runs["good"].project)
    assert cli.main(["show", "docs/index.md:2"]) == 2
    assert "blocks open at lines: 5, 24, 30, 44, 58" in capsys.readouterr().err


TWELVE_LINES = """# Softmax

```formula id="sm" oracle="no-such-oracle"
\\text{softmax}(x)_i = \\frac{e^{x_i}}{\\sum_j e^{x_j}}
```

```python
def softmax(x):
    return x
```

The end.
"""


@pytest.mark.parametrize("line", [999, 13, 12, 11, 2])
def test_show_where_no_block_is_exits_2_naming_the_blocks(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], line: int
) -> None:
    (tmp_path / "page.md").write_text(TWELVE_LINES, encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    assert cli.main(["show", f"page.md:{line}"]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert f"page.md:{line}: no formula block here (blocks open at lines: 3)" in captured.err


@pytest.mark.parametrize("line", [3, 6, 9, 10])
def test_show_a_line_of_a_block_or_its_code_shows_that_block(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], line: int
) -> None:
    (tmp_path / "page.md").write_text(TWELVE_LINES, encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    assert cli.main(["show", f"page.md:{line}"]) == 1  # its unknown oracle: no TensorFlow run
    assert capsys.readouterr().out.startswith("page.md:3 [sm]: error: ")


def test_a_folder_with_no_site_and_no_pages_exits_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "notes.txt").write_text("not a page\n", encoding="utf-8")
    assert cli.main(["check", str(tmp_path)]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert (
        f"{tmp_path}: nothing to check: no mkdocs.yml here or in a folder above, and no page "
        "(.ipynb, .markdown, .md, .mdown, .mkd, .mkdn) in it"
    ) in captured.err


@pytest.mark.tf
def test_a_cache_folder_in_the_way_is_said_once_and_the_check_still_runs(
    first_runs: dict[str, Run],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    project = tmp_path / "good"
    shutil.copytree(first_runs["good"].project, project, ignore=shutil.ignore_patterns(".cache"))
    (project / ".cache").write_text("a file where the cache folder goes\n", encoding="utf-8")
    monkeypatch.chdir(project)
    assert cli.main(["check", "--no-timing"]) == 0
    captured = capsys.readouterr()
    said = [line for line in captured.err.splitlines() if "formula-check cache" in line]
    assert said == [
        "formula-check cache: cannot store results in .cache/formula-check (Not a directory: "
        ".cache); those not stored are computed again next build"
    ]
    assert "verified" in captured.out


def test_progress_redraws_one_line_on_a_terminal() -> None:
    import io

    stream = io.StringIO()
    with Progress(stream, 2, live=True) as progress:
        progress.checking("docs/a.md:3 [a]")
    assert stream.getvalue().startswith("\r\x1b[K[0/2 0:00] docs/a.md:3 [a]")
    assert stream.getvalue().endswith("\r\x1b[K")


# -- the CI guide's examples ------------------------------------------------------------------


def _fenced(text: str, language: str) -> list[str]:
    return re.findall(rf"^```{language}\n(.*?)^```$", text, flags=re.MULTILINE | re.DOTALL)


def test_github_workflow_example_installs_an_extra_and_runs_the_check() -> None:
    text = (EXAMPLES / "github-workflow.yml").read_text(encoding="utf-8")
    workflow = yaml.safe_load(text)
    steps = [step for job in workflow["jobs"].values() for step in job["steps"]]
    commands = [step.get("run", "") for step in steps]
    assert any(re.search(r"pip install .*'mkdocs-formula-check\[(cpu|gpu)\]'", c) for c in commands)
    checks = [c for c in commands if c.startswith("formula-check check")]
    assert checks and "--github" in checks[0]
    cli.build_parser().parse_args(checks[0].split()[1:])  # every option it uses exists
    assert commands.index(checks[0]) < commands.index("mkdocs build --strict")
    assert text in _fenced((ROOT / "docs" / "ci.md").read_text(encoding="utf-8"), "yaml")


def test_pre_commit_example_runs_the_check() -> None:
    text = (EXAMPLES / "pre-commit-config.yaml").read_text(encoding="utf-8")
    hooks = [hook for repo in yaml.safe_load(text)["repos"] for hook in repo["hooks"]]
    assert [hook["entry"] for hook in hooks] == ["formula-check check"]
    assert re.search(hooks[0]["files"], "docs/guide/attention.md")
    assert text in _fenced((ROOT / "docs" / "ci.md").read_text(encoding="utf-8"), "yaml")


def test_the_summary_says_when_worker_starts_are_summed() -> None:
    """Two workers start side by side: their summed start-up can exceed the run's time, and
    the line says it is a sum."""

    def told(starters: int) -> str:
        return summary(
            [], pages=1, seconds=7.0, deselected=0, is_failure=bool, startup=11.3, starters=starters
        )

    assert "starting workers (TensorFlow import): 11.30 s" in told(1)
    assert "starting workers (TensorFlow import, summed over 2 workers): 11.30 s" in told(2)
