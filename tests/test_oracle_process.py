"""An oracle of one's own (the ``oracles`` option) is imported and called in a process of its
own: with the environment a check gets, confined as a check is, each call from the state right
after the import; the build never imports its module, and the process ends with the build."""

from __future__ import annotations

import os
import runpy
import signal
import subprocess
import sys
import threading
import uuid
from pathlib import Path

import numpy as np
import pytest

from formula_check.checking.judge import evaluate
from formula_check.errors import OracleError
from formula_check.messages import CheckReply
from formula_check.model import Status
from formula_check.oracles import Oracle, load_oracle
from formula_check.planning.plan import plan_check
from formula_check.results import Environment
from support import CONFINED, spec_for, wait_until

SECRET = "ghp_" + "Vd4" * 12  # looks like a token; made here, so it cannot be anywhere else
ORACLE = """
import os
import tempfile

import numpy as np
from formula_check.oracles import Oracle, Regime, TensorSpec

{head}


def _compute(arrays, params):
    x = arrays["x"]
    {body}


oracle = Oracle(
    name="{name}",
    title="y = 2 x",
    latex=r"y = 2 x",
    compute=_compute,
    inputs=(TensorSpec("x", ("n", "d")),),
    outputs=(TensorSpec("output", ("n", "d")),),
    dims={{"n": 3, "d": 4}},
    {fields}
)
"""


def _module(root: Path, body: str, head: str = "", fields: str = "regimes=()") -> str:
    """A module of one oracle under ``root``; its reference."""
    module = f"own_{uuid.uuid4().hex[:8]}"
    text = ORACLE.format(head=head, body=body, name=module, fields=fields)
    (root / f"{module}.py").write_text(text, encoding="utf-8")
    return f"{module}:oracle"


def _judged(oracle: Oracle, scale: float) -> Status:
    """The block judged for code that returns ``scale * x`` in float32."""
    plan = plan_check(spec_for(oracle.name, "def f(x):\n    return x\n"), ".")
    outputs = {"out/0": (scale * plan.inputs["x"]).astype(np.float32)}
    reply = CheckReply(kind="function", outputs=1, output_dtypes=("float32",))
    return evaluate(plan, reply, outputs, Environment()).status


