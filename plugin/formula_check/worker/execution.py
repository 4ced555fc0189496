"""Inside the worker: load a snippet, call its entry, read weights back, time it.

Requests are concrete: the parent has already generated every array and decided every
argument, so nothing here knows about oracles. Imported only by the worker process.
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.util
import inspect
import io
import linecache
import os
import platform
import re
import sys
import tempfile
import time
import traceback
import types
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import tensorflow as tf

from ..model import strip_ansi
from . import isolation, protocol
from .paths import CHECKER, shown_path

_MAX_TEXT = 4000


@dataclass
class Session:
    """State the worker keeps between checks."""

    root: Path
    counter: int = 0
    sources: dict[str, str] = field(default_factory=dict)
    """The file name each loaded snippet module was compiled under (its linecache entry)."""
    baseline_modules: set[str] = field(default_factory=lambda: set(sys.modules))


class SnippetRaised(Exception):  # noqa: N818  (a signal carrying the user error, not an error of ours)
    """Wraps an exception from user code with the phase it happened in."""

    def __init__(self, phase: str, error: BaseException) -> None:
        super().__init__(phase)
        self.phase = phase
        self.error = error


_WARM_UP_SNIPPET = """
import tensorflow as tf

def attention(q, k, v, mask=None):
    scores = tf.matmul(q, k, transpose_b=True) / tf.sqrt(tf.cast(tf.shape(k)[-1], q.dtype))
    if mask is not None:
        scores += (1.0 - tf.cast(mask, scores.dtype)) * -1e9
    weights = tf.nn.softmax(scores, axis=-1)
    return tf.matmul(weights, v), weights
"""


def begin(root: Path, scratch: str | None = None) -> tuple[Session, dict[str, Any]]:
    """Everything a fresh worker does before its hello: a private temporary folder, the
    session, the warm-up. Returns the session and what the hello says.

    TensorFlow deletes the files AutoGraph writes only at exit, which a killed worker never
    reaches, and a snippet may leave files of its own: in a folder of the worker's own,
    ``scratch``, made and named by the pool, the pool removes them all when it stops the
    worker (each check also has a folder of its own inside it, removed after the check).
    Without one (a worker run by hand), the worker makes its own.

    Each check runs in a process forked from this one (:mod:`.isolation`), which starts an
    eager context of its own; both compute on one thread. Where a GPU would be used, or where
    TensorFlow offers no way to start a new context, the warm-up runs no op: a device context
    or thread pools made here would be unusable in every check's process."""
    if scratch is None:
        scratch = tempfile.mkdtemp(prefix=protocol.SCRATCH_PREFIX)
    os.environ["TMPDIR"] = scratch  # for what the snippet starts
    tempfile.tempdir = scratch
    session = Session(root)
    gpu = isolation.gpu_present()
    isolation.keep_private()  # no check reaches into the worker
    isolation.become_subreaper()  # what a check's process leaves comes to us, to be ended
    warmed_up = False
    if isolation.can_renew_runtime() and not gpu:
        isolation.prepare_warm_worker()
        warmed_up = warm_up(session)
    environment = describe_environment(gpu=gpu)
    isolation.ready_to_fork()
    return session, {**environment, "warmed_up": warmed_up, "scratch": scratch}


def warm_up(session: Session) -> bool:
    """Pay a fresh process's one-time costs before the first check, not inside it: one small
    check of our own, timed eagerly and under ``tf.function``, through the path every check
    takes (TensorFlow's eager runtime and thread pools, AutoGraph, tracing). Every check's
    process is forked after it, so none pays them again. Nothing of it is kept: its module is
    unloaded as any snippet's is, and each check seeds TensorFlow afresh. (A snippet's own
    AutoGraph conversion, 50 to 100 ms the first time its code is traced, stays in its own
    first call.)"""
    from ..model import CheckSpec, Location, TimingSpec
    from ..planning import plan_check
    from ..snippets import inline_snippet

    try:  # a warm-up never stops a worker from serving
        where = Location("<formula-check warm-up>", 1)
        spec = CheckSpec(
            block_id="warm-up",
            location=where,
            oracle="attention",
            snippet=inline_snippet(_WARM_UP_SNIPPET, where),
            timing=TimingSpec(enabled=True, warmup=1, repeats=3),
        )
        plan = plan_check(spec, str(session.root))
        reply, _ = run_check(session, dict(plan.header), dict(plan.arrays))
    except Exception:  # said in the hello, and the checks go on
        return False
    return bool(reply.get("ok"))


