"""An oracle of one's own gets read-only arrays: one that wrote into its inputs would change
what every later call on the same planned arrays computes from (the code's expected values,
each float32 draw of the tolerance), and could make wrong code agree with it."""

from __future__ import annotations

import functools
import uuid
from pathlib import Path

import numpy as np
import pytest

from formula_check.errors import OracleError
from formula_check.oracles import Oracle, TensorSpec, get_oracle, load_oracle, register
from formula_check.oracles.registry import UNKEYED

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


_SCALE = 3.0


def _scaled_by(scale: float) -> object:
    def compute(arrays: dict[str, np.ndarray], params: dict[str, object]) -> dict[str, object]:
        return {"output": scale * arrays["x"]}

    return compute


class _Scaler:
    def __call__(self, arrays: dict[str, np.ndarray], params: object) -> dict[str, object]:
        return {"output": _SCALE * arrays["x"]}


def _source_of(compute: object) -> str:
    return register(_made(f"keyed_{uuid.uuid4().hex[:8]}", compute)).source


def test_a_registered_oracle_is_cached_only_under_a_name_for_what_it_computes() -> None:
    """A plain function of a file: keyed by the file's digest, and by the numbers it closes
    over. What cannot be named (a function with no file, whose globals another notebook cell
    may change; a partial; an object with ``__call__``; a closure over an object) is never
    read from the cache or written to it."""
    from formula_check.cache import cacheable
    from support import spec_for

    assert _source_of(_scaled_by(2.0)) != _source_of(_scaled_by(3.0))
    assert _source_of(_scaled_by(2.0)) == _source_of(_scaled_by(2.0))  # no address in it
    scope: dict[str, object] = {}
    exec("def compute(arrays, params):\n    return {'output': SCALE * arrays['x']}\n", scope)
    unnamed = [
        scope["compute"],
        functools.partial(_scaled_by(1.0)),
        _Scaler(),
        _scaled_by(np.float64(2.0)),  # type: ignore[arg-type]
    ]
    for compute in unnamed:
        registered = register(_made(f"unkeyed_{uuid.uuid4().hex[:8]}", compute))
        assert registered.source.startswith(UNKEYED), registered.source
        assert not cacheable(spec_for(registered.name, "def f(x):\n    return x\n"))
    assert cacheable(spec_for("softmax", "def f(x):\n    return x\n"))


def test_a_users_decorator_around_a_registered_compute_is_wrapped_too() -> None:
    """``functools.wraps`` copies a wrapper's attributes: a decorator of one's own around a
    compute that register() returned must not pass for one of ours, and get writable arrays."""
    base = register(_made(f"base_{uuid.uuid4().hex[:8]}", _scaled_by(2.0)))

    @functools.wraps(base.compute)
    def halving_first(arrays: dict[str, np.ndarray], params: dict[str, object]) -> object:
        x = arrays["x"]
        x /= 2
        return base.compute(arrays, params)

    derived = register(_made(f"derived_{uuid.uuid4().hex[:8]}", halving_first))
    x = np.ones((3, 5))
    with pytest.raises(ValueError, match="read-only"):
        derived.compute({"x": x}, {})
    np.testing.assert_array_equal(x, np.ones((3, 5)))


def test_each_call_gets_the_parameters_as_planned() -> None:
    """An oracle that takes a parameter out of ``params`` (``pop``) takes it out of its own
    call's copy: the next call (a rounding draw, another regime) sees it again."""

    def popping(arrays: dict[str, np.ndarray], params: dict[str, object]) -> object:
        scale = float(params.pop("scale", 1.0))  # type: ignore[arg-type]
        return {"output": scale * arrays["x"]}

    registered = register(_made(f"pops_{uuid.uuid4().hex[:8]}", popping))
    params = {"scale": 3.0, "weights": [1, 2]}
    x = np.ones((3, 5))
    first = registered.compute({"x": x}, params)["output"]
    second = registered.compute({"x": x}, params)["output"]
    np.testing.assert_array_equal(first, second)
    assert params == {"scale": 3.0, "weights": [1, 2]}


def test_an_oracle_with_arrays_in_its_params_registers_again_with_replace() -> None:
    name = f"array_params_{uuid.uuid4().hex[:8]}"
    made = _made(name, _writer, params={"table": np.arange(3.0)})
    register(made)
    assert register(made, replace=True).name == name
    with pytest.raises(OracleError, match="already registered"):
        register(_made(name, _writer, params={"table": np.arange(4.0)}))


def test_a_builtin_is_registered_as_itself() -> None:
    from formula_check.oracles import catalog

    builtin = catalog.BUILTINS[0]
    assert get_oracle(builtin.name) is builtin and builtin.source == "builtin"


@pytest.mark.tf
@pytest.mark.parametrize("how", ["a decorator of one's own", "a parameter taken out"])
def test_wrong_code_is_not_verified_against_an_oracle_that_changes_what_it_is_given(
    how: str,
) -> None:
    """End to end, the two ways an adversarial review made wrong code pass: ``0.5 * x``
    against an oracle of ``2 x`` that halved its input first, through a decorator around a
    registered compute; ``x`` against one of ``3 x`` that popped its scale."""
    from formula_check.model import Status
    from support import shared_engine, spec_for

    name = f"changes_{uuid.uuid4().hex[:8]}"
    if how == "a parameter taken out":

        def popping(arrays: dict[str, np.ndarray], params: dict[str, object]) -> object:
            return {"output": float(params.pop("scale", 1.0)) * arrays["x"]}  # type: ignore[arg-type]

        register(_made(name, popping, params={"scale": 3.0}, regimes=()))
        wrong, right = "1.0 * x", "3.0 * x"
    else:
        base = register(_made(f"{name}_base", _scaled_by(2.0), regimes=()))

        @functools.wraps(base.compute)
        def halving_first(arrays: dict[str, np.ndarray], params: dict[str, object]) -> object:
            x = arrays["x"]
            x /= 2
            return base.compute(arrays, params)

        register(_made(name, halving_first, regimes=()))
        wrong, right = "0.5 * x", None
    engine = shared_engine()
    (result,) = engine.check_many([spec_for(name, f"def f(x):\n    return {wrong}\n")])
    assert result.status is not Status.VERIFIED, result.headline()
    if right is not None:
        verified = engine.check(spec_for(name, f"def f(x):\n    return {right}\n"))
        assert verified.status is Status.VERIFIED, verified.headline()
