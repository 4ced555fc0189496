"""An oracle of one's own, named in the ``oracles`` option, in a process of its own.

The build never imports the project's oracle module. :func:`load` starts
:mod:`formula_check.runtime.oracle_server`, which imports it with the environment a check gets
and confined as a check is, and describes the :class:`.Oracle` it found. The build registers a
copy of it whose callables (``compute``, ``derive``, ``generate``, ``tolerance``, a regime's
``inputs`` and ``sizes``, and any other among its fields) are :class:`Proxy` objects: each
call sends its arguments and gets the value back, or the exception the oracle raised, raised
here again under its own name and message. The server answers each call from a process forked
for it, which starts from the state right after the import: nothing an oracle keeps (a
counter, a cache) carries from one call to the next.

What crosses, both ways, is a tree of JSON values and numeric arrays framed by
:mod:`..wire` (:func:`pack`, :func:`unpack`): a NumPy random generator travels as its
state, and comes back moved as far as the call moved it; nothing is unpickled.

States of an :class:`OracleProcess`: *described* (it answers calls, one at a time) and
*ended*: killed once its oracle is no longer referenced, or as the build ends. Callers:
:func:`.registry.load_oracle`; the server, for what crosses.
"""

from __future__ import annotations

import builtins
import contextlib
import dataclasses
import functools
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import weakref
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from formula_check import wire
from formula_check.errors import OracleError
from formula_check.lazy import numpy as np  # imported on first use
from formula_check.model import Array
from formula_check.oracles.base import Oracle, Regime, TensorSpec
from formula_check.snippets import file_digest

SERVER = "formula_check.runtime.oracle_server"  # run as ``python -m``, never imported here

_SCALARS = (type(None), bool, int, float, str)
"""What crosses as itself, in JSON: exactly these (NumPy's float64, a float that divides by
zero otherwise, crosses as a NumPy scalar)."""
_CLASSES: dict[str, type] = {"Oracle": Oracle, "TensorSpec": TensorSpec, "Regime": Regime}
"""What crosses field by field: exactly these (a subclass's methods would run in the build)."""


@dataclass
class Packing:
    """What :func:`pack` gathers beside the JSON: the arrays; the callables met, where the
    server describes its oracle (elsewhere ``None``: a callable crosses only as a proxy); the
    random generators met, whose moved states the answer brings back."""

    arrays: dict[str, Array] = field(default_factory=dict)
    callables: list[Callable[..., Any]] | None = None
    generators: list[np.random.Generator] = field(default_factory=list)


def pack(value: object, where: str, packing: Packing) -> Any:
    """``value`` as JSON, with what it holds besides gathered into ``packing``; an
    :class:`OracleError` that names ``where`` for what cannot cross. Each kind is packed by
    its entry of :data:`_PACKED_BY`."""
    kind = type(value)
    if kind in _SCALARS:
        return value
    packed = next((packed for crosses, packed in _PACKED_BY if crosses(value)), None)
    if packed is None:
        raise _cannot(where, f"a {kind.__module__}.{kind.__qualname__}")
    return packed(value, where, packing)


def _pack_sequence(value: list[object] | tuple[object, ...], where: str, packing: Packing) -> Any:
    items = [pack(item, f"{where}[{i}]", packing) for i, item in enumerate(value)]
    return {"t": type(value).__name__, "v": items}


def _pack_mapping(value: Mapping[object, object], where: str, packing: Packing) -> Any:
    if any(type(key) not in _SCALARS for key in value):
        raise _cannot(where, "a mapping whose keys are not strings or numbers")
    return {"t": "dict", "v": [[k, pack(v, f"{where}[{k!r}]", packing)] for k, v in value.items()]}


def _pack_array(value: Array | np.generic, where: str, packing: Packing) -> Any:
    """An array, or a NumPy scalar, of numbers: its bytes go beside the JSON."""
    array = np.asarray(value)
    if array.dtype.kind not in "biuf":
        raise _cannot(where, f"an array of {array.dtype}")
    key = str(len(packing.arrays))
    packing.arrays[key] = array
    return {"t": "array" if type(value) is np.ndarray else "scalar", "v": key}


def _pack_dtype(value: type[np.generic], where: str, packing: Packing) -> Any:
    return {"t": "dtype", "v": np.dtype(value).str}


def _pack_generator(value: np.random.Generator, where: str, packing: Packing) -> Any:
    """A random generator by its state; ``packing`` keeps it, to move it as the call did."""
    packing.generators.append(value)
    return {"t": "rng", "v": pack(value.bit_generator.state, where, packing)}