def describe_environment(*, gpu: bool = False) -> dict[str, Any]:
    """TensorFlow and Keras versions, the device used, and the thread count. With ``gpu``,
    the device is named without starting TensorFlow's runtime here (see :func:`begin`)."""
    device = "GPU (its runtime started by each check)" if gpu else f"CPU: {_cpu_model()}"
    threads = tf.config.threading.get_intra_op_parallelism_threads() or os.cpu_count() or 1
    return {
        "tf_version": tf.__version__,
        "keras_version": getattr(tf.keras, "__version__", ""),
        "device": device,
        "threads": threads,
    }


def _cpu_model() -> str:
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor() or platform.machine()


def prepare_check_process(session: Session, environment: dict[str, Any]) -> None:
    """In a check's process, forked from the warm worker before its request is known: an
    eager context of its own, then (where the warm worker warmed up) one small check of ours,
    untimed, so that the pages and caches every check touches are this process's before its
    check begins (about 25 ms, while the parent judges the last answer). The same for every
    check: its state is still the warm worker's, plus this."""
    isolation.fresh_runtime()
    if not environment.get("warmed_up"):
        return
    from ..model import CheckSpec, Location
    from ..planning import plan_check
    from ..snippets import inline_snippet

    with contextlib.suppress(Exception):  # getting ready never fails a check
        where = Location("<formula-check warm-up>", 1)
        spec = CheckSpec("warm-up", where, "attention", inline_snippet(_WARM_UP_SNIPPET, where))
        plan = plan_check(spec, str(session.root), with_timing=False)
        run_check(session, dict(plan.header), dict(plan.arrays))


def run_check(
    session: Session, request: dict[str, Any], arrays: dict[str, Any]
) -> tuple[dict[str, Any], dict[str, Any]]:
    """Answer one ``check`` request: outputs, weights, timings; or the snippet's error."""
    session.counter += 1
    stdout = io.StringIO()
    before = set(sys.modules)
    if str(session.root) not in sys.path:  # the project's own modules are importable
        sys.path.insert(0, str(session.root))
    tf.keras.utils.set_random_seed(int(request.get("seed", 0)))
    files = _Reads()
    page_folder = str(request.get("page_folder") or "")
    folder_before = _folder_state(session.root, page_folder)
    try:
        with contextlib.redirect_stdout(stdout), _READS.recording(session.root, files):
            reply, out = _run(session, request, arrays)
    except SnippetRaised as raised:
        reply, out = _failure(raised, request), {}
    finally:  # also when the checker itself failed: the next check must import afresh
        imported = _forget_local_modules(session, before)
    for path in sorted(_changed(folder_before, _folder_state(session.root, page_folder))):
        if path not in files.written:
            files.written.add(path)
            isolation.note_written(path)
    reply["stdout"] = stdout.getvalue()[-_MAX_TEXT:]
    reply["local_files"] = sorted((set(imported) | files.read) - files.written)
    reply["written_files"] = sorted(files.written)
    return reply, out


@dataclass
class _Reads:
    """What one check opened in the project: to read, and to write."""

    read: set[str] = field(default_factory=set)
    written: set[str] = field(default_factory=set)


class _ProjectReads:
    """The project files a check opens for reading: the modules it imports (also one whose
    import fails, which never reaches ``sys.modules``; a module read from its ``.pyc`` counts
    as its source) and the data it loads with Python's own ``open`` (a JSON of
    hyper-parameters, ``np.load``). An edit to any of them can change the result, so the
    cache keys the result on them and ``mkdocs serve`` watches them. A file the check writes
    as well is left out: it changes with every run, and would make ``serve`` rebuild
    forever. Python's audit hook sees every open; it is installed once per worker and records
    only while a check runs."""

    def __init__(self) -> None:
        self.root = ""
        self.files: _Reads | None = None
        self.installed = False

    @contextlib.contextmanager
    def recording(self, root: Path, files: _Reads) -> Iterator[None]:
        if not self.installed:
            sys.addaudithook(self)
            self.installed = True
        self.root, self.files = str(root) + os.sep, files
        try:
            yield
        finally:
            self.files = None

    def __call__(self, event: str, args: tuple[Any, ...]) -> None:
        files = self.files  # once: the check may end on another thread meanwhile
        if files is None or event not in _FILE_EVENTS:
            return
        with contextlib.suppress(Exception):  # an audit hook must never fail an open
            if event == "open":
                self._record(files, *(*args, None, None)[:3])
            else:  # a rename changes both names, a removal its own: written, both
                for path in args[: _FILE_EVENTS[event]]:
                    self._record(files, path, "w", None)

    def _record(self, files: _Reads, path: Any, mode: Any, flags: Any) -> None:
        if isinstance(path, bytes):
            path = os.fsdecode(path)
        if not isinstance(path, str):
            return  # a file descriptor: its file was recorded when it was opened
        if isinstance(mode, str):
            reading = not any(letter in mode for letter in "wax+")
        else:  # os.open: flags only
            reading = isinstance(flags, int) and flags & (os.O_WRONLY | os.O_RDWR | os.O_CREAT) == 0
        path = os.path.abspath(path)
        if "__pycache__" in path:  # Python's own bytecode: read, it stands for its source
            if not reading:
                return
            with contextlib.suppress(ValueError):
                path = importlib.util.source_from_cache(path)
        if not path.startswith(self.root):
            return
        relative = os.path.relpath(path, self.root)
        if reading:
            files.read.add(relative)
        elif relative not in files.written:
            files.written.add(relative)
            isolation.note_written(relative)  # known even if the check dies before it answers


