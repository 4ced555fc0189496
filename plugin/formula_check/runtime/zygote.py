"""The zygote: one process imports TensorFlow, then forks a ready worker per request.

Importing TensorFlow is the largest fixed cost of a cold check (seconds of CPU). Paid once in
the zygote, a second worker, or the fresh worker that replaces one killed on a timeout, is a
``fork()`` away: a few milliseconds instead of another import.

The zygote only imports. It never runs an op or asks for devices, so neither TensorFlow's
thread pools nor a GPU context exist yet when it forks: each child creates its own, as a
freshly started process would (NumPy's BLAS may have started a thread; BLAS libraries handle
fork). Run as ``python -m formula_check.runtime.zygote PROJECT_ROOT``
with fd 0 a Unix socket to the parent, which speaks one line per request:

``fork HEX`` (with two descriptors attached: the child's conversation socket and its stderr)
    answered ``{"pid": N}``; the child serves requests exactly like ``worker.child``, with the
    folder whose path is ``HEX`` (hex-encoded bytes, made by the parent) as its temporary
    folder.
``wait N``
    answered ``{"status": S}`` if child N has exited (negative: the signal that killed it),
    ``{"running": true}`` if it has not; it never blocks.

The first line the zygote writes is its hello (:class:`.control.ZygoteHello`): ``ok``, or
not when TensorFlow cannot be imported, and the protocol version. EOF on fd 0 (the parent
closed the pool, or died) ends the zygote, and it takes its workers with it: each worker
also dies with the zygote.

**Kept alive** (``--listen ADDRESS --idle SECONDS``): the zygote outlives the build that
started it, so that the next build, CLI run or test session of the same project skips the
import too. It listens on a Unix socket in a folder only its user can enter, accepts
connections from that user only, and forks one handler per connection: a copy of itself that
speaks the protocol above with that client alone and ends, with the workers it forked, when
the client hangs up. The process started by the client returns once the socket listens (the
zygote itself has moved to a child of its own). With no client for ``SECONDS``, it exits.
That part is :mod:`.kept_server`.

States: *importing* (no line written yet), *serving* (answers its client, one line per
request; each worker it forks is its child, ended with it), *ended* (the client hung up:
every worker killed and reaped, their folders removed). Only the client talks to it.
"""

from __future__ import annotations

import contextlib
import gc
import os
import signal
import socket
import sys
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import IO, cast

from formula_check.runtime.child import run_worker
from formula_check.runtime.control import ZygoteHello
from formula_check.runtime.kept_server import listen
from formula_check.runtime.zygote_server import WorkerServer, serve_client

Importer = Callable[[], ZygoteHello]
"""Imports what every worker needs, before the first fork: :func:`import_tensorflow`."""


def import_tensorflow() -> ZygoteHello:
    """Import TensorFlow (through the worker's module); the hello that says how it went."""
    try:
        from formula_check.planning import plan as planning  # noqa: F401  (what each worker's warm-up plans with)
        from formula_check.runtime import warm_worker as execution  # noqa: F401  (the import is the point)
    except ImportError as exc:
        return ZygoteHello(ok=False, error=str(exc))
    warnings.simplefilter("ignore")
    # What the import made is kept out of the collector's way in every process forked from
    # here: a collection in a worker would otherwise write to each object's header, and so
    # copy every page of TensorFlow's Python heap into the worker (see isolation.ready_to_fork)
    gc.freeze()
    return ZygoteHello(ok=True)


def serve_forked(root: Path, conversation: int, scratch: str | None = None) -> int:
    """A forked worker's life: the requests of its conversation, as :mod:`.child` serves
    them."""
    # The project folder as it is now: a zygote kept alive may have started in a folder that
    # was since removed and made again under the same name.
    os.chdir(root)
    sock = socket.socket(fileno=conversation)
    # Unbuffered: a cancel that comes during a check is seen by select on the socket, not
    # left unread behind the request in a buffer
    requests = cast("IO[bytes]", sock.makefile("rb", buffering=0))
    answers = sock.makefile("wb")
    return run_worker(root, requests, answers, scratch)


def main(
    argv: list[str] | None = None,
    *,
    imports: Importer = import_tensorflow,
    serves: WorkerServer = serve_forked,
) -> int:
    """Import TensorFlow, say hello, then fork workers until the parent hangs up."""
    args = sys.argv[1:] if argv is None else argv
    root = Path(args[0]).resolve() if args else Path.cwd()
    if args[1:2] == ["--listen"] and len(args) == 5 and args[3] == "--idle":
        return listen(root, Path(args[2]), float(args[4]), imports, serves)
    control = socket.socket(fileno=0)
    # Inherited "ignore" would reap children behind our back and lose their exit statuses.
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    return serve_client(root, control, imports(), serves)


if __name__ == "__main__":
    with contextlib.suppress(KeyboardInterrupt):
        sys.exit(main())
