"""The engine every face calls: spec in, result out (cached, isolated, timed)."""

from __future__ import annotations

import contextlib
import dataclasses
import math
import threading
import time
from collections.abc import Generator, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING

from formula_check.errors import FormulaCheckError, MissingTensorFlowError, WorkerError
from formula_check.model import CheckSpec, Status
from formula_check.oracles import Oracle, get_oracle
from formula_check.oracles.registry import loaded
from formula_check.results import CheckResult, Environment, SnippetFailure
from formula_check.runtime.environment import settings_digest
from formula_check.store.cache import (
    MemoryResults,
    ResultCache,
    cache_key,
    cacheable,
    tensorflow_version,
)
from formula_check.store.digest import checker_digest
from formula_check.store.read_stamps import Inputs

# What only a check that runs needs (planning, the worker client, the messages, BLAS
# control) loads on the first one: a build served from the cache never pays for it.
if TYPE_CHECKING:
    from threadpoolctl import ThreadpoolController

    from formula_check.planning.plan import Plan
    from formula_check.runtime.pool import Reply, WorkerPool

DEFAULT_CACHE_DIR = Path(".cache") / "formula-check"
WROTE = "the code wrote into the project: "
"""How the note on a result whose check wrote project files begins."""
UNSEEN = "not cached: "
"""How the note on a result whose check read what no key can follow begins."""
REQUESTS_PER_WORKER = 2
"""Checks in flight per worker: one running in it, one being planned or judged here."""


