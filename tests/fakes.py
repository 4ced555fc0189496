"""An engine that answers without TensorFlow, for the tests of the faces.

The faces (the Markdown extension, the MkDocs plugin, the CLI, the pytest plugin) only need
what :class:`formula_check.session.Checker` lists. :class:`FakeEngine` has exactly that: each
block's result comes from a function of its spec, and the engine records what it was asked.
A face gets one through its engine seam: ``Engines(make=...)`` (the plugin's ``engines``,
the pytest run's ``engines``, the extension's ``engine`` option) or ``cli.main(argv,
make_engine=...)``.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from formula_check.model import CheckSpec, Status
from formula_check.results import CheckResult, Verdict
from formula_check.session.options import EngineSettings

Answer = Callable[[CheckSpec], CheckResult]


def verified(spec: CheckSpec) -> CheckResult:
    """A pass with one output verdict well inside its tolerance."""
    verdict = Verdict("output", True, ("n",), (4,), (4,), n_total=4, atol=1e-5, max_abs=1e-7)
    return _answer(spec, Status.VERIFIED, verdict)


def mismatch(spec: CheckSpec) -> CheckResult:
    """A drift: the output differs from the oracle far beyond its tolerance."""
    verdict = Verdict(
        "output",
        False,
        ("n",),
        (4,),
        (4,),
        max_abs=0.5,
        worst_index=(2,),
        worst_expected=0.125,
        worst_actual=0.625,
        n_bad=4,
        n_total=4,
        atol=1e-6,
        max_index=(2,),
        worst_allowed=1e-6,
    )
    return _answer(spec, Status.MISMATCH, verdict)


def drift_on_axis_1(spec: CheckSpec) -> CheckResult:
    """The tests' softmax pages: code over axis 1 drifts, any other code passes."""
    return mismatch(spec) if "axis=1" in spec.snippet.source else verified(spec)


def _answer(spec: CheckSpec, status: Status, verdict: Verdict) -> CheckResult:
    return CheckResult(
        spec.block_id, spec.location, spec.oracle, status, expect=spec.expect, verdicts=(verdict,)
    )


def by_id(answers: dict[str, Answer], default: Answer = verified) -> Answer:
    """Each block's answer by its id (``default`` for the others)."""
    return lambda spec: answers.get(spec.block_id, default)(spec)


@dataclass
class FakeEngine:
    """Answers each spec with ``answer(spec)``; remembers the specs and whether it closed."""

    answer: Answer = verified
    settings: EngineSettings | None = None
    checked: list[CheckSpec] = field(default_factory=list)
    started: bool = False
    closed: bool = False
    startup_seconds: float = 0.0

    def check_many(self, specs: Iterable[CheckSpec]) -> list[CheckResult]:
        return list(self.iter_check(specs))

    def iter_check(
        self,
        specs: Iterable[CheckSpec],
        *,
        prepared: bool = False,
        stop: threading.Event | None = None,
    ) -> Iterator[CheckResult]:
        for spec in specs:
            if stop is not None and stop.is_set():
                yield CheckResult(
                    spec.block_id, spec.location, spec.oracle, Status.SKIPPED, message="stopped"
                )
                continue
            self.checked.append(spec)
            yield self.answer(spec) if not spec.skip else _skipped(spec)

    def prepare(self, specs: Iterable[CheckSpec]) -> None:
        return None

    def start_in_background(self) -> object:
        self.started = True
        return None

    def close(self) -> None:
        self.closed = True


def _skipped(spec: CheckSpec) -> CheckResult:
    return CheckResult(spec.block_id, spec.location, spec.oracle, Status.SKIPPED, message=spec.skip)


@dataclass
class FakeMaker:
    """Makes :class:`FakeEngine` s answering with ``answer``; keeps every one it made."""

    answer: Answer = verified
    made: list[FakeEngine] = field(default_factory=list)

    def __call__(self, settings: EngineSettings) -> FakeEngine:
        engine = FakeEngine(self.answer, settings)
        self.made.append(engine)
        return engine

    @property
    def checked(self) -> list[CheckSpec]:
        """Every spec any engine made here was asked to check."""
        return [spec for engine in self.made for spec in engine.checked]


_CONFTEST = """
import sys

sys.path.insert(0, {tests!r})

import pytest
from fakes import FakeMaker, {answer}

from formula_check.faces import pytest_plugin
from formula_check.session import Engines


@pytest.hookimpl(trylast=True)
def pytest_configure(config):
    run = config.stash.get(pytest_plugin.RUN, None)
    if run is not None:
        run.engines = Engines(FakeMaker({answer}))
"""


def pytest_conftest(answer: str = "drift_on_axis_1") -> str:
    """A ``conftest.py`` for a pytester run: the run's engines are fakes answering with the
    function of this module named ``answer``."""
    return _CONFTEST.format(tests=str(Path(__file__).parent), answer=answer)


def build_with_fake_engine(
    project: Path, maker: FakeMaker, *, strict: bool = False, site_dir: Path | None = None
) -> Any:
    """``mkdocs build`` of ``project`` in this process, its checks answered by ``maker``
    (into ``site_dir`` when given, else the project's); returns the plugin."""
    from mkdocs.commands.build import build
    from mkdocs.config import load_config

    from formula_check.session import Engines

    where = {"site_dir": str(site_dir)} if site_dir is not None else {}
    config = load_config(config_file=str(project / "mkdocs.yml"), strict=strict, **where)
    plugin = config.plugins["formula-check"]
    plugin.engines = Engines(maker)
    plugin.on_startup(command="build", dirty=False)
    try:
        build(config)
    finally:
        plugin.on_shutdown()
        # MkDocs keeps a plugin with on_startup for the next build in this process (that is
        # how `mkdocs serve` keeps its engine): the next one must not inherit the fake.
        plugin.engines = Engines()
    return plugin
