"""Every face on a fake engine: what each shows and how it fails, with no TensorFlow at all.

The fake (``fakes.FakeEngine``) answers a block whose code says ``axis=1`` with a drift and
every other one with a pass, so each face's own work is what is tested here: which blocks it
finds, how it logs, fails, reports and shuts down. Real checks are the ``tf`` tests' job.
"""

from __future__ import annotations

import json
import logging
import os
import re
import sys
from pathlib import Path

import pytest
from mkdocs.exceptions import Abort

from fakes import FakeMaker, build_with_fake_engine, drift_on_axis_1, pytest_conftest, verified
from formula_check.faces import cli
from formula_check.session.options import DEFAULTS

pytest_plugins = ["pytester"]

BLOCK = """\
```formula id="{name}" oracle="softmax" timing="off"
\\mathrm{{softmax}}(x)_i = \\frac{{e^{{x_i}}}}{{\\sum_j e^{{x_j}}}}
```

```python
import tensorflow as tf


def softmax(x):
    return tf.nn.softmax(x, axis={axis})
```
"""
PAGE = "# Page\n\n" + BLOCK.format(name="good", axis=-1) + "\n" + BLOCK.format(name="bad", axis=1)
BAD_LINE = 3 + BLOCK.count("\n") + 1  # the second block's formula fence


answer = drift_on_axis_1


@pytest.fixture
def site(tmp_path: Path) -> Path:
    (tmp_path / "mkdocs.yml").write_text(
        "site_name: faces\nplugins:\n  - formula-check\n", encoding="utf-8"
    )
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "index.md").write_text(PAGE, encoding="utf-8")
    return tmp_path


_build = build_with_fake_engine


# -- the MkDocs plugin -------------------------------------------------------------------------


def test_plugin_builds_cards_logs_the_drift_and_reports_every_block(
    site: Path, caplog: pytest.LogCaptureFixture
) -> None:
    maker = FakeMaker(answer)
    with caplog.at_level(logging.INFO):
        _build(site, maker)
    html = (site / "site" / "index.html").read_text(encoding="utf-8")
    assert 'id="fc-good"' in html and 'id="fc-bad"' in html
    assert 'data-fc-status="verified"' in html and 'data-fc-status="mismatch"' in html
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert any(w.startswith(f"docs/index.md:{BAD_LINE} [bad]: mismatch") for w in warnings)
    report = json.loads((site / "site" / "formula-check-report.json").read_text("utf-8"))
    statuses = {r["id"]: r["status"] for r in report["blocks"]}
    assert statuses == {"good": "verified", "bad": "mismatch"}
    assert "fc-bad" in (site / "site" / "formula-check-report" / "index.html").read_text("utf-8")
    assert len(maker.made) == 1 and maker.made[0].closed, "one engine, closed at shutdown"
    assert maker.made[0].settings is not None
    assert maker.made[0].settings.cache_dir == site.resolve() / ".cache" / "formula-check"


def test_plugin_says_when_checks_start_and_sums_them_up(
    site: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.INFO):
        _build(site, FakeMaker(answer))
    ours = [r.getMessage() for r in caplog.records if r.getMessage().startswith("formula-check: ")]
    workers = DEFAULTS.worker_count()  # one per core (at most 4) where workers are forked
    assert ours[0] == (
        f"formula-check: checking 2 blocks on 1 page with {workers} "
        f"worker{'s' if workers > 1 else ''}; unchanged blocks come from the cache"
    )
    assert re.fullmatch(r"formula-check: 2 blocks in \S+ \S+: 1 verified, 1 failing", ours[-1])


def test_a_card_names_the_code_it_checked_when_it_lies_elsewhere(site: Path) -> None:
    (site / "snippets").mkdir()
    (site / "snippets" / "sm.py").write_text(
        "import tensorflow as tf\n\n\ndef softmax(x):\n    return tf.nn.softmax(x)\n",
        encoding="utf-8",
    )
    (site / "docs" / "index.md").write_text(
        '```formula id="file" oracle="softmax" code="snippets/sm.py:softmax"\nx\n```\n\n'
        + BLOCK.format(name="inline", axis=-1),
        encoding="utf-8",
    )
    _build(site, FakeMaker(answer))
    html = (site / "site" / "index.html").read_text(encoding="utf-8")
    assert '<span class="fc-code">code <code>snippets/sm.py:softmax</code></span>' in html
    assert html.count('class="fc-code"') == 1, "the inline block's code is right there"


