"""Hostile and broken snippets: each gets the right status and a located message, and the
checks after it still run on a healthy worker."""

from __future__ import annotations

import dataclasses
import io
import os
import tempfile
from pathlib import Path
from typing import Any

import pytest

from formula_check.errors import SnippetError
from formula_check.model import Location, Status, frozen_map
from formula_check.oracles import get_oracle, registry
from formula_check.paths import SCRATCH_PREFIX
from formula_check.planning.plan import plan_check
from formula_check.runtime.process import Worker
from formula_check.session.engine import Engine
from formula_check.snippets import resolve_code
from implementations import FFN, SDPA
from support import PROJECT, run, shared_engine, spec_for, wait_until

pytestmark = pytest.mark.tf


def assert_still_healthy() -> None:
    assert run("attention", SDPA).status is Status.VERIFIED


def test_infinite_loop_times_out_and_the_next_check_runs() -> None:
    """The check's own process is stopped; the warm worker it was forked from stays."""
    engine = shared_engine()
    assert_still_healthy()
    before = engine.pool.alive_pids()
    result = engine.check(
        spec_for("attention", "def f(q, k, v):\n    while True:\n        pass\n", timeout=1.5)
    )
    assert result.status is Status.TIMEOUT
    assert "no answer within 1.5 s; its process was stopped" in result.headline()
    assert_still_healthy()
    assert engine.pool.alive_pids() == before


def running_worker(engine: Engine) -> Worker:
    (worker,) = [worker for worker in engine.pool.workers if worker.alive]
    return worker


def _empty_folder(path: Path) -> bool:
    return path.is_dir() and not any(path.iterdir())


def test_each_check_has_a_private_temporary_folder_removed_with_it() -> None:
    """What a snippet (or AutoGraph) writes to the temporary folder lands in a folder of the
    check's own, inside the worker's, and goes with the check, also one stopped on its timeout
    (TensorFlow would delete AutoGraph's files only at an exit a killed process never has).
    The worker's folder goes with the worker, also when it is killed."""
    engine = shared_engine()
    assert_still_healthy()
    scratch = running_worker(engine).scratch
    assert scratch is not None and scratch.is_dir()
    assert scratch.name.startswith(SCRATCH_PREFIX) and scratch.parent == Path(tempfile.gettempdir())
    said = run("attention", WHERE_TEMPORARY_FILES_GO)
    folder = Path(said.stdout.split()[0])
    assert said.status is Status.ERROR and said.stdout.split() == [str(folder)] * 2
    # removed once the answer is on its way, before the next check begins
    assert folder.parent == scratch and wait_until(lambda: not folder.exists(), 10)

    hang = "import tempfile, time\ndef f(q, k, v):\n    tempfile.mkstemp()\n    time.sleep(60)\n"
    assert engine.check(spec_for("attention", hang, timeout=2)).status is Status.TIMEOUT
    assert scratch.is_dir()
    # what is left is the next check's folder, made ahead with its process, and empty
    assert wait_until(lambda: all(_empty_folder(path) for path in scratch.iterdir()), 10), (
        "the timed-out check left files"
    )
    assert len(list(scratch.iterdir())) <= 1
    running_worker(engine).kill()
    assert not scratch.exists(), "killed, the worker left its folder behind"
    assert_still_healthy()
    fresh = running_worker(engine).scratch
    assert fresh is not None and fresh.is_dir() and fresh != scratch
    # closing the engine removes its workers' folders: test_zygote's closing test


def test_a_spawned_worker_uses_the_folder_its_pool_made() -> None:
    """Without the zygote the folder travels on the worker's command line; as with it, the
    pool made it, so the pool knows it from the start."""
    with Engine(PROJECT, use_cache=False, fork=False) as engine:
        said = engine.check(spec_for("attention", WHERE_TEMPORARY_FILES_GO))
        scratch = running_worker(engine).scratch
        assert scratch is not None and scratch.is_dir()
        folder = Path(said.stdout.split()[0])
        assert said.status is Status.ERROR and said.stdout.split() == [str(folder)] * 2
        assert folder.parent == scratch
    assert not scratch.exists()