_READS = _ProjectReads()
_FILE_EVENTS = {"open": 1, "os.rename": 2, "os.remove": 1, "os.truncate": 1}
"""Audit events that touch a file, and how many of their first arguments are paths."""


def _folder_state(root: Path, folder: str, limit: int = 5000) -> dict[str, tuple[int, ...]]:
    """Each file of the project's ``folder`` (``limit`` at most), by its path relative to the
    project, with what tells a change of it: inode, size, modification time. Compared before
    and after a check, it shows what the check wrote there by ways no audit event shows
    (TensorFlow's own file system, a program it ran)."""
    top = root / folder
    state: dict[str, tuple[int, ...]] = {}
    pending = [str(top)] if folder and top.is_dir() and not top.is_symlink() else []
    while pending and len(state) < limit:
        with contextlib.suppress(OSError), os.scandir(pending.pop()) as entries:
            for entry in entries:
                with contextlib.suppress(OSError):
                    if entry.is_dir(follow_symlinks=False):
                        pending.append(entry.path)
                        continue
                    info = entry.stat(follow_symlinks=False)
                    key = os.path.relpath(entry.path, root)
                    state[key] = (info.st_ino, info.st_size, info.st_mtime_ns)
    return state


def _changed(before: dict[str, tuple[int, ...]], after: dict[str, tuple[int, ...]]) -> set[str]:
    """Files made, changed or removed between two :func:`_folder_state` looks."""
    return {path for path in before.keys() | after.keys() if before.get(path) != after.get(path)}


def _run(
    session: Session, request: dict[str, Any], arrays: dict[str, Any]
) -> tuple[dict[str, Any], dict[str, Any]]:
    started = time.perf_counter()
    entry = _load_entry(session, request)
    kind = _resolve_kind(entry, request)
    sources = request.get("init_sources")
    runner = _bind(entry, kind, request, arrays, request.get("init", {}), sources=sources)
    with _phase("call"):
        result = runner()
    mapping = request.get("weights") or {}
    unmapped: list[list[Any]] = []
    if kind != "function":
        variables = _variables(runner.layer, mapping)
        unmapped = [[name, list(v.shape)] for name, v, mapped in variables if not mapped]
        if request.get("perturb", True) and variables:
            _perturb([v for _, v, _ in variables], int(request.get("seed", 0)))
            with _phase("call"):
                result = runner()
    out, dtypes = _outputs(result)
    with contextlib.redirect_stdout(io.StringIO()):  # printed once, from the check itself
        regime_outputs, skipped = _run_regimes(runner, kind, request, arrays)
    snippet_seconds = time.perf_counter() - started
    weights, unused = ({}, []) if kind == "function" else _read_weights(runner.layer, mapping)
    timings = []
    if request.get("timing"):
        # What the code prints is shown once, from the check; the same lines again from each
        # warm-up and repeat of every timing run would only bury it.
        with contextlib.redirect_stdout(io.StringIO()):
            timings = _time_all(entry, kind, request, arrays)
    reply = {
        "ok": True,
        "kind": kind,
        "outputs": len(out),
        "timings": timings,
        "unused_weights": unused,
        "unmapped_weights": unmapped,
        "snippet_seconds": snippet_seconds,
        "regimes_skipped": skipped,
    }
    reply["output_dtypes"] = dtypes
    if isinstance(result, dict):  # compared by key when its keys name the oracle's outputs
        reply["output_keys"] = [str(key) for key in result]
    return reply, {
        **regime_outputs,
        **{f"out/{i}": a for i, a in enumerate(out)},
        **{f"w/{k}": v for k, v in weights.items()},
    }