def test_plugin_strict_build_fails_on_the_drift(site: Path) -> None:
    with pytest.raises(Abort):
        _build(site, FakeMaker(answer), strict=True)


def test_a_broken_promise_is_reported_not_raised_under_the_plugin(
    site: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A block whose author expects a mismatch but which verifies, its result known as its
    page renders (a cached one is): the plugin logs it, and --strict fails on the log, never
    on an exception out of the page."""
    page = site / "docs" / "index.md"
    page.write_text(
        page.read_text(encoding="utf-8").replace('id="good"', 'id="good" expect="mismatch"'),
        encoding="utf-8",
    )
    with caplog.at_level(logging.WARNING):
        _build(site, FakeMaker(verified))
    assert any(
        "[good]: expected mismatch but got verified" in r.getMessage() for r in caplog.records
    )
    with pytest.raises(Abort):
        _build(site, FakeMaker(verified), strict=True)


def test_plugin_strict_build_passes_when_every_block_passes(site: Path) -> None:
    _build(site, FakeMaker(verified), strict=True)
    assert (site / "site" / "index.html").is_file()


def test_plugin_turned_off_starts_no_engine(site: Path) -> None:
    (site / "mkdocs.yml").write_text(
        "site_name: faces\nplugins:\n  - formula-check:\n      enabled: false\n", encoding="utf-8"
    )
    maker = FakeMaker(answer)
    _build(site, maker, strict=True)
    assert maker.made == []
    html = (site / "site" / "index.html").read_text(encoding="utf-8")
    assert 'class="arithmatex fc-unchecked" id="fc-bad"' in html


def test_plugin_options_reach_the_engine_settings(site: Path) -> None:
    (site / "mkdocs.yml").write_text(
        "site_name: faces\nplugins:\n  - formula-check:\n      workers: 2\n      cache: false\n"
        "      memory_limit_mb: 900\n      env: [MY_DATA_DIR]\n",
        encoding="utf-8",
    )
    maker = FakeMaker(verified)
    _build(site, maker)
    settings = maker.made[0].settings
    assert settings is not None
    assert (settings.workers, settings.cache, settings.memory_limit_mb, settings.env) == (
        2,
        False,
        900,
        ("MY_DATA_DIR",),
    )


# -- the command line --------------------------------------------------------------------------


def test_cli_exits_1_on_the_drift_and_names_it(
    site: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(site)
    assert cli.main(["check", "--json", "out.json"], make_engine=FakeMaker(answer)) == 1
    out = capsys.readouterr().out
    assert "2 blocks on 1 page" in out and "1 verified, 1 mismatch" in out
    assert f"docs/index.md:{BAD_LINE} [bad]: mismatch" in out
    results = json.loads((site / "out.json").read_text(encoding="utf-8"))["blocks"]
    assert [r["status"] for r in results] == ["verified", "mismatch"]


GOLDEN = Path(__file__).parent / "golden"


def test_cli_output_is_as_golden(
    site: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """What a CI log shows: a line per block on stderr, then the summary on stdout (times
    masked: the fake takes none, but a clock always ticks)."""
    monkeypatch.chdir(site)
    monkeypatch.setenv("NO_COLOR", "1")
    cli.main(["check"], make_engine=FakeMaker(answer))
    captured = capsys.readouterr()
    text = re.sub(r"\d+(\.\d+)? (µs|ms|s)\b", "<time>", captured.err + "---\n" + captured.out)
    path = GOLDEN / "cli_check.txt"
    if os.environ.get("FORMULA_CHECK_UPDATE_GOLDEN") == "1":
        path.write_text(text, encoding="utf-8")
    assert text == path.read_text(encoding="utf-8")


def test_cli_selection_and_flags_reach_the_engine(
    site: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(site)
    maker = FakeMaker(answer)
    argv = ["check", "-k", "good", "--no-cache", "--workers", "2", "--keep-alive", "5"]
    assert cli.main(argv, make_engine=maker) == 0
    assert [spec.block_id for spec in maker.checked] == ["good"]
    settings = maker.made[0].settings
    assert settings is not None
    assert (settings.cache, settings.workers, settings.keep_alive) == (False, 2, 5)
    assert maker.made[0].closed
    assert "1 deselected" in capsys.readouterr().out


def test_cli_broken_block_reaches_no_engine(
    site: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    (site / "docs" / "index.md").write_text(
        '```formula id="typo" oracle="sofmax"\nx\n```\n\n```python\nf = 1\n```\n',
        encoding="utf-8",
    )
    monkeypatch.chdir(site)
    maker = FakeMaker(answer)
    assert cli.main(["check"], make_engine=maker) == 1
    assert maker.checked == []
    out = capsys.readouterr().out
    assert "docs/index.md:1 [typo]: error: SpecError: " in out and "'sofmax'" in out


def test_cli_annotations_and_junit_name_pages_from_the_repository_top(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / ".git").mkdir()
    project = tmp_path / "handbook"
    (project / "docs").mkdir(parents=True)
    (project / "mkdocs.yml").write_text("site_name: h\nplugins:\n  - formula-check\n")
    (project / "docs" / "index.md").write_text(PAGE, encoding="utf-8")
    monkeypatch.chdir(project)
    argv = ["check", "--github", "--junit-xml", "junit.xml", "--json", "out.json"]
    assert cli.main(argv, make_engine=FakeMaker(answer)) == 1
    out = capsys.readouterr().out
    assert f"::error file=handbook/docs/index.md,line={BAD_LINE}," in out
    assert 'file="handbook/docs/index.md"' in (project / "junit.xml").read_text("utf-8")
    blocks = json.loads((project / "out.json").read_text(encoding="utf-8"))["blocks"]
    assert blocks[0]["page"] == "docs/index.md", "the report stays relative to the project"


def test_cli_show_prints_the_card_of_the_block_at_a_line(
    site: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(site)
    where = f"docs/index.md:{BAD_LINE + 1}"
    assert cli.main(["show", where], make_engine=FakeMaker(answer)) == 1
    out = capsys.readouterr().out
    assert "mismatch" in out and "[bad]" in out


# -- the pytest plugin -------------------------------------------------------------------------


def test_pytest_plugin_makes_each_block_a_test(pytester: pytest.Pytester) -> None:
    pytester.makeconftest(pytest_conftest())
    pytester.mkdir("docs").joinpath("index.md").write_text(PAGE, encoding="utf-8")
    result = pytester.runpytest_subprocess(
        "--formula-check", "docs", "-p", "no:cacheprovider", "-p", "no:xdist"
    )
    result.assert_outcomes(passed=1, failed=1)
    text = result.stdout.str()
    assert f"docs/index.md:{BAD_LINE} [bad]: mismatch" in text
    assert "Traceback" not in text


def test_pytest_plugin_without_its_switch_collects_no_page(pytester: pytest.Pytester) -> None:
    pytester.makeconftest(pytest_conftest())
    pytester.mkdir("docs").joinpath("index.md").write_text(PAGE, encoding="utf-8")
    result = pytester.runpytest_subprocess("docs", "-p", "no:cacheprovider", "-p", "no:xdist")
    assert result.ret == pytest.ExitCode.NO_TESTS_COLLECTED


FACES_ALONE = """
import os, sys
sys.path[:0] = [{tests!r}]
from fakes import FakeMaker, build_with_fake_engine, drift_on_axis_1
from formula_check.faces import cli  # every face, loaded
from formula_check.faces import markdown_ext
from formula_check.faces import pytest_plugin
from pathlib import Path
build_with_fake_engine(Path({site!r}), FakeMaker(drift_on_axis_1))
os.chdir({site!r})
code = cli.main(["check"], make_engine=FakeMaker(drift_on_axis_1))
print("FACES", code, "tensorflow" in sys.modules, "numpy" in sys.modules)
"""


def test_the_faces_never_import_tensorflow_into_their_process(site: Path) -> None:
    """The plugin's build and the CLI's check, with their checks answered by the fake engine,
    in a process of their own: TensorFlow stays out of it. (Asked in this test process, the
    answer would depend on which other tests xdist ran there before.)"""
    import subprocess

    code = FACES_ALONE.format(tests=str(Path(__file__).parent), site=str(site))
    run = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=False, timeout=300
    )
    said = [line.split() for line in run.stdout.splitlines() if line.startswith("FACES ")]
    assert said == [["FACES", "1", "False", "True"]], run.stdout + run.stderr[-3000:]
