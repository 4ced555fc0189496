"""Timing under ``tf.function`` treats a snippet as a module file: autograph converts its
Python control flow, code that cannot be traced says so on the card, and a snippet's error
quotes its own lines."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pytest

from formula_check.model import Status
from formula_check.results import CheckResult
from formula_check.session.engine import Engine
from support import PROJECT, run, spec_for

pytestmark = pytest.mark.tf

SOFTMAX_BRANCHING = """
import tensorflow as tf

def softmax(x):
    if tf.reduce_max(x) > 1e4:  # a tensor condition: autograph makes it a tf.cond
        x = x / 2.0
    e = tf.exp(x - tf.reduce_max(x, axis=-1, keepdims=True))
    return e / tf.reduce_sum(e, axis=-1, keepdims=True)
"""

PROBE = """
import linecache
import sys

print(
    sorted(m for m in sys.modules if m.startswith("formula_snippet_") and m != __name__),
    sorted(name for name in linecache.cache if name.startswith("<snippet")),
)
"""

SOFTMAX_NUMPY = """
import tensorflow as tf

def softmax(x):
    e = tf.exp(x - tf.reduce_max(x, axis=-1, keepdims=True)).numpy()
    return e / e.sum(axis=-1, keepdims=True)
"""


def labels(result: CheckResult) -> list[str]:
    return [timing.label for timing in result.timings]


def test_tensor_dependent_branches_are_converted_by_autograph() -> None:
    """Without the snippet's source, autograph left the ``if`` as Python, tracing failed
    on a symbolic bool, and the card had no tf.function row (nor said why)."""
    result = run("softmax", SOFTMAX_BRANCHING, timing=True)
    assert result.status is Status.VERIFIED
    assert labels(result)[:2] == ["eager", "tf.function"]
    graph = result.timings[1]
    assert graph.repeats >= 3 and graph.median > 0 and graph.first > 0
    assert not any("tf.function" in note for note in result.notes)


def test_code_that_cannot_be_traced_keeps_eager_timing_and_says_why() -> None:
    result = run("softmax", SOFTMAX_NUMPY, timing=True)
    assert result.status is Status.VERIFIED
    assert "eager" in labels(result) and "tf.function" not in labels(result)
    (note,) = [note for note in result.notes if "tf.function" in note]
    assert note.startswith(
        "not judged under tf.function, nor timed so: the code does not run as a graph ("
    )
    assert "numpy" in note


def test_a_snippets_traceback_quotes_its_own_line() -> None:
    code = "def f(q, k, v):\n    scale = q.no_such_attribute\n    return q\n"
    result = run("attention", code, line=40)
    assert result.failure is not None
    assert "scale = q.no_such_attribute" in result.failure.traceback


def test_a_traceback_shows_no_checker_frame_and_no_machine_path() -> None:
    """Cards are published: their tracebacks name the snippet, installed modules by their
    package and the standard library by its module, never a folder of the build machine."""
    code = "import json\n\ndef f(q, k, v):\n    json.loads('{')\n    return q\n"
    result = run("attention", code, line=40)
    assert result.failure is not None
    trace = result.failure.traceback
    files = re.findall(r'File "([^"]+)"', trace)
    assert files[0] == "<snippet docs/page.md:40>" and "json/decoder.py" in files, trace
    assert not any(name.startswith("/") for name in files), trace
    assert "formula_check" not in trace and "JSONDecodeError" in trace


@pytest.mark.parametrize(
    "raising",
    [
        "compile('x = (', '/build/machine/project/bad.py', 'exec')",  # names its own file
        "raise ExceptionGroup('two', [ValueError('a'), json_error()])",  # nested tracebacks
    ],
)
def test_no_machine_path_in_syntax_errors_and_exception_groups(raising: str) -> None:
    code = (
        "import json\n\n"
        "def json_error():\n"
        "    try:\n"
        "        json.loads('{')\n"
        "    except ValueError as exc:\n"
        "        return exc\n\n"
        f"def f(q, k, v):\n    {raising}\n    return q\n"
    )
    result = run("attention", code, line=40)
    assert result.failure is not None
    trace = result.failure.traceback
    assert not any(name.startswith("/") for name in re.findall(r'File "([^"]+)"', trace)), trace


def test_a_machine_path_in_a_snippets_message_is_shown_as_the_frames_are() -> None:
    """A missing data file names itself in the message, which the card shows twice (alone and
    under the traceback): relative to the project, or by its name; a web address and an
    operator stay."""
    missing = PROJECT / "docs" / "weights.npy"
    code = f"import tensorflow as tf\n\ndef f(q, k, v):\n    open({str(missing)!r})\n    return q\n"
    failure = run("attention", code, line=40).failure
    assert failure is not None
    for shown in (failure.message, failure.traceback):
        assert "'docs/weights.npy'" in shown and str(PROJECT) not in shown, shown
    code = "def f(q, k, v):\n    raise ValueError('see https://keras.io/api/ on //: /usr/x')\n"
    failure = run("attention", code, line=40).failure
    assert failure is not None
    assert failure.message == "see https://keras.io/api/ on //: x", failure.message


def test_snippet_sources_do_not_pile_up_in_the_worker() -> None:
    """Each check sees its own source and no earlier snippet's."""
    probe = """
import linecache
import tensorflow as tf

def softmax(x):
    print(sorted(name for name in linecache.cache if name.startswith("<snippet")))
    e = tf.exp(x - tf.reduce_max(x, axis=-1, keepdims=True))
    return e / tf.reduce_sum(e, axis=-1, keepdims=True)
"""
    seen = [run("softmax", probe, line=line).stdout.strip() for line in (10, 20, 30)]
    assert seen == [
        "['<snippet docs/page.md:10>']",
        "['<snippet docs/page.md:20>']",
        "['<snippet docs/page.md:30>']",
    ]