def _run_regimes(
    runner: _Runner, kind: str, request: dict[str, Any], arrays: dict[str, Any]
) -> tuple[dict[str, Any], list[list[str]]]:
    """The same code (the same layer, with the same weights) on each input regime's arrays.
    A regime at other sizes is skipped for a layer, which was built for the check's, and
    where the code cannot run at its sizes (a table precomputed up to a maximum length):
    ``[name, why]`` for each skipped."""
    outputs: dict[str, Any] = {}
    skipped: list[list[str]] = []
    for regime in request.get("regimes") or []:
        name = str(regime["name"])
        if kind != "function" and regime.get("resized"):
            skipped.append([name, "a layer is built for the check's sizes"])
            continue
        plan = regime["function_call" if kind == "function" else "layer_call"]
        prefix = str(regime["prefix"])
        args = [_value(ref, arrays, prefix) for ref in plan["args"]]
        kwargs = {key: _value(ref, arrays, prefix) for key, ref in plan["kwargs"].items()}
        scale = float(regime.get("weight_scale", 1.0))
        grown = []
        if scale != 1.0 and kind != "function":  # the layer's own weights, in place
            grown = [v for _, v, _ in _variables(runner.layer, request.get("weights") or {})]
        try:
            for variable in grown:
                variable.assign(variable.numpy() * scale)
            with _phase(f"regime:{name}"):
                result = runner.target(*args, **kwargs)
        except SnippetRaised as raised:
            if not regime.get("resized"):
                raise  # at the check's own sizes, an error is the code's
            error = raised.error
            said = (_said(error).strip().splitlines() or [""])[0]
            skipped.append([name, _clean(f"{type(error).__name__}: {said}")[:200]])
            continue
        finally:
            for variable in grown:  # a power of two: exactly the weights they were
                variable.assign(variable.numpy() / scale)
        got, _ = _outputs(result)
        outputs.update({f"{prefix}out/{i}": value for i, value in enumerate(got)})
    return outputs, skipped


@contextlib.contextmanager
def _phase(name: str) -> Any:
    try:
        yield
    except SnippetRaised:
        raise
    except BaseException as exc:  # user code may raise anything, SystemExit and
        # KeyboardInterrupt included: a check's process is in a session of its own, so a real
        # Ctrl-C never reaches it (it is stopped by its parent), and one raised is the code's
        raise SnippetRaised(name, exc) from exc


def _load_entry(session: Session, request: dict[str, Any]) -> Any:
    if request.get("module"):
        with _phase("import"):
            module = importlib.import_module(request["module"])
    else:
        module = _exec_source(session, request["source"], request["filename"])
    name = request.get("entry")
    if name:
        with _phase("entry"):
            if not hasattr(module, name):
                raise LookupError(f"the snippet defines no {name!r}")
            return getattr(module, name)
    return _last_definition(module)


def _exec_source(session: Session, source: str, filename: str) -> types.ModuleType:
    name = f"formula_snippet_{session.counter}"
    module = types.ModuleType(name)
    sys.modules[name] = module
    # Readable by inspect, as a module file is: autograph converts the snippet's Python
    # control flow under tf.function (as it does for the user's own module), and
    # tracebacks quote its lines. Dropped with the module after the check. The module has
    # no ``__file__``: autograph, finding a module with the function's file name, would ask
    # linecache to reload that "file" and so drop this entry.
    linecache.cache[filename] = (len(source), None, source.splitlines(keepends=True), filename)
    session.sources[name] = filename
    with _phase("load"):
        code = compile(source, filename, "exec")
        exec(code, module.__dict__)  # noqa: S102  (running the user's snippet is the point)
    return module


def _last_definition(module: types.ModuleType) -> Any:
    defined = [
        value
        for value in vars(module).values()
        if (inspect.isfunction(value) or inspect.isclass(value) or _traced(value))
        and getattr(_traced(value) or value, "__module__", None) == module.__name__
    ]
    if not defined:
        with _phase("entry"):
            raise LookupError(
                "the snippet defines no function or class to check; to check one it only "
                'imports or names (MHA = tf.keras.layers.MultiHeadAttention), say entry="MHA"'
            )
    return defined[-1]


