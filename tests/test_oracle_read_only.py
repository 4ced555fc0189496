"""An oracle of one's own gets read-only arrays: one that wrote into its inputs would change
what every later call on the same planned arrays computes from (the code's expected values,
each float32 draw of the tolerance), and could make wrong code agree with it."""

from __future__ import annotations

import uuid
from pathlib import Path

import numpy as np
import pytest

from formula_check.errors import OracleError
from formula_check.oracles import Oracle, TensorSpec, get_oracle, load_oracle, register

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


# The same through register(), which a conftest or a notebook calls with an Oracle it made:
# it used to store the very object, writable arrays and all, and to take it for a builtin.


def _writer(arrays: dict[str, np.ndarray], params: dict[str, object]) -> dict[str, np.ndarray]:
    x = arrays["x"]
    x *= 2
    return {"output": x / 2}


def _made(name: str, compute: object, **fields: object) -> Oracle:
    return Oracle(
        name=name,
        title="y = x",
        latex=r"y = x",
        compute=compute,  # type: ignore[arg-type]
        inputs=(TensorSpec("x", ("n", "d")),),
        outputs=(TensorSpec("output", ("n", "d")),),
        dims={"n": 3, "d": 5},
        **fields,  # type: ignore[arg-type]
    )


def test_an_oracle_registered_directly_gets_read_only_arrays_and_is_no_builtin() -> None:
    name = f"registered_writer_{uuid.uuid4().hex[:8]}"
    registered = register(_made(name, _writer))
    assert get_oracle(name) is registered
    x = np.arange(15, dtype=np.float64).reshape(3, 5)
    with pytest.raises(ValueError, match="read-only"):
        registered.compute({"x": x}, {})
    np.testing.assert_array_equal(x, np.arange(15).reshape(3, 5))
    # not a builtin: its rounding draws get float32 casts of their own, and its cache key
    # names where its compute is defined (this file, by its digest)
    assert registered.source.startswith(f"{__name__}._writer@")
    assert registered.source != "builtin"
    # a source the user gave is kept
    assert register(_made(f"{name}_given", _writer, source="team@v2")).source == "team@v2"


def test_registering_again_changes_nothing_and_another_oracle_needs_replace() -> None:
    name = f"registered_twice_{uuid.uuid4().hex[:8]}"
    made = _made(name, _writer)
    first = register(made)
    again = register(made)  # a notebook cell run twice
    assert again.source == first.source
    assert getattr(again.compute, "__wrapped__", None) is _writer  # wrapped once, not twice
    assert register(first) is not None  # what register returned can be given back to it
    with pytest.raises(OracleError, match="already registered"):
        register(_made(name, lambda arrays, params: {"output": arrays["x"]}))
    other = register(_made(name, lambda arrays, params: {"output": arrays["x"]}), replace=True)
    assert get_oracle(name) is other


def test_the_cache_key_of_a_registered_oracle_follows_its_code() -> None:
    """Two computes of the same name defined where there is no file (a notebook's cells)
    differ by their code, and so do their sources: an edit is checked again."""
    made = []
    for body in ("x * 2", "x * 3"):
        scope: dict[str, object] = {}
        exec(
            f"def compute(arrays, params):\n    x = arrays['x']\n    return {{'output': {body}}}\n",
            scope,
        )
        made.append(register(_made(f"cell_{uuid.uuid4().hex[:8]}", scope["compute"])).source)
    assert made[0] != made[1]
    assert all("compute@" in source for source in made)


def test_a_builtin_is_registered_as_itself() -> None:
    from formula_check.oracles import catalog

    builtin = catalog.BUILTINS[0]
    assert get_oracle(builtin.name) is builtin and builtin.source == "builtin"