def _pack_fields(value: Any, where: str, packing: Packing) -> Any:
    """One of :data:`_CLASSES`, field by field."""
    return {
        "t": type(value).__name__,
        "v": {
            f.name: pack(getattr(value, f.name), f"{where}.{f.name}", packing)
            for f in dataclasses.fields(value)
        },
    }


def _pack_call(value: Callable[..., Any], where: str, packing: Packing) -> Any:
    """A proxy by its index; elsewhere a callable by its place in ``packing`` (the server's
    packing, which describes its oracle, is the only one that takes them)."""
    if isinstance(value, Proxy):
        return {"t": "call", "v": value.index}
    if packing.callables is None:
        kind = type(value)
        raise _cannot(where, f"a {kind.__module__}.{kind.__qualname__}")
    packing.callables.append(value)
    return {"t": "call", "v": len(packing.callables) - 1}


_PACKED_BY: tuple[tuple[Callable[[object], bool], Callable[[Any, str, Packing], Any]], ...] = (
    (lambda value: type(value) in (list, tuple), _pack_sequence),
    (lambda value: isinstance(value, Mapping), _pack_mapping),
    (lambda value: type(value) is np.ndarray or isinstance(value, np.generic), _pack_array),
    (lambda value: isinstance(value, type) and issubclass(value, np.generic), _pack_dtype),
    (lambda value: isinstance(value, np.random.Generator), _pack_generator),
    (lambda value: type(value) in _CLASSES.values(), _pack_fields),
    (callable, _pack_call),
)
"""Each kind that crosses besides :data:`_SCALARS`, first match first, and how it is packed."""


def _cannot(where: str, what: str) -> OracleError:
    return OracleError(
        f"{where} is {what}, which cannot pass between the build and the oracle's own process "
        "(numbers, strings, NumPy arrays of numbers, and lists, tuples and dicts of them can)"
    )


Calls = Callable[[int], Callable[..., Any]]  # a packed call's callable: the server's, or a proxy


def unpack(  # noqa: PLR0911  (one per kind)
    value: Any, arrays: Mapping[str, Array], calls: Calls, generators: list[np.random.Generator]
) -> Any:
    """What :func:`pack` packed; each random generator is also appended to ``generators``."""
    if not isinstance(value, dict):
        return value
    tag, held = value["t"], value["v"]
    deeper = functools.partial(unpack, arrays=arrays, calls=calls, generators=generators)
    if tag in ("list", "tuple"):
        items = [deeper(item) for item in held]
        return items if tag == "list" else tuple(items)
    if tag == "dict":
        return {key: deeper(item) for key, item in held}
    if tag in ("array", "scalar"):
        return arrays[held] if tag == "array" else arrays[held][()]
    if tag == "dtype":
        return np.dtype(held).type
    if tag == "rng":
        generator = _generator(deeper(held))
        generators.append(generator)
        return generator
    if tag == "call":
        return calls(int(held))
    return _CLASSES[tag](**{name: deeper(item) for name, item in held.items()})


def _generator(state: Mapping[str, Any]) -> np.random.Generator:
    kind = getattr(np.random, str(state["bit_generator"]), None)
    if not (isinstance(kind, type) and issubclass(kind, np.random.BitGenerator)):
        raise wire.ProtocolError(f"no such bit generator: {state['bit_generator']!r}")
    bits = kind()
    bits.state = state
    return np.random.Generator(bits)


def raised(exc: BaseException) -> list[Any]:
    """How an exception an oracle raised crosses: its type's name, its message, and its
    arguments where all are plain (so that it is made again as it was)."""
    plain = all(type(arg) in _SCALARS for arg in exc.args)
    return [type(exc).__name__, str(exc), list(exc.args) if plain else None]


def raised_again(name: str, message: str, args: list[Any] | None) -> Exception:
    """The exception :func:`raised` describes: Python's own type of that name, or one made
    with the name (NumPy's ``LinAlgError``), so that the card says what it says today."""
    kind = getattr(builtins, name, None)
    if isinstance(kind, type) and issubclass(kind, Exception):
        with contextlib.suppress(Exception):  # one that takes other arguments: named below
            return kind(*(args if args is not None else [message]))
    return _named(name)(message)


@functools.cache
def _named(name: str) -> type[Exception]:
    return type(name, (Exception,), {})


@dataclass(frozen=True)
class Proxy:
    """A callable of an oracle of one's own, called in its process."""

    process: OracleProcess
    index: int

    def __call__(self, *args: Any) -> Any:
        return self.process.call(self.index, args)