class _OneBlasThread:
    """While any check is judged, NumPy's BLAS in this process runs on one thread.

    The float64 oracles and their float32 samples are matrix products; OpenBLAS starts a
    thread per core for each, and those threads spin while they wait. Beside the worker, whose
    TensorFlow keeps every core busy, and MkDocs, they starve one another: measured on two
    cores, a cold build of 20 Transformer blocks at the tutorial's sizes took 1.8 times as long
    with BLAS on two threads (``bench/cold_breakdown.py``). Judging threads enter and leave
    in any order: the first in limits BLAS, the last out restores it, so a notebook's own
    NumPy code runs as it did before and after a check.

    Any judging thread may be the first in or the last out, and threadpoolctl (3.8 on) lets
    only the first thread that ever set a pthreads OpenBLAS's pool size set it again: the
    others' limits silently do nothing. So each limit and restore here first takes that
    control for the thread making it (under the lock, so no judging thread takes it from
    another mid-change). Without that, measured in a cold build, every check judged on the
    second thread ran its oracles on two BLAS threads: the first waited on the second,
    starved by the worker, for ten times the oracle's own time."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._inside = 0
        self._limit: object | None = None
        self._controller: ThreadpoolController | None = None

    @contextlib.contextmanager
    def held(self) -> Iterator[None]:
        with self._lock:
            if self._inside == 0:
                if self._controller is None:
                    from threadpoolctl import ThreadpoolController

                    self._controller = ThreadpoolController()
                _take_blas_control()
                self._limit = self._controller.limit(limits=1, user_api="blas")
            self._inside += 1
        try:
            yield
        finally:
            with self._lock:
                self._inside -= 1
                if self._inside == 0 and self._limit is not None:
                    _take_blas_control()
                    self._limit.restore_original_limits()  # type: ignore[attr-defined]
                    self._limit = None


def _take_blas_control() -> None:
    """Let the calling thread set OpenBLAS's pool size, whichever thread set it before
    (threadpoolctl before 3.8 lets any thread: there is nothing to take)."""
    import threadpoolctl

    controller = getattr(threadpoolctl, "OpenBLASController", None)
    clear = getattr(controller, "clear_controlling_thread", None)
    if clear is not None:
        clear(force=True)


ONE_BLAS_THREAD = _OneBlasThread()


class Engine:
    """Checks blocks in worker processes, with an on-disk cache in front.

    Workers start on the first check that misses the cache, and stay warm until
    :meth:`close` (so ``mkdocs serve`` pays the TensorFlow import once).
    """

    def __init__(
        self,
        root: Path,
        *,
        workers: int = 1,
        cache_dir: Path | None = None,
        use_cache: bool = True,
        python: str | None = None,
        memory_limit_mb: int = 0,
        fork: bool = True,
        keep_alive: float = 0.0,
        env: tuple[str, ...] = (),
    ) -> None:
        if workers < 1:
            raise WorkerError(f"workers must be at least 1, got {workers}")
        self.root = root.resolve()
        self.workers = workers
        self._pool_settings = (python, memory_limit_mb, fork, keep_alive, env)
        self._pool: WorkerPool | None = None
        self._pool_lock = threading.Lock()
        self.env_digest = settings_digest(env)
        """The values of the variables a worker gets that can change a result (those the
        project names, TensorFlow's settings...): one computed with other values is another
        result, cached under another key."""
        directory = cache_dir if cache_dir is not None else self.root / DEFAULT_CACHE_DIR
        self.cache = ResultCache(
            directory if directory.is_absolute() else self.root / directory, self.root
        )
        self.use_cache = use_cache
        self.wrote = MemoryResults(self.root)
        """Results of checks that wrote into the project, kept while their inputs are the
        same, whatever the cache: under ``mkdocs serve`` a block that writes into the docs
        folder would otherwise trigger a rebuild, which runs it again, which writes again."""
        self._unkeyed: dict[int, Oracle] = {}
        """The oracles whose code has no name that :attr:`wrote` holds results of, by ``id``."""
        self.tf_version = tensorflow_version()
        self.executed = 0
        self._startup = 0.0
        self._lock = threading.Lock()
        self._running: dict[str, threading.Event] = {}
        """Keys of the checks running now, each set when its check ends."""

    @property
    def pool(self) -> WorkerPool:
        """The workers, made (not started) on first use: a build whose every block comes from
        the cache never loads the worker client."""
        with self._pool_lock:
            if self._pool is None:
                from formula_check.runtime.pool import WorkerPool

                python, memory_limit_mb, fork, keep_alive, env = self._pool_settings
                self._pool = WorkerPool(
                    self.root,
                    self.workers,
                    python,
                    memory_limit_mb,
                    fork=fork,
                    keep_alive=keep_alive,
                    env=env,
                )
            return self._pool

    @property
    def startup_seconds(self) -> float:
        """Time spent starting workers (the TensorFlow import), by checks or ahead of them;
        never counted in a block's own time."""
        return self._startup + (self._pool.started_ahead if self._pool is not None else 0.0)

    def check(
        self,
        spec: CheckSpec,
        stopped: threading.Event | None = None,
        order: float = math.inf,
    ) -> CheckResult:
        """Check one block. Snippet problems become results; spec problems raise. Once
        ``stopped`` is set, a check still waiting for a worker runs nothing. Checks waiting
        for a worker get one by ``order``, lowest first."""
        if spec.skip:
            return _bare(spec, Status.SKIPPED, spec.skip)
        started = time.perf_counter()
        key = cache_key(spec, self.tf_version, self.env_digest)
        keyed = cacheable(spec)  # else no result on disk may answer it
        if self.use_cache and keyed:
            cached = self.cache.get(key, spec)
            if cached is not None:
                return cached
        with self._alone(key, stopped) as earlier:
            if earlier == "stopped":
                from formula_check.runtime.pool import CANCELLED

                return _bare(spec, Status.SKIPPED, CANCELLED)
            if earlier == "ran":  # the same check just ran for another block: its result may do
                return self.check(spec, stopped, order)
            # Results of checks that wrote are remembered under their key, which names the
            # oracle's code (keyed) or its module's file (``loaded``: under mkdocs serve it is
            # loaded again on each rebuild, the same while the file is). An oracle registered
            # from Python with code that has no name has neither: registered again (a notebook
            # cell run again) it has the same key, so the registered object tells it apart.
            oracle = get_oracle(spec.oracle)
            remembered = key if keyed or loaded(oracle) else f"{key} {id(oracle)}"
            wrote = self.wrote.get(remembered, spec)
            if wrote is not None:
                return wrote
            result, read, waited = self._run(spec, stopped, order)
            # The block's own cost: starting a worker (the TensorFlow import) is counted
            # apart, and waiting for one to be free is not the block's either.
            elapsed = time.perf_counter() - started - waited
            result = dataclasses.replace(result, elapsed=elapsed, imports=read.project_files())
            return self._keep(spec, result, read, (key, keyed, remembered), oracle)

    def _keep(
        self,
        spec: CheckSpec,
        result: CheckResult,
        read: Inputs,
        keys: tuple[str, bool, str],
        oracle: Oracle,
    ) -> CheckResult:
        """``result``, kept where its keys allow: on disk under ``key`` when ``keyed`` (its
        oracle's code has a name) and its check read nothing no key follows (it then says
        so), in memory under ``remembered`` when its check wrote into the project (whatever
        it read: under ``mkdocs serve`` its write would otherwise rebuild the site for ever)."""
        key, keyed, remembered = keys
        if read.unseen:
            result = dataclasses.replace(result, notes=(*result.notes, unseen_note(read)))
        elif self.use_cache and keyed and _deterministic(result):
            self.cache.put(key, result, read, spec)
        if any(note.startswith(WROTE) for note in result.notes):
            if remembered != key:  # kept alive while remembered: its id names no other
                self._unkeyed[id(oracle)] = oracle
            self.wrote.put(remembered, result, read, spec)
        return result

    @contextlib.contextmanager
    def _alone(self, key: str, stopped: threading.Event | None) -> Iterator[str]:
        """Run the check of ``key`` alone: while one runs, another of the same key waits for
        its end (then ``ran``: look again for its result) or for ``stopped`` (``stopped``);
        the first says ``""``. Under ``mkdocs
        serve``, a rebuild would otherwise run a block again while its check from the build
        before still runs, and a block that writes into the docs would never be caught up."""
        with self._lock:
            running = self._running.get(key)
            if running is None:
                self._running[key] = threading.Event()
        if running is not None:
            while not running.wait(0.1):
                if stopped is not None and stopped.is_set():
                    yield "stopped"
                    return
            yield "ran"
            return
        try:
            yield ""
        finally:
            with self._lock:
                self._running.pop(key).set()

    def check_many(self, specs: Iterable[CheckSpec]) -> list[CheckResult]:
        """Every result of :meth:`iter_check`, in input order."""
        return list(self.iter_check(specs))

    def iter_check(
        self,
        specs: Iterable[CheckSpec],
        *,
        prepared: bool = False,
        stop: threading.Event | None = None,
    ) -> Generator[CheckResult, None, None]:
        """Check blocks concurrently, yielding results in input order, each as soon as it and
        those before it are done (a progress line can follow along). ``prepared``: the
        caller already called :meth:`prepare` for them. Once ``stop`` is set, the checks
        running are stopped and those left run nothing: each is a SKIPPED result saying so
        (``mkdocs serve`` sets it when an edit makes this batch's results stale).

        Two threads per worker: while one judges a reply against the oracle (in this
        process), the other's request already runs, so no worker waits for the judging.
        A spec that raises (bad option, unknown oracle) becomes an ERROR result here, so
        one bad block never hides the others.
        """
        specs = list(specs)
        if not prepared:
            self.prepare(specs)
        stopped = stop if stop is not None else threading.Event()
        executor = ThreadPoolExecutor(max_workers=REQUESTS_PER_WORKER * self.workers)
        futures = [
            executor.submit(self._check_reporting, spec, stopped, order)
            for order, spec in enumerate(specs)
        ]
        try:
            for future in futures:
                yield future.result()
        finally:
            # Stopped early (the caller closed the iterator, a check raised): drop the queue
            # rather than run it to the end; only checks already running in a worker are
            # waited for (one still waiting for a worker gives up).
            stopped.set()
            executor.shutdown(wait=True, cancel_futures=True)

    def _check_reporting(
        self, spec: CheckSpec, stopped: threading.Event, order: int
    ) -> CheckResult:
        try:
            return self.check(spec, stopped, order)
        except MissingTensorFlowError:
            raise
        except FormulaCheckError as exc:
            return error_result(spec, type(exc).__name__, exc.message)

    def _run(
        self, spec: CheckSpec, stopped: threading.Event | None, order: float
    ) -> tuple[CheckResult, Inputs, float]:
        from formula_check.planning.plan import plan_check

        plan = plan_check(spec, str(self.root))
        cancelled = stopped.is_set if stopped is not None else lambda: False
        request = dataclasses.replace(plan.request, unreadable=(str(self.cache.directory),))
        reply, env = self.pool.request(request, plan.arrays, spec.timeout, cancelled, order)
        with self._lock:
            self.executed += 1
            self._startup += reply.startup
        result, read = self._judge(spec, plan, reply, env)
        return result, read, reply.startup + reply.queued

    def _judge(
        self, spec: CheckSpec, plan: Plan, reply: Reply, env: Environment
    ) -> tuple[CheckResult, Inputs]:
        result, read = self._verdict(spec, plan, reply, env)
        written = list(reply.written_files)
        if written and result.status is not Status.SKIPPED:
            result = dataclasses.replace(result, notes=(*result.notes, wrote_note(written)))
        return result, read

    def _verdict(
        self, spec: CheckSpec, plan: Plan, reply: Reply, env: Environment
    ) -> tuple[CheckResult, Inputs]:
        # Judging loads the LaTeX compiler; a build served from the cache never needs it.
        from formula_check.checking.judge import evaluate, snippet_failure
        from formula_check.messages import SnippetFailed

        if reply.outcome == "cancelled":
            return _bare(spec, Status.SKIPPED, reply.detail, env), Inputs()
        if reply.outcome == "timeout":
            return _bare(spec, Status.TIMEOUT, f"timed out: {reply.detail}", env), Inputs()
        answer = reply.answer
        if reply.outcome == "crash" or answer is None:
            return _bare(spec, Status.ERROR, f"crashed: {reply.detail}", env), Inputs()
        read = Inputs(
            (*answer.local_files, *answer.outside_files), answer.listed_folders, answer.unseen_reads
        )
        if isinstance(answer, SnippetFailed):
            failure = snippet_failure(plan, answer, str(self.root))
            result = dataclasses.replace(
                _bare(spec, Status.ERROR, "", env), failure=failure, stdout=answer.stdout
            )
            return result, read
        with ONE_BLAS_THREAD.held():
            return evaluate(plan, answer, reply.arrays, env), read

    def warm_up(self) -> None:
        """Start the workers now rather than on the first check."""
        self.pool.warm_up()

    def prepare(self, specs: Iterable[CheckSpec]) -> None:
        """Do now, on the calling thread, what the first of ``specs`` would do before it can
        ask a worker: hash the checker's sources for the cache keys, and without the cache
        (every check runs) start the workers. Reading those files from threads that contend
        with a busy main thread delayed the TensorFlow import by up to 0.7 s."""
        checker_digest()
        if not self.use_cache and any(not spec.skip for spec in specs):
            self.start_in_background()

    def start_in_background(self) -> threading.Thread:
        """Start the workers on a background thread, so that a later check does not wait for
        the TensorFlow import (``mkdocs serve`` after a first build served from the cache)."""
        return self.pool.start_in_background()

    def close(self) -> None:
        """Stop the workers (none were made: nothing to stop)."""
        with self._pool_lock:
            pool = self._pool
        if pool is not None:
            pool.close()

    def __enter__(self) -> Engine:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _deterministic(result: CheckResult) -> bool:
    """Worth caching: a verdict, or an exception the snippet raised. A timeout or a crashed
    worker may not happen again, so those are always retried; so is a module not found,
    since no file it read can say when the module comes back (a branch checked out)."""
    if result.status in {Status.VERIFIED, Status.MISMATCH}:
        return True
    failure = result.failure
    return (
        result.status is Status.ERROR
        and failure is not None
        and failure.type not in {"ModuleNotFoundError", "InternalError"}
    )


def _bare(
    spec: CheckSpec, status: Status, message: str, env: Environment | None = None
) -> CheckResult:
    return CheckResult(
        block_id=spec.block_id,
        location=spec.location,
        oracle=spec.oracle,
        status=status,
        expect=spec.expect,
        message=message,
        environment=env or Environment(),
    )


def error_result(spec: CheckSpec, kind: str, message: str) -> CheckResult:
    """A result for a block that could not be checked at all (its spec is unusable)."""
    return dataclasses.replace(
        _bare(spec, Status.ERROR, ""), failure=SnippetFailure(kind, message, spec.location)
    )


def wrote_note(written: list[str]) -> str:
    """The note on a result whose check wrote ``written`` (project files)."""
    named = ", ".join(written[:5]) + (f" and {len(written) - 5} more" if len(written) > 5 else "")
    return (
        f"{WROTE}{named}. No input of this check, so it runs again only when the block or a "
        "file it reads changes: under mkdocs serve the write rebuilds the site once, not "
        "forever"
    )


def unseen_note(read: Inputs) -> str:
    """The note on a result whose check read by ways no key can follow: never cached."""
    return (
        f"{UNSEEN}{'; '.join(read.unseen)}: what it read there is in no cache key, so this "
        "result is not cached and the block runs again every build"
    )


def stop_kept() -> int:
    """Stop every process this user keeps alive with TensorFlow imported (``keep_alive``);
    how many there were. The faces' one way to reach them (``formula-check stop``)."""
    from formula_check.runtime.pool import stop_every_kept

    return stop_every_kept()
