"""Shards that are not of one run are refused, naming why: another version of the pages
under the same ids, another split (different timings files), another TensorFlow; and a
timings file's unusable time is no crash. Fake engine, no TensorFlow."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from fakes import FakeMaker, drift_on_axis_1, verified
from formula_check.faces import cli
from formula_check.model import CheckSpec
from formula_check.results import CheckResult, Environment
from sites import softmax_site


def _check(site: Path, capsys: pytest.CaptureFixture[str], *argv: str, answer=drift_on_axis_1):
    code = cli.main(["check", str(site / "mkdocs.yml"), *argv], make_engine=FakeMaker(answer))
    told = capsys.readouterr()
    return code, told.out, told.err


def _merge(capsys: pytest.CaptureFixture[str], *argv: str | Path) -> tuple[int, str, str]:
    code = cli.main(["merge", "--json", *(str(arg) for arg in argv)])
    told = capsys.readouterr()
    return code, told.out, told.err


def test_shards_of_another_content_with_the_same_ids_are_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Shard 1 checked before a change of the code of its own blocks (they then drift), shard
    2 after it. The merge must refuse them as parts of different runs (the run's selection
    must cover what each block is, not only its page and id): merged, they say every block
    verified and exit 0, while the site as it is now has drifting blocks nobody checked (the
    unsharded run of it exits 1)."""
    site = softmax_site(tmp_path / "site", pages=2, blocks=3, drifting=0)
    one, two = tmp_path / "shard-1.json", tmp_path / "shard-2.json"
    assert _check(site, capsys, "--shard", "1/2", "--json", str(one))[0] == cli.EXIT_OK
    mine = {block["id"] for block in json.loads(one.read_text(encoding="utf-8"))["blocks"]}
    for page in (site / "docs").glob("*.md"):  # the next commit: shard 1's blocks now drift
        text = page.read_text(encoding="utf-8")
        for name in mine:
            head, sep, tail = text.partition(f'id="{name}"')
            if sep:
                text = head + sep + tail.replace("axis=-1", "axis=1", 1)
        page.write_text(text, encoding="utf-8")
    assert _check(site, capsys)[0] == cli.EXIT_FAILED  # the site as it is now
    assert _check(site, capsys, "--shard", "2/2", "--json", str(two))[0] == cli.EXIT_OK
    code, out, err = _merge(capsys, tmp_path / "merged.json", one, two)
    assert code == cli.EXIT_USAGE, out
    assert "different runs" in err


# -- 2. shards split by different --timings -----------------------------------------------------


def test_shards_split_by_different_timings_are_refused_as_such(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Shard 1 found the restored timings file, shard 2 did not (a cache miss on its runner, or
    another run's merge saved a newer one between the two restores: the sharded workflow
    restores it per shard with restore-keys). The shards then cut the site differently: the
    merge refuses them, and must say why (the shards were split by different timings), not
    blame an edited or cut report or overlapping shards."""
    site = softmax_site(tmp_path / "site", pages=5, blocks=4)
    blocks = [
        {"page": f"docs/page{p:03d}.md", "id": f"p{p}-b{b}", "seconds": 10.0 if p == 1 else 1.0}
        for p in range(5)
        for b in range(4)
    ]
    timings = tmp_path / "timings.json"
    timings.write_text(json.dumps({"blocks": blocks}), encoding="utf-8")
    one, two = tmp_path / "shard-1.json", tmp_path / "shard-2.json"
    _check(site, capsys, "--shard", "1/2", "--json", str(one), "--timings", str(timings))
    _check(site, capsys, "--shard", "2/2", "--json", str(two), "--timings", str(tmp_path / "no"))
    code, _, err = _merge(capsys, tmp_path / "merged.json", one, two)
    assert code == cli.EXIT_USAGE
    assert "timings" in err, err


# -- 3. shards computed under different TensorFlow versions ----------------------------------


def test_shards_run_under_different_tensorflow_versions_are_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """One run's results come from one TensorFlow (the cache keys by it): shards whose results
    name different TensorFlow versions are not one run, and the merge must refuse them rather
    than report a mix as the site's verdict."""
    site = softmax_site(tmp_path / "site", pages=2, blocks=3, drifting=0)

    def under(version: str):
        def answer(spec: CheckSpec) -> CheckResult:
            return dataclasses.replace(verified(spec), environment=Environment(tf_version=version))

        return answer

    one, two = tmp_path / "shard-1.json", tmp_path / "shard-2.json"
    _check(site, capsys, "--shard", "1/2", "--json", str(one), answer=under("2.16.1"))
    _check(site, capsys, "--shard", "2/2", "--json", str(two), answer=under("2.21.0"))
    code, _, _ = _merge(capsys, tmp_path / "merged.json", one, two)
    assert code == cli.EXIT_USAGE


# -- 4. a timings file with a time no block took -------------------------------------------


@pytest.mark.parametrize("seconds", ["Infinity", "1e308"])
def test_a_timings_report_with_an_unusable_time_is_a_usage_error_or_ignored(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], seconds: str
) -> None:
    """A timings report holding ``Infinity`` (Python's json writes and reads it) or times whose
    sum overflows must not crash the shard with a traceback (exit 1, which CI reads as 'a
    block failed'): the time is ignored or the run stops with exit 2 and a message."""
    site = softmax_site(tmp_path / "site", pages=1, blocks=3)
    timings = tmp_path / "timings.json"
    timings.write_text(
        '{"blocks": [{"page": "docs/page000.md", "id": "p0-b0", "seconds": SECONDS},'
        ' {"page": "docs/page000.md", "id": "p0-b1", "seconds": SECONDS}]}'.replace(
            "SECONDS", seconds
        ),
        encoding="utf-8",
    )
    code, _, _ = _check(site, capsys, "--shard", "1/2", "--timings", str(timings), answer=verified)
    assert code == cli.EXIT_OK, "the unusable times are ignored: those blocks get the median"