def _traced(value: Any) -> Any:
    """The Python function behind a ``@tf.function``, or ``None``: such an entry is as much
    the snippet's own definition as the function it wraps."""
    wrapped = getattr(value, "python_function", None)
    return wrapped if inspect.isfunction(wrapped) else None


def _resolve_kind(entry: Any, request: dict[str, Any]) -> str:
    kind = str(request.get("kind", "auto"))
    if kind != "auto":
        return kind
    if inspect.isclass(entry):
        return "layer"
    if request.get("init"):
        return "factory"
    with contextlib.suppress(TypeError, ValueError):
        params = inspect.signature(entry).parameters.values()
        required = [
            p
            for p in params
            if p.default is p.empty and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
        ]
        if not required:
            return "factory"
    return "function"


class _Runner:
    """A zero-argument callable that runs the entry once on fixed arguments."""

    def __init__(self, target: Any, args: list[Any], kwargs: dict[str, Any], layer: Any) -> None:
        self.target = target
        self.args = args
        self.kwargs = kwargs
        self.layer = layer

    def __call__(self) -> Any:
        return self.target(*self.args, **self.kwargs)


def _bind(
    entry: Any,
    kind: str,
    request: dict[str, Any],
    arrays: dict[str, Any],
    init: dict[str, Any],
    prefix: str = "",
    *,
    sources: dict[str, dict[str, str]] | None = None,
) -> _Runner:
    plan = request["function_call" if kind == "function" else "layer_call"]
    args = [_value(ref, arrays, prefix) for ref in plan["args"]]
    kwargs = {key: _value(ref, arrays, prefix) for key, ref in plan["kwargs"].items()}
    if kind == "function":
        return _Runner(entry, args, kwargs, None)
    with _phase("construct"):
        layer = _construct(entry, init, sources or {})
    return _Runner(layer, args, kwargs, layer)


def _construct(entry: Any, init: dict[str, Any], sources: dict[str, dict[str, str]]) -> Any:
    """``entry(**init)``, for a layer class or a factory. A keyword a preset supplies (its
    ``sources`` entry says so) is Keras' own, so an entry that does not take it is not given
    it (a factory has parameters of its own); a parameter the entry needs that nothing gives,
    and a TypeError out of the construction, are errors naming where each keyword came from:
    ``init=``, the preset, and the dim whose size it is."""
    taken = _keywords(entry)
    given = {
        key: value
        for key, value in init.items()
        if taken is None or key in taken or sources.get(key, {}).get("origin") != "preset"
    }
    left_out = [key for key in init if key not in given]
    told = _keywords_told(entry, given, left_out, sources)
    missing = _missing(entry, given)
    if missing:
        raise TypeError(
            f"{_entry_name(entry)}() needs {', '.join(missing)}, which no option gives: add "
            f'init="{missing[0]}=..." ({told})'
        )
    try:
        return entry(**given)
    except TypeError as exc:  # the same exception type, its frames kept: the snippet's line
        raise TypeError(f"{_said(exc)} ({told})").with_traceback(exc.__traceback__) from None


def _keywords(entry: Any) -> frozenset[str] | None:
    """The keywords ``entry`` takes; None when it takes any (``**kwargs``) or cannot say."""
    try:
        parameters = inspect.signature(entry).parameters.values()
    except (TypeError, ValueError):
        return None
    if any(p.kind is p.VAR_KEYWORD for p in parameters):
        return None
    return frozenset(
        p.name for p in parameters if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)
    )


def _missing(entry: Any, given: dict[str, Any]) -> list[str]:
    """The parameters ``entry`` needs (no default) that ``given`` leaves out."""
    try:
        parameters = inspect.signature(entry).parameters.values()
    except (TypeError, ValueError):
        return []
    kinds = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
    return [
        p.name
        for p in parameters
        if p.kind in kinds and p.default is p.empty and p.name not in given
    ]


def _keywords_told(
    entry: Any, given: dict[str, Any], left_out: list[str], sources: dict[str, dict[str, str]]
) -> str:
    """``keywords given: num_heads=4 (preset keras-mha; h from dims); ...``: each keyword
    with the option it came from, and the preset's that ``entry`` does not take."""

    def said(key: str) -> str:
        source = sources.get(key, {}).get("said")
        return f" ({source})" if source else ""

    parts = [f"{key}={value!r}{said(key)}" for key, value in given.items()]
    text = f"keywords given: {'; '.join(parts)}" if parts else "no keywords given (no init=)"
    if left_out:
        text += f"; not given, as {_entry_name(entry)}() does not take them: " + "; ".join(
            f"{key}{said(key)}" for key in left_out
        )
    return text


