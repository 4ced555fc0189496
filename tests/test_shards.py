"""``formula-check check --shard I/N``: every block in exactly one shard, balanced by time,
and few blocks moved when one is added."""

from __future__ import annotations

import json
import random
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest

from fakes import FakeMaker, drift_on_axis_1
from formula_check.faces import cli
from formula_check.project.sharding import (
    Shard,
    ShardError,
    assign,
    chosen,
    identities,
    parse_shard,
    read_timings,
    weights,
)
from sites import softmax_site


def names(count: int, seed: int = 0) -> list[str]:
    rng = random.Random(seed)
    return identities([(f"docs/p{rng.randrange(40)}.md", f"b{n}") for n in range(count)])


def loads(shards: list[int], times: list[float], count: int) -> list[float]:
    totals = [0.0] * count
    for shard, seconds in zip(shards, times, strict=True):
        totals[shard] += seconds
    return totals


def test_shard_numbers_are_read_one_based() -> None:
    assert parse_shard("2/4") == Shard(2, 4)
    assert str(parse_shard(" 1/1 ")) == "1/1"
    for wrong in ("0/4", "5/4", "2", "a/b", "1/0"):
        with pytest.raises(ShardError, match=r"I/N|from 1 to N"):
            parse_shard(wrong)


def test_a_repeated_id_on_a_page_is_told_apart_by_its_rank() -> None:
    found = identities([("a.md", "x"), ("b.md", "x"), ("a.md", "x")])
    assert found == ["a.md\0x", "b.md\0x", "a.md\0x#2"]


@pytest.mark.parametrize("count", [1, 2, 3, 4, 7])
def test_every_block_is_in_exactly_one_shard(count: int) -> None:
    blocks = names(300)
    places = [tuple(name.split("\0")) for name in blocks]
    picked = [chosen(places, {}, Shard(index, count)) for index in range(1, count + 1)]  # type: ignore[arg-type]
    assert all(sum(column) == 1 for column in zip(*picked, strict=True))


def test_shards_are_balanced_within_one_block_of_the_mean() -> None:
    rng = random.Random(1)
    blocks = names(400)
    times = [rng.lognormvariate(0, 1) for _ in blocks]
    for count in (2, 4, 8):
        totals = loads(assign(blocks, times, count), times, count)
        mean = sum(times) / count
        assert all(abs(total - mean) <= max(times) for total in totals), (totals, mean)


def test_blocks_without_a_time_weigh_the_median_of_the_known() -> None:
    blocks = ["a", "b", "c", "d"]
    assert weights(blocks, {"a": 1.0, "b": 3.0, "c": 8.0}) == [1.0, 3.0, 8.0, 3.0]
    assert weights(blocks, {}) == [1.0] * 4  # nothing known: shards of equal counts


def moved_by_adding(blocks: list[str], times: list[float], new: float, count: int) -> list[int]:
    """How far each block that changed shard moved when one block of ``new`` seconds joined."""
    before = assign(blocks, times, count)
    after = assign([*blocks, "docs/new.md\0new"], [*times, new], count)
    return [b - a for a, b in zip(before, after[:-1], strict=True) if a != b]


@pytest.mark.parametrize("count", [2, 4, 8])
def test_adding_a_block_moves_few_others_and_only_next_door(count: int) -> None:
    """The docstring's bound: at each of the N - 1 cuts, only blocks whose midpoint lies in a
    window as wide as the new block's time move. Times here lie in [0.5, 1.5] and the new
    block takes at most 1.5, so at most 1 + 1.5/0.5 = 4 blocks per cut."""
    worst = 0
    for trial in range(200):
        rng = random.Random(trial)
        blocks = names(rng.randrange(20, 400), seed=trial)
        times = [rng.uniform(0.5, 1.5) for _ in blocks]
        moves = moved_by_adding(blocks, times, rng.uniform(0.5, 1.5), count)
        assert all(abs(step) == 1 for step in moves), moves
        worst = max(worst, len(moves))
    assert worst <= 4 * (count - 1)


def test_a_greedy_split_by_time_would_move_many_more() -> None:
    """Why not the textbook split (longest first, to the least loaded shard): one new block
    reshuffles a large part of the site."""
    rng = random.Random(3)
    blocks = names(400, seed=3)
    times = [rng.uniform(0.5, 1.5) for _ in blocks]

    def greedy(times: list[float]) -> list[int]:
        totals, shards = [0.0] * 4, [0] * len(times)
        for i in sorted(range(len(times)), key=lambda i: -times[i]):
            shards[i] = totals.index(min(totals))
            totals[shards[i]] += times[i]
        return shards

    before, after = greedy(times), greedy([*times, 1.0])
    greedy_moves = sum(a != b for a, b in zip(before, after, strict=False))
    ours = len(moved_by_adding(blocks, times, 1.0, 4))
    assert ours <= 12 < greedy_moves