class OracleProcess:
    """The process an oracle of one's own is imported and called in (see the module)."""

    def __init__(self, reference: str, root: Path, env: Sequence[str]) -> None:
        self.reference = reference
        self.name = reference  # until it says the oracle's
        self.module: list[str] | None = None
        """Its module's file and that file's digest when it was imported (none: no file)."""
        self.lock = threading.Lock()
        folder = tempfile.mkdtemp(prefix="formula-check-oracle-")
        # A parent's death signal follows the thread that started the process: only the main
        # thread lasts as long as the build. Else the process ends as the build hangs up.
        main = threading.current_thread() is threading.main_thread()
        argv = [sys.executable, "-m", SERVER, "start", reference, str(root), folder]
        argv += [str(os.getpid() if main else 0), *env]
        try:
            self.process = subprocess.Popen(
                argv,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                cwd=root,
                start_new_session=True,  # a Ctrl-C is the build's to handle
            )
        except OSError as exc:
            shutil.rmtree(folder, ignore_errors=True)
            raise OracleError(f"the process of oracle {reference!r} did not start: {exc}") from None
        self.end = weakref.finalize(self, _end, self.process, folder)

    def exchange(
        self, header: Mapping[str, Any] | None, arrays: Mapping[str, Array]
    ) -> tuple[dict[str, Any], dict[str, Array]]:
        """Send ``header`` (none: only read what it says first), read its answer."""
        stdin, stdout = self.process.stdin, self.process.stdout
        assert stdin is not None and stdout is not None  # both piped
        with self.lock:
            try:
                if header is not None:
                    wire.write_message(stdin, header, arrays)
                return wire.read_message(stdout)
            except (OSError, ValueError, EOFError, wire.ProtocolError):
                pass
        raise OracleError(f"oracle {self.name!r}: its process ({self.reference}) {self._ended()}")

    def _ended(self) -> str:
        """How the process ended, in words."""
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.process.wait(1.0)
        status = self.process.returncode
        if status is None or not self.end.alive:
            return "stopped answering" if self.end.alive else "was closed"
        if status >= 0:
            return f"ended (exit code {status})"
        known = -status in signal.valid_signals()
        return f"was killed by {signal.Signals(-status).name if known else f'signal {-status}'}"

    def call(self, index: int, args: tuple[Any, ...]) -> Any:
        """The value of the server's callable ``index`` on ``args``; what it raised, raised."""
        packing = Packing()
        packed = pack(args, f"oracle {self.name!r}: its arguments", packing)
        request = {"call": index, "args": packed, "errors": np.geterr()}
        header, arrays = self.exchange(request, packing.arrays)
        if "error" in header:
            raise OracleError(f"oracle {self.name!r}: {header['error']}")
        for generator, state in zip(packing.generators, header["generators"], strict=True):
            generator.bit_generator.state = unpack(state, arrays, self.proxy, [])
        if "raised" in header:
            raise raised_again(*header["raised"])
        return unpack(header["value"], arrays, self.proxy, [])

    def proxy(self, index: int) -> Proxy:
        return Proxy(self, index)

    def unchanged(self) -> bool:
        """Whether it still runs, and its module's file is as it was when it was imported."""
        if self.module is None or self.process.poll() is not None:
            return False
        return bool(file_digest(Path(self.module[0])) == self.module[1])


def _end(process: subprocess.Popen[bytes], folder: str) -> None:
    """Kill the process (between two calls: nothing of it is lost), remove its folder."""
    with contextlib.suppress(OSError):
        process.kill()
    process.wait()
    for stream in filter(None, (process.stdin, process.stdout)):
        with contextlib.suppress(OSError):
            stream.close()
    shutil.rmtree(folder, ignore_errors=True)


_KEPT: dict[tuple[str, Path, tuple[str, ...]], tuple[OracleProcess, Oracle]] = {}
"""Each oracle loaded, with its process, by reference, root and ``env`` names: loaded again
(on each rebuild of ``mkdocs serve``) while its module's file is as it was imported, it is the
same oracle, and no new process pays for an interpreter and NumPy again."""


def load(reference: str, root: Path, env: Sequence[str]) -> Oracle:
    """The oracle ``reference`` names, imported in a process of its own started in ``root``
    with the variables ``env`` names (and what every check gets); its callables proxies."""
    key = (reference, root, tuple(env))
    kept = _KEPT.get(key)
    if kept is not None and kept[0].unchanged():
        return kept[1]
    process = OracleProcess(reference, root, env)
    header, arrays = process.exchange(None, {})
    if "error" in header:
        process.end()
        raise OracleError(str(header["error"]))
    oracle = unpack(header["oracle"], arrays, process.proxy, [])
    if type(oracle) is not Oracle:
        raise wire.ProtocolError(f"the process of {reference!r} described no oracle")
    process.name = oracle.name
    process.module = header["module"]
    _KEPT[key] = (process, oracle)
    return oracle
