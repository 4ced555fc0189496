"""``pytest --formula-check``: a docs folder as tests, inside a real (pytester) pytest run.

One run checks the blocks for real (``tf``); the others test the face itself on a fake engine
(``fakes.pytest_conftest``, a conftest giving the run's ``engines`` a maker of fakes), which answers a
softmax over axis 1 with a drift and any other block with a pass.
"""

from __future__ import annotations

import textwrap
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

# What a run of the plugin imports, imported here first: pytester's in-process runs drop the
# modules a run imported, and the next run would import some again next to stale copies of
# others (MkDocs' theme loader then failed on its own YAML, depending on the test order).
import formula_check.project.loading  # noqa: F401
from fakes import pytest_conftest

pytest_plugins = ["pytester"]

SOFTMAX = """\
```formula id="{id}" oracle="softmax" timing="off"{extra}
\\text{{softmax}}(x)_i = \\frac{{e^{{x_i}}}}{{\\sum_j e^{{x_j}}}}
```

```python
import tensorflow as tf


def softmax(x):
    return tf.nn.softmax(x, axis={axis})
```
"""

PAGE = "# Softmax, three ways\n\n" + "\n".join(
    [
        SOFTMAX.format(id="right-axis", extra="", axis=-1),
        SOFTMAX.format(id="wrong-axis", extra="", axis=1),
        SOFTMAX.format(id="shown-wrong", extra=' expect="mismatch"', axis=1),
    ]
)
DRIFT_LINE = 15  # the fence of "wrong-axis" in PAGE


@pytest.fixture(scope="module")
def cache_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("formula-check-cache")


@pytest.fixture
def docs(pytester: pytest.Pytester, cache_dir: Path) -> Path:
    """A project: ``mkdocs.yml`` (shared cache, short timeout) and one page of three blocks."""
    pytester.path.joinpath("mkdocs.yml").write_text(
        textwrap.dedent(
            f"""\
            site_name: pytester
            plugins:
              - formula-check:
                  timeout: 30
                  cache_dir: {cache_dir.as_posix()}
            """
        ),
        encoding="utf-8",
    )
    folder = pytester.mkdir("docs")
    folder.joinpath("page.md").write_text(PAGE, encoding="utf-8")
    return folder


@pytest.fixture
def faked(pytester: pytest.Pytester, docs: Path) -> Path:
    """The same project, its blocks answered by a fake engine."""
    pytester.makeconftest(pytest_conftest())
    return docs


@pytest.mark.tf
def test_blocks_pass_fail_and_xfail(pytester: pytest.Pytester, docs: Path) -> None:
    assert PAGE.splitlines()[DRIFT_LINE - 1].startswith('```formula id="wrong-axis"')
    result = pytester.runpytest("--formula-check", "docs", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=1, failed=1, xfailed=1)
    text = result.stdout.str()
    assert f"docs/page.md:{DRIFT_LINE} [wrong-axis]: mismatch: output: max |Δ| = " in text
    assert "FAIL docs/page.md::wrong-axis - docs/page.md:15" in text.replace("FAILED", "FAIL")
    assert "Traceback" not in text
    assert "formula_check" not in text  # no frame of the plugin leaks into the report


def test_collection_names_blocks_by_id(pytester: pytest.Pytester, faked: Path) -> None:
    result = pytester.runpytest("--formula-check", "docs", "--collect-only", "-q")
    assert result.stdout.lines[:3] == [
        "docs/page.md::right-axis",
        "docs/page.md::wrong-axis",
        "docs/page.md::shown-wrong",
    ]


def test_xdist_workers_give_the_same_outcomes(pytester: pytest.Pytester, faked: Path) -> None:
    result = pytester.runpytest_subprocess(
        "--formula-check", "docs", "-n", "2", "-p", "no:cacheprovider"
    )
    result.assert_outcomes(passed=1, failed=1, xfailed=1)
    assert "[wrong-axis]: mismatch: output: max |Δ|" in result.stdout.str()


def test_junitxml_report(pytester: pytest.Pytester, faked: Path) -> None:
    report = pytester.path / "junit.xml"
    pytester.runpytest("--formula-check", "docs", f"--junitxml={report}", "-p", "no:cacheprovider")
    suite = ET.parse(report).getroot().find("testsuite")
    assert suite is not None
    assert (suite.get("tests"), suite.get("failures"), suite.get("skipped")) == ("3", "1", "1")
    names = [case.get("name") for case in suite.iter("testcase")]
    assert names == ["right-axis", "wrong-axis", "shown-wrong"]


def test_ini_paths_switch_it_on(pytester: pytest.Pytester, faked: Path) -> None:
    pytester.makeini("[pytest]\ntestpaths = tests\nformula_check_paths = docs\n")
    pytester.mkdir("tests").joinpath("test_plain.py").write_text("def test_plain():\n    pass\n")
    result = pytester.runpytest("-p", "no:cacheprovider")
    result.assert_outcomes(passed=2, failed=1, xfailed=1)


def test_inert_without_the_switch(pytester: pytest.Pytester, docs: Path) -> None:
    pytester.makepyfile(
        test_plain="""
        import sys

        def test_nothing_of_ours_is_loaded():
            assert "formula_check.faces.pytest_plugin" in sys.modules
            assert "formula_check.session.engine" not in sys.modules
            assert "tensorflow" not in sys.modules
        """
    )
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-W", "error")
    result.assert_outcomes(passed=1)


def test_a_broken_promise_fails_and_a_broken_block_says_why(pytester: pytest.Pytester) -> None:
    # Every check "verifies" here (no TensorFlow needed): what is judged is the plugin's
    # reading of a result against the block's expect=, and a header error's report.
    pytester.makeconftest(pytest_conftest("verified"))
    page = SOFTMAX.format(id="promised-drift", extra=' expect="mismatch"', axis=-1)
    page += "\n" + SOFTMAX.format(id="typo", extra=' dimz="b=2"', axis=-1)
    pytester.mkdir("docs").joinpath("promise.md").write_text(page, encoding="utf-8")
    result = pytester.runpytest_subprocess("--formula-check", "docs", "-p", "no:cacheprovider")
    result.assert_outcomes(failed=2)
    text = result.stdout.str()
    assert "docs/promise.md:1 [promised-drift]: expected mismatch but got verified" in text
    assert "docs/promise.md:13 [typo]: error: SpecError: unknown option 'dimz'" in text
    assert "Traceback" not in text
