"""``formula-check merge``: the shards of a run give back the unsharded run's report, JUnit,
annotations, summary and exit code; shards that do not make one run are refused."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest

from fakes import FakeMaker, drift_on_axis_1
from formula_check.faces import cli
from sites import softmax_site

_TIME = re.compile(r" in [0-9.]+ [^ :]+:")


def check(site: Path, capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str]:
    code = cli.main(
        ["check", str(site / "mkdocs.yml"), *argv], make_engine=FakeMaker(drift_on_axis_1)
    )
    return code, capsys.readouterr().out


def run_sharded(
    site: Path, count: int, capsys: pytest.CaptureFixture[str], *argv: str, name: str = "shard"
) -> list[Path]:
    reports = []
    for index in range(1, count + 1):
        report = site / f"{name}-{index}-of-{count}.json"
        check(site, capsys, "--shard", f"{index}/{count}", "--json", str(report), *argv)
        reports.append(report)
    return reports


def merge(capsys: pytest.CaptureFixture[str], *argv: str | Path) -> tuple[int, str, str]:
    code = cli.main(["merge", "--json", *(str(arg) for arg in argv)])
    told = capsys.readouterr()
    return code, told.out, told.err


def summary_of(out: str) -> str:
    """What a run printed, less its time and the merge's first line."""
    lines = [line for line in out.splitlines() if not line.startswith("formula-check: merged")]
    return _TIME.sub(" in T:", "\n".join(lines))


@pytest.fixture
def site(tmp_path: Path) -> Path:
    return softmax_site(tmp_path / "site", pages=5, blocks=4)


@pytest.mark.parametrize("count", [1, 2, 3])
def test_merged_shards_are_the_unsharded_run(
    site: Path, count: int, capsys: pytest.CaptureFixture[str]
) -> None:
    whole = site / "whole.json"
    code, out = check(site, capsys, "--json", str(whole), "--junit-xml", str(site / "whole.xml"))
    shards = run_sharded(site, count, capsys)
    merged = site / "merged.json"
    merged_code, merged_out, _ = merge(
        capsys, merged, *reversed(shards), "--junit-xml", site / "merged.xml"
    )
    assert merged.read_text(encoding="utf-8") == whole.read_text(encoding="utf-8")
    assert (merged_code, code) == (cli.EXIT_FAILED, cli.EXIT_FAILED)
    assert summary_of(merged_out) == summary_of(out)
    assert f"formula-check: merged {count} shards" in merged_out
    whole_suite, merged_suite = (ET.parse(site / f"{n}.xml").getroot() for n in ("whole", "merged"))
    assert [ET.tostring(case) for case in merged_suite.iter("testcase")] == [
        ET.tostring(case) for case in whole_suite.iter("testcase")
    ]


def test_a_merge_without_failures_exits_0_and_annotates_like_the_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    site = softmax_site(tmp_path / "site", pages=3, blocks=3, drifting=0)
    shards = run_sharded(site, 2, capsys)
    code, out, _ = merge(capsys, site / "merged.json", *shards, "--github")
    assert code == cli.EXIT_OK
    assert "::" not in out


