"""Helpers shared by the engine tests: one warm engine per test process, spec builders."""

from __future__ import annotations

import atexit
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from formula_check.checking.compare import Difference
from formula_check.model import Array, CheckSpec, Location, TimingSpec
from formula_check.results import CheckResult, Verdict
from formula_check.runtime.confinement import abi_version
from formula_check.session.engine import Engine
from formula_check.snippets import inline_snippet

PROJECT = Path(__file__).resolve().parent / "snippets"
CONFINED = abi_version() > 0
"""This kernel offers Landlock: a check may write only its own temporary folder."""
WRITES_REFUSED = "the kernel confines each check to its own folder (Landlock): no write lands"
_ENGINES: dict[tuple[Any, ...], Engine] = {}


def shared_engine(root: Path = PROJECT, **options: Any) -> Engine:
    """An uncached engine kept warm for the whole test process (TensorFlow imports once)."""
    key = (root, tuple(sorted(options.items())))
    if key not in _ENGINES:
        engine = Engine(root, use_cache=False, **options)
        atexit.register(engine.close)
        _ENGINES[key] = engine
    return _ENGINES[key]


def spec_for(
    oracle: str, source: str, *, line: int = 10, timing: bool = False, **fields: Any
) -> CheckSpec:
    """A spec for an inline snippet on ``docs/page.md`` whose fence opens at ``line``."""
    code = textwrap.dedent(source).strip("\n") + "\n"
    snippet = inline_snippet(code, Location("docs/page.md", line), entry=fields.pop("entry", None))
    return CheckSpec(
        block_id=fields.pop("block_id", oracle),
        location=Location("docs/page.md", line - 4),
        oracle=oracle,
        snippet=snippet,
        timing=TimingSpec(enabled=timing),
        **fields,
    )


def start_process(argv: list[str], cwd: Path) -> subprocess.Popen[str]:
    """A site build started in the background, stdout and stderr merged (builds run in parallel)."""
    return subprocess.Popen(
        argv, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )


def mkdocs_build(
    project: Path, *, strict: bool = False, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """``mkdocs build`` of ``project`` as a user runs it, in a process of its own."""
    return subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", *(["--strict"] if strict else [])],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def run(oracle: str, source: str, **fields: Any) -> CheckResult:
    """Check one inline snippet on the shared engine."""
    return shared_engine().check(spec_for(oracle, source, **fields))


def _processes() -> tuple[dict[int, list[bytes]], dict[int, int]]:
    """Command lines and parent pids of every process we can see."""
    commands: dict[int, list[bytes]] = {}
    parents: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        try:
            command = (entry / "cmdline").read_bytes().split(b"\0")
            stat = (entry / "stat").read_text()
        except (OSError, ValueError):
            continue
        if not entry.name.isdigit() or stat.rpartition(")")[2].split()[0] == "Z":
            continue  # a zombie has exited: it runs nothing
        commands[int(entry.name)] = command
        parents[int(entry.name)] = int(stat.rpartition(")")[2].split()[1])
    return commands, parents


def checker_pids(project: Path) -> set[int]:
    """Every process formula-check runs for ``project``: zygote and workers."""
    return _checkers(_processes()[0], project)


def _checkers(commands: dict[int, list[bytes]], project: Path) -> set[int]:
    modules = (b"formula_check.runtime.child", b"formula_check.runtime.zygote")
    return {
        pid
        for pid, command in commands.items()
        if any(module in command for module in modules) and str(project).encode() in command
    }


def worker_pids(project: Path) -> set[int]:
    """The TensorFlow workers serving ``project`` (not the checks' processes forked from them):
    spawned ones name the child module and the project folder on their command line; forked
    ones are children of the zygote, whose command line they share."""
    commands, parents = _processes()  # one look: a process may start or end between two
    ours = _checkers(commands, project)
    zygotes = {
        pid
        for pid in ours
        if b"formula_check.runtime.zygote" in commands[pid] and parents.get(pid) not in ours
    }
    return {
        pid
        for pid in ours
        if (b"formula_check.runtime.child" in commands[pid] and parents.get(pid) not in ours)
        or parents.get(pid) in zygotes
    }


def wait_until(condition: Callable[[], object], seconds: float = 30.0) -> bool:
    """Poll ``condition`` until it holds (True) or ``seconds`` pass (False)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.02)
    return False


def parent_pid(pid: int) -> int:
    """The parent of process ``pid``, from ``/proc``."""
    return int(Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[1])


def without_tensorflow(folder: Path) -> Path:
    """A folder to put first on ``PYTHONPATH``: its ``tensorflow`` fails to import."""
    fake = folder / "tensorflow"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text("raise ImportError('No module named tensorflow')\n")
    return folder


def compare(
    name: str,
    actual: Array,
    expected: Array,
    dims: list[str] | tuple[str, ...],
    atol: Any,
    rtol: float,
    *,
    how: str = "",
    regime: str = "",
) -> Verdict:
    """One array judged as the checker judges an output: :class:`Difference` of the two,
    judged against ``atol`` (a number or a per-element array) and ``rtol``."""
    return Difference.of(actual, expected).judged(name, dims, atol, rtol, how=how, regime=regime)