RANDOM_INSIDE = """
import tensorflow as tf

def softmax(x):
    print(tf.random.uniform((3,)).numpy().tolist())  # TensorFlow's own random state
    e = tf.exp(x - tf.reduce_max(x, axis=-1, keepdims=True))
    return e / tf.reduce_sum(e, axis=-1, keepdims=True)
"""


@pytest.mark.parametrize("fork", [True, False], ids=["forked", "spawned"])
def test_each_worker_warms_up_before_its_first_check_and_keeps_nothing_of_it(
    fork: bool,
) -> None:
    """The warm-up is a check of its own run before the hello: it must succeed (it fails
    silently otherwise, and the first block pays the start-up costs again), and the first
    real check must see what any later one sees: only its own module and source, and
    TensorFlow's random state seeded as in every check."""
    with Engine(PROJECT, workers=1, use_cache=False, fork=fork) as engine:
        first = engine.check(spec_for("softmax", RANDOM_INSIDE, line=10))
        second = engine.check(spec_for("softmax", RANDOM_INSIDE, line=20))
        (worker,) = engine.pool.workers
        assert worker.hello is not None and worker.hello.warmed_up is True
    assert first.status is Status.VERIFIED and second.status is Status.VERIFIED
    assert first.stdout == second.stdout != ""
    probe = run("softmax", SOFTMAX_BRANCHING.replace("def softmax", PROBE + "\ndef softmax"))
    assert probe.stdout.strip() == "[] ['<snippet docs/page.md:10>']"


@pytest.mark.parametrize("fork", [True, False], ids=["forked", "spawned"])
def test_autographs_temporary_files_are_removed_after_each_check(
    fork: bool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """AutoGraph writes each converted function to a file it deletes only at exit, which a
    worker that is killed never reaches: one file per worker start and per snippet, forever."""
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    with Engine(PROJECT, workers=1, use_cache=False, fork=fork) as engine:
        for line in (10, 20):
            result = engine.check(spec_for("softmax", SOFTMAX_BRANCHING, line=line, timing=True))
            assert "tf.function" in labels(result)
        assert list(tmp_path.glob("__autograph_generated_file*")) == []


def test_stated_repeats_are_run_exactly_and_unstated_ones_as_time_allows() -> None:
    """``timing="repeats=2"`` is two runs (it used to be raised to three); with none stated,
    three to five, fewer than five only once they are steady or add up to the budget."""
    from formula_check.messages import AUTO_REPEATS
    from formula_check.messages.requests import STEADY
    from formula_check.model import TimingSpec
    from support import shared_engine

    def timed(repeats: int) -> CheckResult:
        spec = spec_for("softmax", SOFTMAX_BRANCHING, timing=True)
        return shared_engine().check(dataclasses.replace(spec, timing=TimingSpec(repeats=repeats)))

    stated = timed(2)
    assert stated.status is Status.VERIFIED, stated.headline()
    code_runs = [t for t in stated.timings if not t.label.startswith("oracle")]
    assert code_runs and all(t.repeats == 2 for t in code_runs)
    auto = [t for t in timed(0).timings if not t.label.startswith("oracle")]
    fewest, most, _ = AUTO_REPEATS
    assert auto and all(fewest <= t.repeats <= most for t in auto)
    # a softmax of a few elements is far within the budget: fewer than the most only when
    # the runs made are steady, and the card's figures are theirs
    assert all(t.repeats == most or t.spread <= STEADY * t.median for t in auto)