def test_an_oracle_sees_none_of_the_builds_secrets_and_still_judges(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Neither at import nor when called, nor in its process's own ``/proc`` entry, while it
    sees a variable the project's ``env`` names; a block of it verifies the right code and
    fails the wrong one."""
    monkeypatch.setenv("FORMULA_CHECK_TEST_SECRET", SECRET)
    monkeypatch.setenv("FORMULA_CHECK_TEST_SCALE", "2")
    head = 'AT_IMPORT = os.environ.get("FORMULA_CHECK_TEST_SECRET", "")'
    body = """seen = [AT_IMPORT, os.environ.get("FORMULA_CHECK_TEST_SECRET", "")]
    for pid in ("self", os.getppid()):  # its own entry, and its parent's
        try:
            with open(f"/proc/{pid}/environ", "rb") as environ:
                seen.append(str(b"FORMULA_CHECK_TEST_SECRET" in environ.read()))
        except OSError:  # confined: a forked process's own entry is not readable
            pass
    if any(seen[:2]) or "True" in seen:
        raise RuntimeError(f"it saw {seen}")
    return {"output": float(os.environ["FORMULA_CHECK_TEST_SCALE"]) * x}"""
    oracle = load_oracle(_module(tmp_path, body, head), tmp_path, ["FORMULA_CHECK_TEST_SCALE"])
    assert _judged(oracle, 2.0) is Status.VERIFIED
    assert _judged(oracle, 2.0 + 1e-3) is Status.MISMATCH


def test_the_build_never_imports_the_module(tmp_path: Path) -> None:
    reference = _module(tmp_path, 'return {"output": 2 * x}')
    oracle = load_oracle(reference, tmp_path)
    assert reference.partition(":")[0] not in sys.modules
    assert str(tmp_path) not in sys.path
    assert oracle.source.startswith(f"{reference}@")


def test_no_state_carries_from_one_call_to_the_next(tmp_path: Path) -> None:
    """A module-level counter, and a file left in its temporary folder, are as the import
    left them on every call."""
    head = "CALLS = [0]"
    body = (
        "CALLS[0] += 1\n"
        '    left = os.path.join(tempfile.gettempdir(), "left.txt")\n'
        "    found = os.path.exists(left)\n"
        '    open(left, "w").close()\n'
        '    return {"output": 2 * x + CALLS[0] + found}'
    )
    oracle = load_oracle(_module(tmp_path, body, head), tmp_path)
    x = np.zeros((3, 4))
    first, second = (oracle.compute({"x": x}, {})["output"] for _ in range(2))
    np.testing.assert_array_equal(first, np.ones((3, 4)))
    np.testing.assert_array_equal(second, first)


def test_loaded_again_an_oracle_is_kept_until_its_module_changes(tmp_path: Path) -> None:
    """As each rebuild of ``mkdocs serve`` loads it: no new process while its file is the
    same, the module imported afresh once it is edited."""
    reference = _module(tmp_path, 'return {"output": 2 * x}')
    first = load_oracle(reference, tmp_path)
    assert load_oracle(reference, tmp_path) is first
    path = tmp_path / f"{reference.partition(':')[0]}.py"
    path.write_text(path.read_text().replace("2 * x", "3.0 * x"), encoding="utf-8")
    edited = load_oracle(reference, tmp_path)
    assert edited is not first
    np.testing.assert_array_equal(edited.compute({"x": np.ones((3, 4))}, {})["output"], 3.0)


@pytest.mark.skipif(not CONFINED, reason="the kernel offers no Landlock: nothing confines it")
def test_a_confined_oracle_writes_only_in_its_temporary_folder(tmp_path: Path) -> None:
    target = tmp_path / "written.txt"
    body = (
        'with open(os.path.join(tempfile.gettempdir(), "scratch"), "w") as scratch:\n'
        '        scratch.write("fine")\n'
        f"    open({str(target)!r}, 'w').close()\n"
        '    return {"output": 2 * x}'
    )
    oracle = load_oracle(_module(tmp_path, body), tmp_path)
    with pytest.raises(PermissionError):
        oracle.compute({"x": np.zeros((3, 4))}, {})
    assert not target.exists()


def test_every_callable_answers_as_the_oracle_itself(tmp_path: Path) -> None:
    """``derive``, ``generate`` (its random generator moved as in the build), ``tolerance``
    and a regime's ``inputs`` and ``sizes``: each called in the process gives what the module's
    own object gives."""
    head = (
        "def _derive(sizes, params):\n"
        '    return {**sizes, "d": 2 * sizes["n"]}\n\n\n'
        "def _generate(sizes, rng, params):\n"
        '    return {"x": rng.uniform(-1, 1, (sizes["n"], sizes["d"])).astype(np.float32)}\n\n\n'
        "def _tolerance(name, sizes, allowed):\n"
        '    return np.full((sizes["n"], sizes["d"]), allowed * len(name))\n\n\n'
        "def _inputs(standard, sizes, rng, params):\n"
        '    return {"x": standard["x"] * rng.integers(2, 5) + params["shift"]}'
    )
    fields = (
        "derive=_derive, generate=_generate, tolerance=_tolerance, derived_dims=('d',),\n"
        '    params={"shift": np.float32(0.5)},\n'
        '    regimes=(Regime("shifted", "x moved", _inputs, lambda s: {**s, "n": 2}),),'
    )
    reference = _module(tmp_path, 'return {"output": 2 * x}', head, fields)
    loaded = load_oracle(reference, tmp_path)
    own = runpy.run_path(str(tmp_path / f"{reference.partition(':')[0]}.py"))["oracle"]
    assert loaded.resolve_dims({"n": 5}, {}) == own.resolve_dims({"n": 5}, {}) == {"n": 5, "d": 10}
    assert type(loaded.params["shift"]) is np.float32
    ours, theirs = np.random.default_rng(7), np.random.default_rng(7)
    made = loaded.make_inputs({"n": 3, "d": 4}, ours, {})
    np.testing.assert_array_equal(made["x"], own.make_inputs({"n": 3, "d": 4}, theirs, {})["x"])
    assert made["x"].dtype == np.float32 and ours.random() == theirs.random()
    tolerance = loaded.tolerance("out", {"n": 3, "d": 4}, 0.25)
    np.testing.assert_array_equal(tolerance, np.full((3, 4), 0.75))
    (regime,) = loaded.input_regimes()
    (mine,) = own.input_regimes()
    assert (regime.name, regime.says) == (mine.name, mine.says)
    assert regime.sizes({"n": 3, "d": 4}) == {"n": 2, "d": 4}
    moved = regime.inputs(made, {}, ours, {"shift": 0.5})
    expected = mine.inputs(made, {}, theirs, {"shift": 0.5})
    np.testing.assert_array_equal(moved["x"], expected["x"])


def test_an_oracle_whose_process_dies_mid_call_is_named(tmp_path: Path) -> None:
    """Its call's process, or the process that imported it, killed: the block's error names
    the oracle; neither ends the build."""
    body = "if params.get('server'):\n        os.kill(os.getppid(), 9)\n    os._exit(3)"
    oracle = load_oracle(_module(tmp_path, body), tmp_path)
    x = np.zeros((3, 4))
    with pytest.raises(OracleError, match=rf"oracle '{oracle.name}': .*ended \(exit status 3\)"):
        oracle.compute({"x": x}, {})
    with pytest.raises(OracleError, match=rf"oracle '{oracle.name}': its process .* was killed"):
        oracle.compute({"x": x}, {"server": True})


def test_what_cannot_cross_is_named(tmp_path: Path) -> None:
    """An argument or a result that is no number, string, numeric array or container of
    them: the block's error names the oracle and where it was."""
    body = 'return {"output": 2 * x, "extra": object() if params.get("odd") else 1.0}'
    oracle = load_oracle(_module(tmp_path, body), tmp_path)
    x = np.zeros((3, 4))
    with pytest.raises(OracleError, match=r"oracle '\w+': its arguments\[1\]\['o'\] is a "):
        oracle.compute({"x": x}, {"o": object()})
    with pytest.raises(OracleError, match=r"oracle '\w+': its result\['extra'\] is a "):
        oracle.compute({"x": x}, {"odd": True})


BUILD = """
import os, sys, threading, time
from pathlib import Path
import numpy as np
from formula_check.oracles import load_oracle

loaded = []
load = lambda: loaded.append(load_oracle(sys.argv[1], Path(sys.argv[2])))
if sys.argv[3] == "thread":
    threading.Thread(target=load).start()
    time.sleep(0.1)
    while threading.active_count() > 1:
        time.sleep(0.01)
else:
    load()
hang = ({"x": np.zeros((3, 4))}, {"hang": True})
threading.Thread(target=loaded[0].compute, args=hang, daemon=True).start()
time.sleep(0.5)
os.kill(os.getpid(), 9)
"""


@pytest.mark.parametrize("loaded_in", ["main", "thread"])
def test_the_oracles_processes_end_with_the_build(tmp_path: Path, loaded_in: str) -> None:
    """A build killed outright in the middle of a call leaves no process of its oracle
    behind, whichever thread loaded it."""
    body = 'if params.get("hang"):\n        time.sleep(600)\n    return {"output": 2 * x}'
    reference = _module(tmp_path, body, head="import time")
    argv = [sys.executable, "-c", BUILD, reference, str(tmp_path), loaded_in]
    env = {**os.environ, "TMPDIR": str(tmp_path)}  # a killed build leaves its folders there
    done = subprocess.run(argv, env=env, capture_output=True, text=True, check=False, timeout=60)
    assert done.returncode == -signal.SIGKILL, done.stderr
    assert wait_until(lambda: not _running(reference), 10.0)


def _running(reference: str) -> list[int]:
    """The processes of the oracle ``reference`` that run (a zombie its new parent has not
    reaped yet does not): its server and its calls' processes, by their command line."""
    found = []
    for entry in Path("/proc").iterdir():
        try:
            named = reference.encode() in (entry / "cmdline").read_bytes()
            state = (entry / "stat").read_text(encoding="ascii").rpartition(")")[2].split()[0]
        except (OSError, IndexError):
            continue
        if named and state != "Z":
            found.append(int(entry.name))
    return found


def test_an_oracle_loaded_in_a_thread_outlives_the_thread(tmp_path: Path) -> None:
    """A parent's death signal would follow the thread that started its process."""
    reference = _module(tmp_path, 'return {"output": 2 * x}')
    loaded: list[Oracle] = []
    thread = threading.Thread(target=lambda: loaded.append(load_oracle(reference, tmp_path)))
    thread.start()
    thread.join()
    np.testing.assert_array_equal(loaded[0].compute({"x": np.ones((3, 4))}, {})["output"], 2.0)