WHERE_TEMPORARY_FILES_GO = """
import os, subprocess, sys, tempfile

def f(q, k, v):
    print(tempfile.gettempdir())
    code = "import tempfile; print(tempfile.gettempdir())"
    print(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True).stdout)
    raise ValueError("only the output matters here")
"""


@pytest.mark.parametrize(
    ("code", "what"),
    [
        ("import os\ndef f(q, k, v):\n    os._exit(7)\n", "exit code 7"),
        (
            "import os, signal\ndef f(q, k, v):\n    os.kill(os.getpid(), signal.SIGSEGV)\n",
            "killed by SIGSEGV",
        ),
    ],
)
def test_crash_is_reported_and_a_fresh_worker_takes_over(code: str, what: str) -> None:
    result = run("attention", code)
    assert result.status is Status.ERROR
    assert "crashed: " in result.message and what in result.message
    assert_still_healthy()


def test_memory_exhaustion_is_a_crash_not_a_hang() -> None:
    # 80 MB every 20 ms or so, while the limit is sampled every 0.1 s: the worker (about
    # 250 MB resident) is stopped by about 1.2 GB, far from what a small machine has.
    engine = shared_engine(memory_limit_mb=800)
    code = (
        "import time\nimport numpy as np\n"
        "def f(q, k, v):\n    blocks = []\n"
        "    for _ in range(400):\n        blocks.append(np.ones(10**7))\n        time.sleep(0.02)\n"
    )
    result = engine.check(spec_for("attention", code, timeout=60))
    assert result.status is Status.ERROR
    assert "exceeded the memory limit of 800 MiB" in result.message
    assert engine.check(spec_for("attention", SDPA)).status is Status.VERIFIED


def test_exception_text_is_kept_verbatim_with_its_page_line() -> None:
    code = 'def f(q, k, v):\n    x = 1\n    raise ValueError("<script>alert(1)</script> \\x1b[1mbold\\x1b[0m")\n'
    result = run("attention", code, line=20)
    assert result.status is Status.ERROR
    assert result.failure is not None
    assert result.failure.type == "ValueError"
    assert (
        result.failure.message == "<script>alert(1)</script> bold"
    )  # ANSI stripped; escaping is the renderer's job
    assert result.failure.location == Location("docs/page.md", 23)


def test_nan_output_never_passes() -> None:
    code = SDPA.replace(
        "return output, attention_weights", "return output * float('nan'), attention_weights"
    )
    result = run("attention", code)
    assert result.status is Status.MISMATCH
    bad = result.verdicts[0]
    assert bad.nonfinite == bad.n_total and "NaN/Inf" in result.headline()


def test_wrong_shape_names_dims() -> None:
    code = (
        "import tensorflow as tf\ndef f(q, k, v):\n    return tf.matmul(q, k, transpose_b=True)\n"
    )
    result = run("attention", code)
    assert result.status is Status.MISMATCH
    assert "expected (b, n, d_v) = (2, 5, 4), got (2, 5, 7)" in result.headline()


def test_syntax_error_points_at_the_line() -> None:
    result = run("attention", "import tensorflow as tf\n\ndef f(q, k, v)\n    return q\n", line=40)
    assert result.status is Status.ERROR
    assert result.failure is not None and result.failure.type == "SyntaxError"
    assert result.failure.location == Location("docs/page.md", 43)


def test_import_error_is_located() -> None:
    result = run("attention", "import tensorflow as tf\nimport no_such_module_here\n", line=5)
    assert result.status is Status.ERROR
    assert result.failure is not None and result.failure.type == "ModuleNotFoundError"
    assert result.failure.location == Location("docs/page.md", 7)
    assert "no_such_module_here" in result.failure.message


def test_error_inside_a_helper_points_at_the_helper_call_chain() -> None:
    code = (
        "def helper(x):\n    return x.no_such_attribute\n\ndef f(q, k, v):\n    return helper(q)\n"
    )
    result = run("attention", code, line=100)
    assert result.failure is not None and result.failure.location == Location("docs/page.md", 102)