def _entry_name(entry: Any) -> str:
    return str(getattr(entry, "__qualname__", None) or type(entry).__name__)


def _value(ref: dict[str, Any], arrays: dict[str, Any], prefix: str) -> Any:
    """The argument ``ref`` names: an array under ``prefix`` if there is one (an input
    regime sends only its inputs, and shares the check's weights and mask), else a value."""
    if "array" in ref:
        name = prefix + ref["array"]
        return tf.constant(arrays[name] if name in arrays else arrays[ref["array"]])
    return ref["value"]


def _variables(layer: Any, mapping: dict[str, str]) -> list[tuple[str, Any, bool]]:
    """The layer's trainable weights, each with a name to show and whether the weight map
    reaches it. Keras tracks its own; a ``tf.Module`` lists its ``trainable_variables``; a plain
    ``tf.Variable`` kept in an attribute is tracked by neither in Keras 3, so the attributes
    (and lists of them) are searched too, and every mapped path that holds a variable counts.
    Scalars are left out (a mapped scalar is a parameter of the formula, not a weight), and so
    are variables that hold no floating-point numbers."""
    named: dict[int, tuple[str, Any]] = {}

    def add(name: str, value: Any) -> None:  # a tf.Variable or a Keras 3 Variable
        is_variable = hasattr(value, "assign") and hasattr(value, "numpy")
        if not (is_variable and getattr(value, "trainable", False) and len(value.shape)):
            return
        dtype = getattr(value.dtype, "name", value.dtype)  # tf.DType, or Keras' string
        if "float" in str(dtype):  # integer indices, masks and strings are no weights
            named.setdefault(id(value), (name, value))

    attributes = vars(layer) if hasattr(layer, "__dict__") else {}
    # public names first: Keras also keeps each weight in private lists of its own
    for attribute, value in sorted(attributes.items(), key=lambda item: item[0].startswith("_")):
        for index, item in enumerate(value if isinstance(value, (list, tuple)) else [value]):
            add(f"{attribute}[{index}]" if isinstance(value, (list, tuple)) else attribute, item)
    tracked = getattr(layer, "trainable_weights", None)
    for variable in tracked if tracked is not None else getattr(layer, "trainable_variables", ()):
        add(str(getattr(variable, "path", None) or variable.name), variable)
    reached: set[int] = set()
    for name, path in mapping.items():
        try:
            value = _follow(layer, path)
        except (AttributeError, ValueError, IndexError, TypeError):
            continue  # reading the weights says what is wrong with the path
        add(name, value)
        reached.add(id(value))
    return [(name, value, key in reached) for key, (name, value) in named.items()]


def _perturb(variables: list[Any], seed: int) -> None:
    """Move every weight off its initial value, so zero biases and unit gains are exercised."""
    rng = np.random.default_rng(seed + 7919)
    for variable in variables:
        current = np.asarray(variable.numpy())
        noise = 0.1 * rng.standard_normal(current.shape).astype(current.dtype)
        variable.assign(current + noise)


def _read_weights(layer: Any, mapping: dict[str, str]) -> tuple[dict[str, Any], list[str]]:
    """The mapped weights' values, and the names of those the code never built (never used)."""
    values: dict[str, Any] = {}
    unused: list[str] = []
    for name, path in mapping.items():
        with _phase(f"reading weight {name}={path}"):
            try:
                value = _follow(layer, path)
            except (AttributeError, ValueError):
                if not _unbuilt_on_path(layer, path):
                    raise
                unused.append(name)  # a sub-layer never called has no weights to show
                continue
            if value is None:
                raise ValueError(f"{path} is None ({_why_none(layer, path)})")
            array = np.asarray(value.numpy() if hasattr(value, "numpy") else value)
            if array.dtype.kind not in "biuf":
                raise TypeError(
                    f"weights: {name}={path} is {_kind_of(value)}, not a weight (numbers); "
                    "name a variable of the layer, such as inner.kernel"
                )
            values[name] = array
    return values, unused


_SWITCHED_OFF = {"bias": "use_bias=False", "beta": "center=False", "gamma": "scale=False"}
"""The Keras constructor argument that leaves a layer without the weight of that name."""


