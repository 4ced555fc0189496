"""An oracle of one's own gets read-only arrays: one that wrote into its inputs would change
what every later call on the same planned arrays computes from (the code's expected values,
each float32 draw of the tolerance), and could make wrong code agree with it."""

from __future__ import annotations

import uuid
from pathlib import Path

import numpy as np
import pytest

from formula_check.oracles import load_oracle

MODULE = """
import numpy as np
from formula_check.oracles import Oracle, TensorSpec


def _{kind}(arrays, params):
    x = arrays["x"]
    {body}


oracle = Oracle(
    name="{name}",
    title="y = x",
    latex=r"y = x",
    compute=_{kind},
    inputs=(TensorSpec("x", ("b", "n", "d")),),
    outputs=(TensorSpec("output", ("b", "n", "d")),),
    dims={{"b": 2, "n": 3, "d": 5}},
)
"""


def _loaded(tmp_path: Path, kind: str, body: str) -> tuple[object, object]:
    module = f"own_oracle_{kind}_{uuid.uuid4().hex[:8]}"
    name = f"{module}_oracle"
    (tmp_path / f"{module}.py").write_text(MODULE.format(kind=kind, body=body, name=name))
    return load_oracle(f"{module}:oracle", tmp_path), __import__(module).oracle


def test_an_oracle_writing_into_its_input_fails_and_leaves_the_input_as_it_was(
    tmp_path: Path,
) -> None:
    loaded, original = _loaded(tmp_path, "writes", 'x *= 2\n    return {"output": x / 2}')
    x = np.arange(30, dtype=np.float64).reshape(2, 3, 5)
    before = x.copy()
    with pytest.raises(ValueError, match="read-only"):
        loaded.compute({"x": x}, {})  # type: ignore[attr-defined]
    np.testing.assert_array_equal(x, before)
    assert x.flags.writeable, "the caller's own array keeps its flags"
    # the module's own object is the user's, untouched: called directly, it still writes
    original.compute({"x": x}, {})  # type: ignore[attr-defined]
    np.testing.assert_array_equal(x, before * 2)


def test_an_oracle_reading_its_input_computes_as_before(tmp_path: Path) -> None:
    loaded, _ = _loaded(tmp_path, "reads", 'return {"output": x * 2}')
    x = np.linspace(-1, 1, 30).reshape(2, 3, 5)
    out = loaded.compute({"x": x, "n": 3}, {})  # type: ignore[attr-defined]
    np.testing.assert_array_equal(out["output"], x * 2)
    assert out["output"].flags.writeable


def test_judging_names_the_oracle_that_wrote_into_its_input(tmp_path: Path) -> None:
    from formula_check.errors import OracleError
    from formula_check.judge import _expected

    loaded, _ = _loaded(tmp_path, "judged", 'x += 1\n    return {"output": x}')

    class Plan:
        oracle = loaded

        class spec:  # noqa: N801  (the one attribute judging reads of a spec here)
            location = None

    with pytest.raises(OracleError, match=r"failed on these arrays: ValueError: .*read-only"):
        _expected(Plan, {"x": np.zeros((2, 3, 5))}, {})  # type: ignore[arg-type]