def test_non_tensor_return_is_an_error() -> None:
    result = run("attention", "def f(q, k, v):\n    return 'hello'\n")
    assert result.status is Status.ERROR
    assert "not a tensor" in result.detail()


def test_missing_entry_is_named() -> None:
    result = run("attention", SDPA, entry="nope")
    assert result.status is Status.ERROR
    assert "the snippet defines no 'nope'" in result.detail()


def test_printed_output_is_captured_not_mixed_into_the_protocol() -> None:
    code = SDPA.replace(
        "    return output, attention_weights",
        "    print('hello from the snippet')\n    return output, attention_weights",
    )
    result = run("attention", code)
    assert result.status is Status.VERIFIED
    assert "hello from the snippet" in result.stdout


@pytest.mark.parametrize("reference", ["../outside.py:f", "/etc/passwd:f", "snippets/../../x.py:f"])
def test_paths_escaping_the_project_are_refused(reference: str) -> None:
    with pytest.raises(SnippetError, match="outside the project") as caught:
        resolve_code(reference, PROJECT, Location("docs/page.md", 3))
    assert str(caught.value).startswith("docs/page.md:3: ")


def test_escaping_path_through_a_symlink_is_refused(tmp_path: Path) -> None:
    outside = tmp_path / "outside.py"
    outside.write_text("def f(q, k, v):\n    return q\n")
    project = tmp_path / "project"
    project.mkdir()
    (project / "link.py").symlink_to(outside)
    with pytest.raises(SnippetError, match="outside the project"):
        resolve_code("link.py:f", project, Location("docs/page.md", 3))


def test_many_failures_in_a_row_then_success() -> None:
    engine = shared_engine()
    specs = [
        spec_for("attention", "def f(q, k, v):\n    raise RuntimeError('one')\n", block_id="a"),
        spec_for("attention", "import os\ndef f(q, k, v):\n    os._exit(1)\n", block_id="b"),
        spec_for("nonexistent", SDPA, block_id="c"),
        spec_for("attention", SDPA, block_id="d"),
    ]
    results = engine.check_many(specs)
    assert [r.block_id for r in results] == ["a", "b", "c", "d"]
    assert [r.status for r in results] == [
        Status.ERROR,
        Status.ERROR,
        Status.ERROR,
        Status.VERIFIED,
    ]
    assert "unknown oracle 'nonexistent'" in results[2].detail()


def test_skipped_block_runs_nothing() -> None:
    engine = shared_engine()
    executed = engine.executed
    result = engine.check(spec_for("attention", "raise SystemExit(1)\n", skip="needs a GPU"))
    assert (
        result.status is Status.SKIPPED
        and result.headline() == "docs/page.md:6 [attention]: skipped: needs a GPU"
    )
    assert engine.executed == executed


def test_two_workers_share_the_load() -> None:
    engine = shared_engine(workers=2)
    slow = SDPA.replace(
        "    return output, attention_weights",
        "    import time\n    time.sleep(0.25)\n    return output, attention_weights",
    )
    results = engine.check_many([spec_for("attention", slow, block_id=f"b{i}") for i in range(4)])
    assert [r.status for r in results] == [Status.VERIFIED] * 4, [r.headline() for r in results]
    assert len(engine.pool.alive_pids()) == 2


def test_crashes_are_retried_not_cached(tmp_path: Path) -> None:
    from formula_check.session.engine import Engine

    with Engine(tmp_path) as engine:
        crash = spec_for("attention", "import os\ndef f(q, k, v):\n    os._exit(3)\n")
        assert engine.check(crash).status is Status.ERROR
        assert engine.check(crash).status is Status.ERROR
        assert engine.executed == 2
        raising = spec_for("attention", "def f(q, k, v):\n    raise ValueError('always')\n")
        engine.check(raising)
        assert engine.check(raising).cached, "an exception the snippet raises is deterministic"