def test_timings_are_read_from_a_json_report(tmp_path: Path) -> None:
    report = tmp_path / "report.json"
    blocks = [
        {"page": "docs/a.md", "id": "x", "seconds": 2.5},
        {"page": "docs/a.md", "id": "x", "seconds": 0.5},
        {"page": "docs/b.md", "id": "y", "seconds": None},
    ]
    report.write_text(json.dumps({"blocks": blocks}), encoding="utf-8")
    assert read_timings(report) == {"docs/a.md\0x": 2.5, "docs/a.md\0x#2": 0.5}
    report.write_text('{"summary": {}}', encoding="utf-8")
    with pytest.raises(ShardError, match="not a formula-check JSON report"):
        read_timings(report)


# -- the command line, on a fake engine ---------------------------------------------------


def run_shard(
    site: Path, shard: str, capsys: pytest.CaptureFixture[str], *extra: str
) -> tuple[int, Any, str]:
    maker = FakeMaker(drift_on_axis_1)
    out = site / f"shard-{shard.replace('/', '-')}.json"
    code = cli.main(
        ["check", str(site / "mkdocs.yml"), "--shard", shard, "--json", str(out), *extra],
        make_engine=maker,
    )
    told = capsys.readouterr()
    return code, json.loads(out.read_text(encoding="utf-8")), told.err + told.out


def test_the_shards_of_a_site_check_each_block_once(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    site = softmax_site(tmp_path / "site", pages=6, blocks=5)
    seen: list[str] = []
    for index in (1, 2, 3):
        code, report, told = run_shard(site, f"{index}/3", capsys)
        shard = report["shard"]
        assert (shard["index"], shard["count"], shard["blocks"]) == (index, 3, 30)
        assert f"formula-check: shard {index}/3: {len(report['blocks'])} of 30 blocks" in told
        assert code == (1 if any(b["status"] == "mismatch" for b in report["blocks"]) else 0)
        seen += [block["id"] for block in report["blocks"]]
    assert sorted(seen) == sorted(f"p{p}-b{b}" for p in range(6) for b in range(5))


def test_a_shards_junit_names_its_shard(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    site = softmax_site(tmp_path / "site", pages=2, blocks=3)
    junit = tmp_path / "shard.xml"
    run_shard(site, "2/2", capsys, "--junit-xml", str(junit))
    suite = ET.parse(junit).getroot()
    assert [(p.get("name"), p.get("value")) for p in suite.iter("property")] == [("shard", "2/2")]


def test_shards_balance_by_an_earlier_reports_times(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """One slow block (10 s) among 19 of 1 s: its shard holds fewer blocks, and each shard's
    time is within one block's of half the total (14.5 s)."""
    site = softmax_site(tmp_path / "site", pages=4, blocks=5)
    blocks = [
        {"page": f"docs/page{p:03d}.md", "id": f"p{p}-b{b}", "seconds": 1.0}
        for p in range(4)
        for b in range(5)
    ]
    blocks[7]["seconds"] = 10.0
    timings = tmp_path / "last.json"
    timings.write_text(json.dumps({"blocks": blocks}), encoding="utf-8")
    sizes = {}
    for index in (1, 2):
        _, report, told = run_shard(site, f"{index}/2", capsys, "--timings", str(timings))
        assert "balanced by the time of 20" in told
        sizes[index] = [block["id"] for block in report["blocks"]]
    slow = next(index for index, ids in sizes.items() if "p1-b2" in ids)
    assert len(sizes[slow]) < len(sizes[3 - slow])
    times = {slow: 10 + len(sizes[slow]) - 1, 3 - slow: len(sizes[3 - slow])}
    assert all(abs(seconds - 14.5) <= 10 for seconds in times.values()), times


def test_a_missing_timings_file_balances_by_count(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    site = softmax_site(tmp_path / "site", pages=2, blocks=2)
    _, _, told = run_shard(site, "1/2", capsys, "--timings", str(tmp_path / "none.json"))
    assert "no " in told and "none.json yet: shards balanced by block count" in told


def test_a_bad_shard_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["check", "--shard", "3/2"])
    assert exit_info.value.code == cli.EXIT_USAGE
    assert "I must be from 1 to N (2)" in capsys.readouterr().err