def _why_none(layer: Any, path: str) -> str:
    """Why the weight at ``path`` is None, in the words of the layer that holds it: a Dense
    built with ``use_bias=False`` has no bias, a LayerNormalization built with
    ``center=False`` no beta (and with ``scale=False`` no gamma)."""
    owner_path, _, attribute = path.rpartition(".")
    switch = _SWITCHED_OFF.get(attribute)
    if switch is None:
        return "the layer was built without it"
    if attribute == "bias":
        return f"a layer built with {switch} has no bias"
    try:
        owner = _follow(layer, owner_path) if owner_path else layer
    except (AttributeError, ValueError, IndexError, TypeError):
        return "the layer was built without it"
    return f"a {type(owner).__name__} built with {switch} has no {attribute}"


def _kind_of(value: Any) -> str:
    """What a value is, in a few words, without trusting its ``str``."""
    kind = type(value).__name__
    if isinstance(value, str):
        return f"the text {value[:40]!r}"
    return f"a {kind}" if kind[:1].lower() not in "aeiou" else f"an {kind}"


def _unbuilt_on_path(obj: Any, path: str) -> bool:
    """Does the path pass through a Keras layer that was never built (so never called)?"""
    parts = path.split(".")
    for depth in range(len(parts)):
        try:
            current = _follow(obj, ".".join(parts[:depth])) if depth else obj
        except (AttributeError, ValueError, IndexError, TypeError):
            return False
        if getattr(current, "built", True) is False:
            return True
    return False


_STEP = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)((?:\[-?\d+\])*)")


def _follow(obj: Any, path: str) -> Any:
    """Walk ``wq.kernel`` or ``ffn.layers[0].bias`` through attributes and indexes only."""
    for part in path.split("."):
        match = _STEP.fullmatch(part)
        if match is None:
            raise ValueError(f"bad weight path {path!r}")
        obj = getattr(obj, match.group(1))
        for index in re.findall(r"-?\d+", match.group(2)):
            obj = obj[int(index)]
    return obj


def _as_sequence(result: Any) -> list[Any]:
    if isinstance(result, (tuple, list)):
        return list(result)
    if isinstance(result, dict):
        return list(result.values())
    return [result]


def _outputs(result: Any) -> tuple[list[Any], list[str]]:
    """The returned values as arrays, and the dtype each came back in (bfloat16 and the
    other types NumPy has no number kind for are compared as float32)."""
    out, dtypes = [], []
    for index, item in enumerate(_as_sequence(result)):
        with _phase("output"):
            value = np.asarray(item.numpy() if hasattr(item, "numpy") else item)
            dtype = getattr(item, "dtype", None)
            name = str(getattr(dtype, "name", None) or value.dtype.name)
            if value.dtype.kind not in "biuf":
                if dtype is None:
                    raise TypeError(
                        f"returned value {index} is a {type(item).__name__}, not a tensor"
                    )
                if not getattr(dtype, "is_floating", False):
                    raise TypeError(
                        f"returned value {index} is a {type(item).__name__} of {name}, "
                        "not of numbers"
                    )
                value = value.astype(np.float32)
        out.append(value)
        dtypes.append(name)
    return out, dtypes


def _time_all(
    entry: Any, kind: str, request: dict[str, Any], arrays: dict[str, Any]
) -> list[dict[str, Any]]:
    spec = request["timing"]
    results = []
    for run in spec["runs"]:
        init, sources = run.get("init", {}), request.get("init_sources")
        runner = _bind(entry, kind, run, arrays, init, prefix=run["prefix"], sources=sources)
        results.append(
            _time_runner(runner, run["label"], spec, eager_only=run.get("eager_only", False))
        )
    return results


def _time_runner(
    runner: _Runner, label: str, spec: dict[str, Any], *, eager_only: bool
) -> dict[str, Any]:
    warmup, repeats = int(spec.get("warmup", 1)), max(int(spec.get("repeats", 5)), 3)
    timing: dict[str, Any] = {"label": label, "eager": _repeat(runner, warmup, repeats)}
    if eager_only:
        return timing
    compiled = tf.function(runner.target)
    traced = _Runner(compiled, runner.args, runner.kwargs, runner.layer)
    try:
        start = time.perf_counter()
        _sync(traced())
        timing["trace"] = time.perf_counter() - start
        timing["graph"] = _repeat(traced, warmup, repeats)
    except Exception as exc:  # code that cannot be traced still has its eager timing
        timing["graph_error"] = _clean(f"{type(exc).__name__}: {exc}")[:300]
    return timing