@pytest.mark.parametrize(
    ("fields", "what"),
    [
        ({"dims": frozen_map({"n": 10**8, "m": 10**8})}, "the check would make"),
        ({"sweep": (8, 10**9), "sweep_dim": "n"}, f"sweep n={10**9} would make"),
    ],
)
def test_sizes_too_large_are_an_error_of_the_block_not_a_killed_build(
    fields: dict[str, object], what: str
) -> None:
    """Inputs are made in the building process: sizes that would take gigabytes are refused
    before any is made, and the next block is checked as usual."""
    spec = spec_for("attention", SDPA, timing=True, **fields)
    (result,) = shared_engine().check_many([spec])  # as a build runs them: errors are results
    assert result.status is Status.ERROR
    assert what in result.detail() and "use smaller dims" in result.detail(), result.detail()
    assert result.location == spec.location
    assert_still_healthy()


def test_a_weight_map_on_a_function_is_an_error() -> None:
    """A function is given the weights; a map of a layer's attributes means nothing to it."""
    spec = spec_for("ffn", FFN, weights=frozen_map({"W_1": "inner.kernel"}))
    (result,) = shared_engine().check_many([spec])
    assert result.status is Status.ERROR
    assert "this code is a function" in result.detail() and "drop weights=" in result.detail()


def test_a_weight_map_from_the_page_defaults_leaves_a_function_alone() -> None:
    """A page's default weight map serves its layer blocks; its function blocks ignore it."""
    weights = frozen_map({"W_1": "inner.kernel"})
    spec = spec_for("ffn", FFN, weights=weights, stated=("oracle",))
    (result,) = shared_engine().check_many([spec])
    assert result.status is Status.VERIFIED, result.detail()


def test_printed_output_is_shown_once_however_often_the_code_is_timed() -> None:
    code = "import tensorflow as tf\ndef f(x):\n    print('called')\n    return tf.nn.softmax(x)\n"
    result = run("softmax", code, timing=True)
    assert result.status is Status.VERIFIED and result.timings
    assert result.stdout.split() == ["called"]


def test_a_large_sweep_without_a_mask_is_planned() -> None:
    """Only what a block makes counts: a self-attention sweep to n=4096 makes about 0.1 M
    numbers, far below the limit (it was once counted as if every block had a mask)."""
    spec = spec_for(
        "self_attention", SDPA, timing=True, dims=frozen_map({"b": 4}), sweep=(512, 4096)
    )
    plan = plan_check(spec, str(PROJECT))
    assert plan.request.timing is not None
    assert [run.label for run in plan.request.timing.runs][-1] == "sweep n=4096"


