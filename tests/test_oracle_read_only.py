"""An oracle of one's own gets read-only arrays: one that wrote into its inputs would change
what every later call on the same planned arrays computes from (the code's expected values,
each float32 draw of the tolerance), and could make wrong code agree with it."""

from __future__ import annotations

import collections
import copy
import dataclasses
import functools
import importlib
import os
import runpy
import subprocess
import sys
import threading
import types
import uuid
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

from formula_check.errors import OracleError
from formula_check.oracles import Oracle, TensorSpec, get_oracle, load_oracle, register
from formula_check.oracles.registry import UNKEYED
from support import CONFINED, WRITES_REFUSED

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
    path = tmp_path / f"{module}.py"
    path.write_text(MODULE.format(kind=kind, body=body, name=name))
    return load_oracle(f"{module}:oracle", tmp_path), runpy.run_path(str(path))["oracle"]


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


def _plan_of(oracle: object) -> Any:
    """What judging reads of a plan here: its oracle, and its spec's location."""
    return SimpleNamespace(oracle=oracle, spec=SimpleNamespace(location=None))


def test_judging_names_the_oracle_that_wrote_into_its_input(tmp_path: Path) -> None:
    from formula_check.checking.output_verdicts import expected_values as _expected
    from formula_check.errors import OracleError

    loaded, _ = _loaded(tmp_path, "judged", 'x += 1\n    return {"output": x}')

    plan = _plan_of(loaded)

    with pytest.raises(OracleError, match=r"failed on these arrays: ValueError: .*read-only"):
        _expected(plan, {"x": np.zeros((2, 3, 5))}, {})


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
    # a source the user gave is kept, and followed by its fields' digest (its params...)
    given = register(_made(f"{name}_given", _writer, source="team@v2")).source
    assert given.startswith("team@v2 ")