def _repeat(runner: _Runner, warmup: int, repeats: int) -> list[float]:
    with _phase("timing"):
        for _ in range(warmup):
            _sync(runner())
        samples = []
        for _ in range(repeats):
            start = time.perf_counter()
            _sync(runner())
            samples.append(time.perf_counter() - start)
    return samples


def _sync(result: Any) -> None:
    """Force the computation to finish (pull results to host), so the clock is honest."""
    for item in _as_sequence(result):
        if hasattr(item, "numpy"):
            item.numpy()


def _failure(raised: SnippetRaised, request: dict[str, Any]) -> dict[str, Any]:
    error = raised.error
    filename = request.get("filename") or ""
    root = session_root(request)
    file, line = _snippet_line(error, filename, root)
    frames = _shown_traceback(error, root)
    return {
        "ok": False,
        "phase": raised.phase,
        "type": type(error).__name__,
        # A SyntaxError's str() repeats a mangled filename; its bare msg is what helps.
        "message": _clean(error.msg if isinstance(error, SyntaxError) else _said(error))
        or type(error).__name__,
        "line": line,
        "file": file,
        "traceback": _clean("".join(frames[-6:]))[-_MAX_TEXT:],
    }


def _said(error: BaseException) -> str:
    """An exception's message; its own ``__str__`` may fail, and that is the snippet's doing."""
    try:
        return str(error)
    except Exception as inner:  # any failure of user code is reported, never raised
        return f"(its message could not be read: {type(inner).__name__} in its __str__)"


def _shown_traceback(error: BaseException, root: str) -> list[str]:
    """The traceback a card shows: without the checker's own frames, and with no path of
    the build machine (cards are published). A project file is shown relative to the
    project, an installed module from its package, anything else by its name alone."""
    shown = traceback.TracebackException.from_exception(error)
    seen: set[int] = set()
    pending = [shown]
    while pending:
        current = pending.pop()
        if id(current) in seen:
            continue
        seen.add(id(current))
        if getattr(current, "filename", None):  # a SyntaxError prints the file it names
            current.filename = shown_path(str(current.filename), root)
        current.stack = traceback.StackSummary.from_list(
            [
                (shown_path(frame.filename, root), frame.lineno or 0, frame.name, frame.line)
                for frame in current.stack
                if not frame.filename.startswith(CHECKER)
            ]
        )
        grouped = getattr(current, "exceptions", None) or ()  # an ExceptionGroup's
        linked = (current.__cause__, current.__context__, *grouped)
        pending.extend(e for e in linked if e is not None)
    return list(shown.format())


def session_root(request: dict[str, Any]) -> str:
    """The project root the parent sent (frames under it belong to the user)."""
    return str(request.get("root", ""))


def _snippet_line(error: BaseException, filename: str, root: str) -> tuple[str, int]:
    """The innermost frame in the snippet (or, for a module, in the project's own files)."""

    def ours(name: str) -> bool:
        if filename:
            return name == filename
        return bool(root) and name.startswith(root + os.sep) and "site-packages" not in name

    if isinstance(error, SyntaxError) and error.filename and ours(error.filename):
        return error.filename, int(error.lineno or 0)
    found = ("", 0)
    for frame in traceback.extract_tb(error.__traceback__):
        if ours(frame.filename):
            found = (frame.filename, frame.lineno or 0)
    return found


def _clean(text: str) -> str:
    return strip_ansi(text)[:_MAX_TEXT]


_AUTOGRAPH_MODULE = "__autograph_generated_file"


def _forget_local_modules(session: Session, before: set[str]) -> list[str]:
    """Report project files imported by this check, then unload them so edits are seen;
    drop the modules AutoGraph generated for it, and their temporary files."""
    root = str(session.root) + os.sep
    files = []
    for name in set(sys.modules) - before:
        path = getattr(sys.modules.get(name), "__file__", None) or ""
        if name.startswith(_AUTOGRAPH_MODULE):
            # The file AutoGraph wrote the converted code to (the code stays loaded). The
            # worker's folder goes when the worker does; this keeps a long-lived worker's
            # folder (under mkdocs serve) from growing with every check.
            with contextlib.suppress(OSError):
                os.unlink(path)
            del sys.modules[name]
            continue
        if name.startswith("formula_snippet_") or path.startswith(root):
            if path.startswith(root) and os.path.exists(path):
                files.append(os.path.relpath(path, session.root))
            linecache.cache.pop(session.sources.pop(name, ""), None)
            del sys.modules[name]
    return sorted(files)