def test_a_custom_oracle_failing_to_make_sizes_fails_its_block_not_the_run(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """An oracle of the project whose ``derive`` raises: that block is an error naming the
    oracle, and the other blocks of the run are checked."""

    def derive(sizes: dict[str, int], params: object) -> dict[str, int]:
        raise KeyError("heads")

    broken = dataclasses.replace(
        get_oracle("softmax"), name="broken_sizes", derive=derive, source="tests:broken"
    )
    monkeypatch.setitem(registry._REGISTRY, broken.name, broken)
    code = "import tensorflow as tf\ndef f(x):\n    return tf.nn.softmax(x)\n"
    specs = [spec_for("broken_sizes", code, block_id="bad"), spec_for("softmax", code)]
    bad, good = shared_engine().check_many(specs)
    assert bad.status is Status.ERROR and good.status is Status.VERIFIED
    assert "oracle 'broken_sizes' failed to make this block's sizes or inputs: KeyError" in (
        bad.detail()
    )


KERAS_RESHAPE_ERROR = """\
import tensorflow as tf

class Broken(tf.keras.layers.Layer):
    def call(self, x):
        return tf.reshape(x, (5, -1, 7))
"""


def test_a_wrapped_error_is_one_clear_line_in_the_log_and_whole_on_the_card(
    tmp_path: Path,
) -> None:
    """Keras wraps an error raised in ``call`` in five lines (a blank one, TensorFlow's
    ``{{function_node ...}}`` tag, the arguments): a log, a CLI summary or a CI annotation
    gets the one line that says what went wrong; the card, the JSON report and a pytest
    failure keep the message whole."""
    from formula_check.project.ci_formats import failure_report

    result = run("layer_norm", KERAS_RESHAPE_ERROR, entry="Broken")
    assert result.status is Status.ERROR and result.failure is not None
    whole = result.failure.message
    assert "Exception encountered when calling" in whole and "Arguments received by" in whole
    assert "\n" not in result.headline()
    assert result.headline() == (
        "docs/page.md:6 [layer_norm]: error: InvalidArgumentError (line 15): Input to reshape "
        "is a tensor with 60 values, but the requested shape requires a multiple of 35 "
        "[Op:Reshape]"
    ), result.headline()
    report = failure_report(result, tmp_path)
    assert report.startswith(result.headline() + "\n") and whole in report


def test_a_message_of_several_lines_is_joined_into_one() -> None:
    from formula_check.results import brief_message

    assert brief_message("shapes differ:\n\n  (2, 5)\n  (2, 7)\n") == "shapes differ: (2, 5) (2, 7)"
    assert brief_message("Arguments received by Foo.call():\n  x=1") == (
        "Arguments received by Foo.call(): x=1"
    ), "never an empty message"
    assert brief_message("plain") == "plain"


def test_a_bfloat16_output_is_compared_and_its_dtype_said() -> None:
    source = (
        "import tensorflow as tf\n\ndef f(x):\n    return tf.cast(tf.nn.softmax(x), tf.bfloat16)\n"
    )
    result = run("softmax", source)
    assert result.status is Status.MISMATCH, result.headline()  # 3 significant digits
    assert "output came back as bfloat16, not float32" in result.notes
    strings = run(
        "softmax", "import tensorflow as tf\n\ndef f(x):\n    return tf.strings.as_string(x)\n"
    )
    assert strings.status is Status.ERROR and strings.failure is not None
    assert strings.failure.message == (
        "returned value 0 is a EagerTensor of string, not of numbers (while reading the outputs)"
    )


def test_a_failure_of_the_checker_itself_is_an_error_card_and_the_worker_serves_on() -> None:
    """A bug of ours while running a block must not look like a crash of the user's code,
    nor cost the worker: the block gets an error that says whose fault it is."""
    from formula_check import wire
    from formula_check.messages import Calls, CheckReply, CheckRequest, SnippetFailed, decode_answer
    from formula_check.runtime import child, isolation

    requests = io.BytesIO()
    for block in ("first", "second"):
        wire.write_message(requests, CheckRequest(root=".", calls=Calls(), entry=block).encode())
    requests.seek(0)
    answers = io.BytesIO()

    def handle(request: CheckRequest, arrays: dict[str, Any]) -> tuple[CheckReply, dict]:
        if request.entry == "first":
            raise KeyError("in/mask")
        return CheckReply(kind=request.entry), {}

    with tempfile.TemporaryDirectory() as scratch:
        checks = isolation.CheckProcesses(handle, lambda: None, conversation=[], scratch=scratch)
        try:
            answered = child.serve(
                requests, answers, lambda r, a: checks.run(r, a, time_limit=30), after=checks.tidy
            )
        finally:
            checks.close()
        assert answered == 0
    answers.seek(0)
    first = decode_answer(wire.read_message(answers)[0])
    second = decode_answer(wire.read_message(answers)[0])
    assert isinstance(first, SnippetFailed) and first.type == "InternalError"
    assert first.message.startswith(
        "formula-check could not run this block (KeyError: 'in/mask'); this is a bug in "
        "formula-check, not in the code under test"
    )
    assert second == CheckReply(kind="second")


def test_what_a_crashed_worker_said_names_no_machine_folder() -> None:
    """The end of its log goes on the card, which is published: paths in it are shown as a
    traceback shows them (the project's relative, a module's from its package)."""
    import numpy

    installed = numpy.__file__
    project_file = str(PROJECT / "mymodel" / "layers.py")
    code = (
        "import os, sys\n"
        "def f(q, k, v):\n"
        f"    print('failed in {installed} called from {project_file}', file=sys.stderr)\n"
        "    sys.stderr.flush()\n"
        "    os._exit(9)\n"
    )
    result = run("attention", code)
    assert result.status is Status.ERROR and "exit code 9" in result.message
    assert "failed in numpy/__init__.py called from mymodel/layers.py" in result.message
    assert str(PROJECT) not in result.message and os.sep + "site-packages" not in result.message


def test_an_exception_whose_message_cannot_be_read_is_the_snippets_error() -> None:
    code = (
        "class Unspeakable(Exception):\n"
        "    def __str__(self):\n"
        "        raise RuntimeError('no words')\n\n"
        "def f(q, k, v):\n"
        "    raise Unspeakable()\n"
    )
    result = run("attention", code)
    assert result.status is Status.ERROR and result.failure is not None
    assert result.failure.type == "Unspeakable" and result.failure.location is not None
    assert result.failure.message == (
        "(its message could not be read: RuntimeError in its __str__)"
    )
    assert "bug in formula-check" not in result.message


def test_a_keyboard_interrupt_raised_by_the_code_is_its_own_error_at_its_line() -> None:
    result = run("attention", "def f(q, k, v):\n    raise KeyboardInterrupt\n", line=20)
    assert result.status is Status.ERROR and result.failure is not None
    assert result.failure.type == "KeyboardInterrupt"
    assert result.failure.location is not None and result.failure.location.line == 22
    assert "bug in formula-check" not in result.message


def test_a_weight_path_to_something_that_is_not_numbers_is_a_clear_weights_error() -> None:
    layer = """
import tensorflow as tf

class FFN(tf.keras.layers.Layer):
    def __init__(self):
        super().__init__()
        self.inner = tf.keras.layers.Dense(9, activation="relu")
        self.outer = tf.keras.layers.Dense(6)

    def call(self, x):
        return self.outer(self.inner(x))
"""
    weights = {"W_1": "name", "b_1": "inner.bias", "W_2": "outer.kernel", "b_2": "outer.bias"}
    result = run("ffn", layer, kind="layer", weights=weights)
    assert result.status is Status.ERROR and result.failure is not None
    assert result.failure.message.startswith("weights: W_1=name is the text ")
    assert "not a weight (numbers)" in result.failure.message
    assert "formula_check" not in result.failure.traceback
    assert_still_healthy()


def test_a_check_that_removes_the_workers_folder_does_not_break_the_next() -> None:
    """The next check gets a folder of its own all the same, and no card names a folder of
    this machine."""
    engine = shared_engine()  # the engine other tests go on using
    vandal = (
        "import os, shutil, tempfile\n"
        "def f(q, k, v):\n"
        "    shutil.rmtree(os.path.dirname(tempfile.gettempdir()))\n"
        "    raise ValueError('done')\n"
    )
    assert engine.check(spec_for("attention", vandal)).status is Status.ERROR
    after = engine.check(spec_for("attention", SDPA))
    assert after.status is Status.VERIFIED, after.headline()
    assert engine.check(spec_for("attention", WHERE_TEMPORARY_FILES_GO)).stdout.strip()


def test_a_check_cannot_move_where_the_next_one_writes_its_errors() -> None:
    """The worker's error log is appended to: a check that seeks in it changes nothing for
    the tail shown on the next crashed check's card."""
    engine = shared_engine()
    seeker = (
        "import os\ndef f(q, k, v):\n    os.lseek(2, 0, os.SEEK_SET)\n    raise ValueError('x')\n"
    )
    assert engine.check(spec_for("attention", seeker)).status is Status.ERROR
    crasher = (
        "import os\ndef f(q, k, v):\n    os.write(2, b'ITS-OWN-LAST-WORDS\\n')\n    os._exit(3)\n"
    )
    result = engine.check(spec_for("attention", crasher))
    assert result.status is Status.ERROR and "ITS-OWN-LAST-WORDS" in result.message