def test_registering_again_changes_nothing_and_another_oracle_needs_replace() -> None:
    name = f"registered_twice_{uuid.uuid4().hex[:8]}"
    made = _made(name, _writer)
    first = register(made)
    again = register(made)  # a notebook cell run twice
    assert again.source == first.source
    assert getattr(again.compute, "__wrapped__", None) is _writer  # wrapped once, not twice
    assert register(first).source == first.source  # what register returned can come back
    changed = register(dataclasses.replace(first, params={"scale": 2.0}), replace=True)
    assert changed.source != first.source  # its fields are in its key
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
    from formula_check.store.cache import cacheable
    from support import spec_for

    assert _source_of(_scaled_by(2.0)) != _source_of(_scaled_by(3.0))
    assert _source_of(_scaled_by(2.0)) == _source_of(_scaled_by(2.0))  # no address in it
    two, three = np.array(2.0), np.array(3.0)
    assert _source_of(_scaled_by(two)) != _source_of(_scaled_by(three))  # type: ignore[arg-type]
    assert _source_of(_scaled_by(two)) == _source_of(_scaled_by(two.copy()))  # type: ignore[arg-type]
    scope: dict[str, object] = {}
    exec("def compute(arrays, params):\n    return {'output': SCALE * arrays['x']}\n", scope)
    unnamed = [
        scope["compute"],
        functools.partial(_scaled_by(1.0)),
        _Scaler(),
        _scaled_by(object()),  # type: ignore[arg-type]
        _scaled_by(np.array([1.0, None], dtype=object)),  # type: ignore[arg-type]
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


def _halves_its_input_first(
    compute: object,
) -> object:
    """A decorator of one's own around a compute register() returned."""

    @functools.wraps(compute)  # type: ignore[arg-type]
    def halving_first(arrays: dict[str, np.ndarray], params: dict[str, object]) -> object:
        x = arrays["x"]
        x /= 2
        return compute(arrays, params)  # type: ignore[operator]

    return halving_first


def _pops_its_scale(arrays: dict[str, np.ndarray], params: dict[str, object]) -> object:
    return {"output": float(params.pop("scale", 1.0)) * arrays["x"]}  # type: ignore[arg-type]


def _writes_again(arrays: dict[str, np.ndarray], params: dict[str, object]) -> object:
    x = arrays["x"]
    x.flags.writeable = True  # NumPy allows it again on a view of a writable array
    x /= 2
    return {"output": 2.0 * x}


def _writes_through_base(arrays: dict[str, np.ndarray], params: dict[str, object]) -> object:
    x = arrays["x"]
    if x.base is not None:
        x.base[...] /= 2  # type: ignore[index]
    return {"output": 2.0 * x}


_CALLS: list[int] = []


def _counts_its_calls(arrays: dict[str, np.ndarray], params: dict[str, object]) -> object:
    _CALLS.append(1)
    return {"output": (2.0 + 0.5 * (len(_CALLS) % 2)) * arrays["x"]}


CHANGING = {
    # how: (compute, params, wrong code, the right code or None)
    "a decorator of one's own": (None, {}, "0.5 * x", None),
    "a parameter taken out": (_pops_its_scale, {"scale": 3.0}, "1.0 * x", "3.0 * x"),
    "writeable turned back on": (_writes_again, {}, "0.5 * x", None),
    "written through .base": (_writes_through_base, {}, "0.5 * x", None),
    "state kept between calls": (_counts_its_calls, {}, "3.0 * x", None),
}


@pytest.mark.tf
@pytest.mark.parametrize("how", sorted(CHANGING))
def test_wrong_code_is_not_verified_against_an_oracle_that_changes_what_it_is_given(
    how: str,
) -> None:
    """End to end, the ways two adversarial reviews made wrong code pass an oracle of one's
    own registered with register(): it changed its input, its parameters or its own state
    between the checker's calls, and the rounding draws' disagreement grew the tolerance until
    wrong code fit. Each is now an error or a mismatch; right code still passes."""
    from formula_check.model import Status
    from support import shared_engine, spec_for

    name = f"changes_{uuid.uuid4().hex[:8]}"
    compute, params, wrong, right = CHANGING[how]
    if compute is None:
        base = register(_made(f"{name}_base", _scaled_by(2.0), regimes=()))
        compute = _halves_its_input_first(base.compute)
    register(_made(name, compute, params=params, regimes=()))
    engine = shared_engine()
    (result,) = engine.check_many([spec_for(name, f"def f(x):\n    return {wrong}\n")])
    assert result.status in {Status.MISMATCH, Status.ERROR}, result.headline()
    if right is not None:
        (verified,) = engine.check_many([spec_for(name, f"def f(x):\n    return {right}\n")])
        assert verified.status is Status.VERIFIED, verified.headline()


def test_an_oracle_keeping_state_between_calls_is_named_so() -> None:
    from formula_check.checking.output_verdicts import still_computes as _still_computes

    registered = register(_made(f"counts_{uuid.uuid4().hex[:8]}", _counts_its_calls))

    plan = _plan_of(registered)

    arrays = {"x": np.ones((3, 5))}
    first = dict(registered.compute(arrays, {}))
    with pytest.raises(OracleError, match="keeps state between calls"):
        _still_computes(plan, arrays, {}, first)


def test_outputs_are_the_checkers_own_and_params_need_not_copy() -> None:
    """An oracle that hands back a buffer it keeps, and changes it on its next call, changes
    no result the checker took already; ``params`` may hold what cannot be copied."""
    kept = np.zeros((3, 5))

    def into_buffer(arrays: dict[str, np.ndarray], params: dict[str, object]) -> object:
        kept[...] = 2 * arrays["x"] + len(params["lib"].__name__)  # type: ignore[attr-defined]
        return {"output": kept}

    registered = register(_made(f"buffer_{uuid.uuid4().hex[:8]}", into_buffer))
    params = {"lib": np, "lock": threading.Lock()}
    first = registered.compute({"x": np.ones((3, 5))}, params)["output"]
    registered.compute({"x": np.zeros((3, 5))}, params)
    np.testing.assert_array_equal(first, np.full((3, 5), 7.0))


def _picked(kind: str) -> object:
    if kind == "double":

        def compute(arrays: dict[str, np.ndarray], params: dict[str, object]) -> object:
            return {"output": 2 * arrays["x"]}

    else:

        def compute(arrays: dict[str, np.ndarray], params: dict[str, object]) -> object:
            return {"output": 3 * arrays["x"]}

    return compute


def test_two_computes_of_one_name_and_file_or_other_params_are_other_keys() -> None:
    """No cached verdict of one oracle answers another: a factory's two functions of the same
    name in the same file differ by their code, and the same compute with other ``params``
    (set where it is registered) by its fields."""
    assert _source_of(_picked("double")) != _source_of(_picked("triple"))
    name = f"params_{uuid.uuid4().hex[:8]}"
    first = register(_made(name, _scaled_by(1.0), params={"scale": 2.0})).source
    second = register(_made(name, _scaled_by(1.0), params={"scale": 3.0}), replace=True).source
    assert first != second


@pytest.mark.parametrize(
    "extra",
    [float("nan"), np.array([np.nan, None], dtype=object), [np.ones(3), np.ones(2)], "a note"],
    ids=["nan", "objects", "ragged", "text"],
)
def test_an_honest_oracle_returning_extras_is_not_said_to_keep_state(extra: object) -> None:
    """What an oracle returns beside its arrays of numbers (a NaN made afresh on each call,
    objects, a ragged list, text) is nothing a check compares: no false alarm, no crash."""
    from formula_check.checking.output_verdicts import still_computes as _still_computes

    def with_extras(arrays: dict[str, np.ndarray], params: dict[str, object]) -> object:
        return {"output": 2 * arrays["x"], "extra": copy.deepcopy(extra)}

    registered = register(_made(f"extras_{uuid.uuid4().hex[:8]}", with_extras))

    plan = _plan_of(registered)

    arrays = {"x": np.ones((3, 5))}
    _still_computes(plan, arrays, {}, dict(registered.compute(arrays, {})))


def test_a_given_source_does_not_stand_for_the_code() -> None:
    """The same name and ``source`` with another compute is another key: a verdict cached for
    ``3 x`` must not answer for ``2 x``. Registering the returned oracle again keeps its key."""
    name = f"given_{uuid.uuid4().hex[:8]}"
    three = register(_made(name, _scaled_by(3.0), source="team@v1"))
    two = register(_made(name, _scaled_by(2.0), source="team@v1"), replace=True)
    assert three.source.startswith("team@v1 ") and two.source.startswith("team@v1 ")
    assert three.source != two.source
    assert register(two).source == two.source
    unnamed = register(_made(f"{name}_cell", functools.partial(_writer), source="team@v1"))
    assert unnamed.source.startswith(UNKEYED)


class _Scales(list):  # type: ignore[type-arg]
    def first(self) -> float:
        return float(self[0])


def test_params_keep_their_types() -> None:
    """Each call's copy of ``params`` is of the same types: a ``defaultdict`` still gives its
    default, a list of one's own class keeps its methods."""

    def reads(arrays: dict[str, np.ndarray], params: dict[str, Any]) -> object:
        return {"output": params["scales"].first() * arrays["x"] + params["table"]["missing"]}

    registered = register(_made(f"types_{uuid.uuid4().hex[:8]}", reads))
    params = {"scales": _Scales([2.0]), "table": collections.defaultdict(float)}
    out = registered.compute({"x": np.ones((3, 5))}, params)["output"]
    np.testing.assert_array_equal(out, np.full((3, 5), 2.0))


def test_an_oracle_drawing_its_own_noise_is_fine_with_a_stated_tolerance() -> None:
    """Nothing is derived from the runs of an oracle whose block states its tolerance, so its
    own randomness is not taken for state; without one, it is named."""
    from formula_check.checking.output_verdicts import still_computes as _still_computes
    from formula_check.checking.output_verdicts import tolerance_stated as _stated

    def noisy(arrays: dict[str, np.ndarray], params: dict[str, object]) -> object:
        return {"output": 2 * arrays["x"] + 1e-9 * np.random.default_rng().random()}

    registered = register(_made(f"noisy_{uuid.uuid4().hex[:8]}", noisy))
    plan = _plan_of(registered)
    plan.spec.atol = plan.spec.rtol = None
    assert not _stated(plan)
    arrays = {"x": np.ones((3, 5))}
    with pytest.raises(OracleError, match="draws random numbers of its own"):
        _still_computes(plan, arrays, {}, dict(registered.compute(arrays, {})))
    plan.spec.atol = 1e-6
    assert _stated(plan)


@pytest.mark.tf
@pytest.mark.skipif(CONFINED, reason=WRITES_REFUSED)
def test_a_check_that_wrote_is_not_answered_again_for_an_oracle_whose_code_has_no_name(
    tmp_path: Path,
) -> None:
    """A check whose code wrote into the project is remembered for the rest of the run (so
    that ``mkdocs serve`` does not check it again on the rebuild its own write caused). An
    oracle with no name for its code (here: defined where there is no file, as in a notebook's
    cell) has the same key after it is redefined: the second check must run, not be answered
    by the first one's result."""
    from formula_check.model import Status
    from formula_check.session.engine import Engine
    from support import spec_for

    name = f"unnamed_{uuid.uuid4().hex[:8]}"
    source = "def compute(arrays, params):\n    return {'output': SCALE * arrays['x']}\n"
    twice: dict[str, object] = {"SCALE": 2.0}
    thrice: dict[str, object] = {"SCALE": 3.0}
    exec(source, twice)
    exec(source, thrice)
    code = 'def f(x):\n    open("out.txt", "w").write("x")\n    return 2.0 * x\n'
    with Engine(tmp_path, use_cache=False) as engine:
        first = register(_made(name, twice["compute"], regimes=()))
        assert first.source.startswith(UNKEYED)
        (result,) = engine.check_many([spec_for(name, code)])
        assert result.status is Status.VERIFIED, result.headline()
        assert any("wrote into the project: out.txt" in note for note in result.notes)
        register(_made(name, thrice["compute"], regimes=()), replace=True)
        (again,) = engine.check_many([spec_for(name, code)])
    assert again.status is Status.MISMATCH, again.headline()


PARTIAL_MODULE = """
import functools

from formula_check.oracles import Oracle, TensorSpec


def scaled(arrays, params, *, scale):
    return {{"output": scale * arrays["x"]}}


oracle = Oracle(
    name="{name}",
    title="y = 2 x",
    latex=r"y = 2 x",
    compute=functools.partial(scaled, scale=2.0),
    inputs=(TensorSpec("x", ("n", "d")),),
    outputs=(TensorSpec("output", ("n", "d")),),
    dims={{"n": 3, "d": 5}},
    regimes=(),
)
"""


@pytest.mark.tf
@pytest.mark.skipif(CONFINED, reason=WRITES_REFUSED)
def test_a_check_that_wrote_is_remembered_for_an_oracle_loaded_from_its_file(
    tmp_path: Path,
) -> None:
    """An oracle loaded from a module with code that has no name (a partial) is not cached,
    but a check of it that wrote into the project is remembered for the run while the
    module's file is the same: under ``mkdocs serve``, which loads the module again on each
    rebuild, it would otherwise rebuild forever. Its file edited, the check runs again."""
    from formula_check.model import Status
    from formula_check.oracles.registry import loaded
    from formula_check.session.engine import Engine
    from support import spec_for

    module = f"partial_oracle_{uuid.uuid4().hex[:8]}"
    path = tmp_path / f"{module}.py"
    path.write_text(PARTIAL_MODULE.format(name=module))
    writes = spec_for(module, 'def f(x):\n    open("out.txt", "w").write("x")\n    return 2 * x\n')
    with Engine(tmp_path) as engine:
        first = load_oracle(f"{module}:oracle", tmp_path)
        assert first.source.startswith(UNKEYED) and loaded(first)
        assert not loaded(dataclasses.replace(first, name=f"{module}_copy"))  # not from a file
        (wrote,) = engine.check_many([writes])
        ran = engine.executed
        load_oracle(f"{module}:oracle", tmp_path)  # as every rebuild of mkdocs serve does
        (remembered,) = engine.check_many([writes])
        assert engine.executed == ran, "the check that wrote ran again"
        path.write_text(PARTIAL_MODULE.format(name=module).replace("scale=2.0", "scale=3.0"))
        importlib.invalidate_caches()
        sys.modules.pop(module, None)
        load_oracle(f"{module}:oracle", tmp_path)
        (edited,) = engine.check_many([writes])
    assert wrote.status is remembered.status is Status.VERIFIED, remembered.headline()
    assert edited.status is Status.MISMATCH, edited.headline()


class _Subclass(np.ndarray):  # type: ignore[type-arg]
    """An array type of one's own (as ``np.matrix``, whose ``*`` is a matrix product)."""


@pytest.mark.parametrize(
    "array",
    [
        np.array([(1.0, 2.0)], dtype=[("a", "<f8"), ("b", "<f8")]),
        np.ma.masked_array([1.0, 2.0], mask=[False, True]),
        np.arange(3.0).view(_Subclass),
        np.array([1.5], dtype=np.longdouble),
        np.array([1.0, None], dtype=object),
    ],
    ids=["record", "masked", "subclass", "long double", "objects"],
)
def test_an_array_its_bytes_do_not_name_leaves_its_oracle_unkeyed(array: np.ndarray) -> None:
    """Record field names, a mask, a subclass's own operators, a long double's padding (whatever the
    memory held) and objects are not in an array's dtype, shape and bytes."""
    assert _source_of(_scaled_by(array)).startswith(UNKEYED)  # type: ignore[arg-type]


def test_plain_arrays_of_numbers_times_and_text_are_named_by_their_values() -> None:
    for array in (np.arange(3), np.array(["a", "b"]), np.array(["2026-12-02"], "M8[D]")):
        source = _source_of(_scaled_by(array))  # type: ignore[arg-type]
        assert not source.startswith(UNKEYED), source
        assert source == _source_of(_scaled_by(array.copy()))  # type: ignore[arg-type]


def test_a_record_scalar_leaves_its_oracle_unkeyed_and_a_plain_one_is_named() -> None:
    """Two records of the same bytes under other field names read other values."""
    ab = np.array([(1.0, 2.0)], dtype=[("a", "<f8"), ("b", "<f8")])[0]
    ba = np.array([(1.0, 2.0)], dtype=[("b", "<f8"), ("a", "<f8")])[0]
    assert ab["a"] != ba["a"] and ab.tobytes() == ba.tobytes()
    for record in (ab, ba):
        assert _source_of(_scaled_by(record)).startswith(UNKEYED)  # type: ignore[arg-type]
    one, two = (_source_of(_scaled_by(np.float32(v))) for v in (1.0, 2.0))  # type: ignore[arg-type]
    assert not one.startswith(UNKEYED) and one != two


_Pair = collections.namedtuple("_Pair", "scale shift")
_Swapped = collections.namedtuple("_Pair", "shift scale")  # type: ignore[name-match]


def test_what_code_can_tell_apart_in_a_container_is_in_the_key() -> None:
    """A named tuple's field names (``pair.scale``) name other values; a defaultdict's factory
    (what a missing key reads) is named too, or leaves the oracle unkeyed, even behind a
    read-only view: never one key for two factories."""
    ours, theirs = (_source_of(_scaled_by(v)) for v in (_Pair(2, 3), _Swapped(2, 3)))  # type: ignore[arg-type]
    assert not ours.startswith(UNKEYED) and ours != theirs
    assert ours == _source_of(_scaled_by(_Pair(2, 3)))  # type: ignore[arg-type]
    factories = [float, int, lambda: 2.0, lambda: 3.0]
    for wrap in (lambda m: m, types.MappingProxyType):
        sources = [_source_of(_scaled_by(wrap(collections.defaultdict(f)))) for f in factories]  # type: ignore[arg-type]
        named = [source for source in sources if not source.startswith(UNKEYED)]
        assert len(set(named)) == len(named), sources
    plain = _source_of(_scaled_by(collections.defaultdict(None, {"a": 2.0})))  # type: ignore[arg-type]
    assert not plain.startswith(UNKEYED) and plain != _source_of(_scaled_by({"a": 2.0}))  # type: ignore[arg-type]


class _WithDefault(dict):  # type: ignore[type-arg]
    def __init__(self, default: float) -> None:
        super().__init__()
        self.default = default

    def __missing__(self, key: str) -> float:
        return self.default


def test_a_container_whose_items_do_not_say_all_it_reads_leaves_its_oracle_unkeyed() -> None:
    """Its own ``__missing__`` and state, or a ChainMap's layers behind its items."""
    for value in (_WithDefault(2.0), collections.ChainMap({}, {"a": 2.0})):
        assert _source_of(_scaled_by(value)).startswith(UNKEYED), value  # type: ignore[arg-type]


def test_a_dict_made_from_a_set_has_one_key_in_every_process() -> None:
    """Its order follows the process's hash seed; its key does not (else it is never cached)."""
    probe = (
        "from formula_check.oracles.registry import _stable;"
        "print(_stable(dict.fromkeys({'query', 'key', 'value', 'output'}, 1.0)))"
    )
    seen = {
        subprocess.run(
            [sys.executable, "-c", probe],
            env={**os.environ, "PYTHONHASHSEED": seed},
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        for seed in ("1", "2", "3")
    }
    assert len(seen) == 1, seen