def test_the_merge_annotates_each_failure_as_the_run_does(
    site: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _, out = check(site, capsys, "--github")
    shards = run_sharded(site, 2, capsys)
    _, merged_out, _ = merge(capsys, site / "merged.json", *shards, "--github")

    def annotations(text: str) -> list[str]:
        return [line for line in text.splitlines() if line.startswith("::")]

    assert annotations(out) and annotations(merged_out) == annotations(out)


def test_the_merge_keeps_the_runs_fail_on(site: Path, capsys: pytest.CaptureFixture[str]) -> None:
    shards = run_sharded(site, 2, capsys, "--fail-on", "error")
    code, _, _ = merge(capsys, site / "merged.json", *shards)
    assert code == cli.EXIT_OK  # mismatches do not fail this run


def refused(capsys: pytest.CaptureFixture[str], *argv: str | Path) -> str:
    code, _, err = merge(capsys, *argv)
    assert code == cli.EXIT_USAGE
    return err


def test_a_missing_or_repeated_shard_is_refused(
    site: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    one, two, three = run_sharded(site, 3, capsys)
    out = site / "merged.json"
    assert "shard 2/3 missing" in refused(capsys, out, one, three)
    assert "shards 2/3, 3/3 missing" in refused(capsys, out, one)
    assert f"shard 1/3 given twice: {one} and {one}" in refused(capsys, out, one, one, two, three)
    assert not out.exists()


def test_reports_of_another_checker_or_run_are_refused(
    site: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    one, two = run_sharded(site, 2, capsys)
    document = json.loads(two.read_text(encoding="utf-8"))
    document["shard"]["checker"] = "0.0.1 (source 0123456789abcdef)"
    two.write_text(json.dumps(document), encoding="utf-8")
    err = refused(capsys, site / "m.json", one, two)
    assert "made by different checkers" in err and "formula-check 0.0.1" in err
    other = run_sharded(site, 2, capsys, "-k", "p1-*", name="other")
    assert "shards of different runs (their selection, split, blocks, pages, deselected" in refused(
        capsys, site / "m.json", one, other[1]
    )
    four = run_sharded(site, 4, capsys)
    assert "shards of one run share their N" in refused(capsys, site / "m.json", one, four[1])


def test_overlapping_shards_are_refused(site: Path, capsys: pytest.CaptureFixture[str]) -> None:
    one, two = run_sharded(site, 2, capsys)
    document = json.loads(two.read_text(encoding="utf-8"))
    first = json.loads(one.read_text(encoding="utf-8"))["shard"]["results"][0]
    document["shard"]["results"].append(first)
    two.write_text(json.dumps(document), encoding="utf-8")
    assert "is in two shards" in refused(capsys, site / "m.json", one, two)


def test_a_report_made_without_shard_is_refused(
    site: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    check(site, capsys, "--json", str(site / "whole.json"))
    assert "not a shard's report (made without --shard)" in refused(
        capsys, site / "m.json", site / "whole.json"
    )


def test_the_report_page_is_written_from_the_merged_results(
    site: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    shards = run_sharded(site, 2, capsys)
    monkeypatch.chdir(site)
    page = site / "docs" / "formula-check-report.md"
    merge(capsys, "merged.json", *shards, "--report-page", page)
    text = page.read_text(encoding="utf-8")
    assert text.startswith("# ") and text.count("<tr class=") == 20
    assert 'href="../page001/#fc-p1-b0"' in text
    err = refused(capsys, "merged.json", *shards, "--report-page", site / "elsewhere.md")
    assert "not in the site's docs folder" in err


@pytest.mark.tf
def test_real_shards_merge_into_the_real_run(tmp_path: Path) -> None:
    """End to end: the console command, TensorFlow, two shards and the whole run side by
    side; the merged report is the whole run's, less each check's own time."""
    site = softmax_site(tmp_path / "site", pages=2, blocks=2)
    command = [sys.executable, "-m", "formula_check.faces.cli", "check", "--no-cache", "--no-timing"]
    runs = [
        subprocess.Popen(
            [*command, "--json", name, *extra],
            cwd=site,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for name, extra in [
            ("whole.json", []),
            ("one.json", ["--shard", "1/2"]),
            ("two.json", ["--shard", "2/2"]),
        ]
    ]
    for run in runs:
        run.communicate(timeout=300)
    codes = [run.returncode for run in runs]
    assert codes[0] == cli.EXIT_FAILED and sorted(codes[1:]) == [cli.EXIT_OK, cli.EXIT_FAILED]
    merged = subprocess.run(
        [sys.executable, "-m", "formula_check.faces.cli", "merge", "--json", "merged.json", "one.json", "two.json"],
        cwd=site,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert merged.returncode == cli.EXIT_FAILED, merged.stderr

    def timeless(name: str) -> Any:
        document = json.loads((site / name).read_text(encoding="utf-8"))
        for block in document["blocks"]:
            block["seconds"] = 0
        return document

    assert timeless("merged.json") == timeless("whole.json")


def test_the_old_form_naming_the_output_first_still_merges_and_says_it_is_deprecated(
    site: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    shards = run_sharded(site, 2, capsys)
    merge(capsys, site / "new.json", *shards)
    code = cli.main(["merge", str(site / "old.json"), *(str(shard) for shard in shards)])
    err = capsys.readouterr().err
    assert code == cli.EXIT_FAILED
    assert "deprecated" in err and "merge --json OUT_JSON SHARD_JSON" in err
    new, old = ((site / name).read_text(encoding="utf-8") for name in ("new.json", "old.json"))
    assert old == new


def test_the_new_form_is_not_told_it_is_deprecated(
    site: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (shard,) = run_sharded(site, 1, capsys)
    code, _, err = merge(capsys, site / "merged.json", shard)
    assert code == cli.EXIT_FAILED and "deprecated" not in err
    assert (site / "merged.json").exists()


def test_one_report_and_no_json_is_refused_rather_than_overwritten(
    site: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (shard,) = run_sharded(site, 1, capsys)
    before = shard.read_bytes()
    assert cli.main(["merge", str(shard)]) == cli.EXIT_USAGE
    assert "--json FILE" in capsys.readouterr().err
    assert shard.read_bytes() == before
