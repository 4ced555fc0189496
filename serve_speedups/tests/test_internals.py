"""The private parts of MkDocs, watchdog and Jinja that the serve speed-ups use: each is there
as expected in the installed versions, and where one is not (an upgrade), its speed-up is off,
said in one INFO line per serve session, and MkDocs works as it does without the plugin."""

from __future__ import annotations

import importlib.metadata
import inspect
import logging
from collections.abc import Callable, Iterator
from pathlib import Path
from types import CodeType
from typing import Any

import jinja2
import jinja2.bccache
import pytest
from mkdocs import utils as mkdocs_utils
from mkdocs.livereload import LiveReloadServer
from mkdocs.structure.files import File, Files
from mkdocs.theme import Theme
from watchdog.observers import Observer
from watchdog.observers.polling import PollingObserver

import formula_check_serve as serving
from formula_check_serve import polling

LOGGER = "mkdocs.plugins.formula_check_serve"
NATIVE = getattr(Observer, "__name__", "")  # watchdog's file events here (InotifyObserver)


@pytest.fixture
def server(tmp_path: Path) -> Iterator[LiveReloadServer]:
    """MkDocs' own server, watching a folder and a file as it does; never started."""
    docs = tmp_path / "docs"
    docs.mkdir()
    (tmp_path / "mkdocs.yml").write_text("site_name: x\n", encoding="utf-8")
    made = LiveReloadServer(builder=lambda: None, host="127.0.0.1", port=0, root=str(tmp_path))
    made.watch(str(docs))
    made.watch(str(tmp_path / "mkdocs.yml"))
    yield made
    made.server_close()


@pytest.fixture
def notices(caplog: pytest.LogCaptureFixture) -> Callable[[], list[str]]:
    """The INFO lines the speed-ups log."""
    caplog.set_level(logging.INFO, logger=LOGGER)
    return lambda: [r.getMessage() for r in caplog.records if r.name == LOGGER and r.levelno == 20]


def timeouts(server: LiveReloadServer) -> set[float]:
    observer = server.observer
    return {observer._timeout, *(emitter._timeout for emitter in observer.emitters)}


# -- every private part is there, as the speed-ups expect it ------------------------------


def _theme_filter() -> CodeType | None:
    method = Files.add_files_from_theme
    found = [c for c in method.__code__.co_consts if isinstance(c, CodeType)]
    return next((code for code in found if code.co_name == "filter"), None)


def _filter_names() -> set[str]:
    code = _theme_filter()
    assert code is not None
    return {n for c in (code, *code.co_consts) if isinstance(c, CodeType) for n in c.co_names}


def _theme_takes_get_env() -> bool:
    if list(inspect.signature(Theme.get_env).parameters) != ["self"]:
        return False
    theme = Theme(name="mkdocs")
    theme.get_env = jinja2.Environment  # type: ignore[method-assign]
    return isinstance(theme.get_env(), jinja2.Environment)


def _emitters_read_timeout(server: LiveReloadServer) -> bool:
    emitters = list(server.observer.emitters)
    for emitter in emitters:
        emitter._timeout = 0.125
    return bool(emitters) and all(emitter.timeout == 0.125 for emitter in emitters)


def _bucket_fields() -> bool:
    bucket = jinja2.bccache.Bucket(jinja2.Environment(), "key", "checksum")
    return (bucket.key, bucket.checksum, bucket.code) == ("key", "checksum", None)


COMPILE_SETTINGS = (
    *("block_start_string", "block_end_string", "variable_start_string", "variable_end_string"),
    *("comment_start_string", "comment_end_string", "line_statement_prefix"),
    *("line_comment_prefix", "trim_blocks", "lstrip_blocks", "newline_sequence"),
    *("keep_trailing_newline", "optimized", "is_async", "extensions", "filters", "tests"),
    *("policies", "finalize", "autoescape"),
)

INTERNALS: dict[str, Callable[[LiveReloadServer], bool]] = {
    "mkdocs: LiveReloadServer._watched_paths, a dict of the watched paths": lambda s: (
        isinstance(s._watched_paths, dict) and len(s._watched_paths) == 2
    ),
    "mkdocs: LiveReloadServer.observer, watchdog's PollingObserver": lambda s: isinstance(
        s.observer, PollingObserver
    ),
    "mkdocs: Files.add_files_from_theme, a nested filter(name) over config": lambda s: (
        getattr(_theme_filter(), "co_freevars", None) == ("config",)
    ),
    "mkdocs: the theme file filter reads only static_templates and the Markdown extensions": (
        lambda s: _filter_names() <= serving.THEME_FILTER_NAMES
    ),
    "mkdocs: utils.markdown_extensions, a tuple of suffixes": lambda s: (
        isinstance(mkdocs_utils.markdown_extensions, tuple)
        and ".md" in mkdocs_utils.markdown_extensions
    ),
    "mkdocs: Theme.get_env(), which a Theme takes as its own attribute": (
        lambda s: _theme_takes_get_env()
    ),
    "watchdog: PollingObserver._timeout, MkDocs' interval of 0.5 s": lambda s: (
        s.observer._timeout == 0.5
    ),
    "watchdog: each emitter's _timeout, read as its timeout": _emitters_read_timeout,
    "jinja2: Environment.list_templates(extensions, filter_func)": lambda s: (
        list(inspect.signature(jinja2.Environment.list_templates).parameters)
        == ["self", "extensions", "filter_func"]
    ),
    "jinja2: FileSystemLoader.searchpath (a list) and .followlinks": lambda s: (
        jinja2.FileSystemLoader(["a"]).searchpath == ["a"]
        and jinja2.FileSystemLoader([]).followlinks is False
    ),
    "jinja2: the Environment settings that decide the compiled code": lambda s: all(
        hasattr(jinja2.Environment(), name) for name in COMPILE_SETTINGS
    ),
    "jinja2: bccache.Bucket(environment, key, checksum) with its code": (
        lambda s: _bucket_fields()
    ),
}


@pytest.mark.parametrize("internal", list(INTERNALS))
def test_each_private_part_the_speedups_use_is_there(
    internal: str, server: LiveReloadServer
) -> None:
    """Fails after an upgrade that removed or changed one: formula_check_serve must be looked at again
    (its speed-up is off meanwhile) and the versions it was written for moved on."""
    try:
        as_expected = INTERNALS[internal](server)
    except Exception as exc:  # what is gone raises: name the part, not the traceback
        pytest.fail(f"{internal}: gone or changed in this version ({type(exc).__name__}: {exc})")
    assert as_expected, f"{internal}: not as the speed-up expects it in this version"


@pytest.mark.parametrize("speedup", serving.SPEEDUPS, ids=lambda speedup: speedup.name)
def test_each_speedup_was_written_for_the_installed_versions(speedup: serving.SpeedUp) -> None:
    assert speedup.mismatch() is None, f"{speedup.name}: {speedup.mismatch()}"


def test_every_speedup_is_on_with_the_installed_packages(
    server: LiveReloadServer, notices: Callable[[], list[str]]
) -> None:
    assert polling.quicken_polling(server) is not None
    theme = Theme(name="mkdocs")
    serving.ThemeListing().attach(theme)
    assert "get_env" in vars(theme), "the theme lists through the kept list"
    cache = serving.TemplateCache()
    assert cache.attach(jinja2.Environment()).bytecode_cache is cache
    assert notices() == []


# -- a version it was not written for: MkDocs as it is, said once --------------------------


def installed_as(monkeypatch: pytest.MonkeyPatch, package: str, version: str | None) -> None:
    """Make ``package`` read as ``version`` (None: not installed) to the speed-ups."""
    real = importlib.metadata.version

    def version_of(name: str) -> str:
        if name != package:
            return real(name)
        if version is None:
            raise importlib.metadata.PackageNotFoundError(name)
        return version

    monkeypatch.setattr(importlib.metadata, "version", version_of)


def test_a_watchdog_it_was_not_written_for_keeps_mkdocs_polling(
    server: LiveReloadServer, monkeypatch: pytest.MonkeyPatch, notices: Callable[[], list[str]]
) -> None:
    installed_as(monkeypatch, "watchdog", "8.0.0")
    for _ in range(3):  # each rebuild that watches more asks again
        assert polling.quicken_polling(server) is None
    assert timeouts(server) == {polling.MKDOCS_INTERVAL}
    assert notices() == [
        "formula-check-serve: quicker polling is off: watchdog 8.0.0 is not one of the "
        "versions it was written for (>=2.0,<8); MkDocs' observer is left as it is (MkDocs "
        "polls every 0.5 s)"
    ]


def test_each_serve_session_says_it_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, notices: Callable[[], list[str]]
) -> None:
    installed_as(monkeypatch, "mkdocs", "2.0.0rc1")
    for _ in range(2):
        session = LiveReloadServer(builder=lambda: None, host="127.0.0.1", port=0, root=".")
        try:
            assert polling.quicken_polling(session) is None
            assert polling.quicken_polling(session) is None
        finally:
            session.server_close()
    assert notices() == 2 * [
        "formula-check-serve: quicker polling is off: mkdocs 2.0.0rc1 is not one of the "
        "versions it was written for (>=1.6,<2); MkDocs' observer is left as it is (MkDocs "
        "polls every 0.5 s)"
    ]


def test_a_jinja_it_was_not_written_for_compiles_templates_as_usual(
    monkeypatch: pytest.MonkeyPatch, notices: Callable[[], list[str]]
) -> None:
    installed_as(monkeypatch, "jinja2", "4.0.0")
    cache = serving.TemplateCache()
    for _ in range(3):  # a new environment each rebuild
        assert cache.attach(jinja2.Environment()).bytecode_cache is None
    theme = Theme(name="mkdocs")
    serving.ThemeListing().attach(theme)
    assert "get_env" not in vars(theme), "the theme lists as MkDocs does"
    assert [line.split(" is off: ")[0] for line in notices()] == [
        "formula-check-serve: the template cache",
        "formula-check-serve: the kept theme file list",
    ]
    assert all("jinja2 4.0.0 is not one of the versions" in line for line in notices())


def test_a_version_that_cannot_be_read_turns_it_off(
    server: LiveReloadServer, monkeypatch: pytest.MonkeyPatch, notices: Callable[[], list[str]]
) -> None:
    installed_as(monkeypatch, "watchdog", None)
    assert polling.quicken_polling(server) is None
    monkeypatch.setattr(importlib.metadata, "version", lambda name: "not a version")
    theme = Theme(name="mkdocs")
    serving.ThemeListing().attach(theme)
    assert "get_env" not in vars(theme)
    monkeypatch.setattr(importlib.metadata, "version", broken_metadata)
    cache = serving.TemplateCache()
    assert cache.attach(jinja2.Environment()).bytecode_cache is None, "no exception either"
    assert notices() == [
        "formula-check-serve: quicker polling is off: the installed version of watchdog "
        "is unknown; MkDocs' observer is left as it is (MkDocs polls every 0.5 s)",
        "formula-check-serve: the kept theme file list is off: mkdocs not a version is not "
        "one of the versions it was written for (>=1.6,<2); MkDocs lists the theme's files "
        "on every rebuild",
        "formula-check-serve: the template cache is off: looking at the private parts "
        "it uses failed (ValueError: unreadable METADATA); Jinja compiles the theme's "
        "templates on every rebuild",
    ]


def broken_metadata(name: str) -> str:
    raise ValueError("unreadable METADATA")


# -- a private part gone or changed: MkDocs as it is, said once ----------------------------


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        ("watched paths", "MkDocs' LiveReloadServer has no _watched_paths dict"),
        ("emitter", "a watchdog emitter has no _timeout number"),
        ("native", f"MkDocs' server observer is not watchdog's PollingObserver but {NATIVE}"),
    ],
)
def test_an_observer_without_its_interval_keeps_mkdocs_polling(
    server: LiveReloadServer,
    monkeypatch: pytest.MonkeyPatch,
    notices: Callable[[], list[str]],
    change: str,
    reason: str,
) -> None:
    if change == "watched paths":
        monkeypatch.delattr(server, "_watched_paths")
    elif change == "native":  # another plugin's on_serve put native file events in
        monkeypatch.setattr(server, "observer", Observer())
    else:
        assert polling.quicken_polling(server) is not None, "on at first"
        monkeypatch.delattr(next(iter(server.observer.emitters)), "_timeout")
    observer, interval = server.observer, getattr(server.observer, "_timeout", None)
    assert polling.quicken_polling(server) is None
    assert polling.quicken_polling(server) is None
    assert server.observer is observer and observer._timeout == interval, "left as it is"
    assert notices() == [
        f"formula-check-serve: quicker polling is off: {reason}; "
        "MkDocs' observer is left as it is (MkDocs polls every 0.5 s)"
    ]


def add_files_from_theme(self: Files, env: jinja2.Environment, config: Any) -> None:
    """MkDocs' method as a later version might have it: its filter reads another setting."""

    def filter(name: str) -> bool:
        return not name.endswith(".html") and name not in config.exclude_docs

    for path in env.list_templates(filter_func=filter):
        self.append(File(path, config.theme.dirs[0], config.site_dir, config.use_directory_urls))


def test_a_theme_filter_that_reads_more_lists_the_theme_as_mkdocs_does(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, notices: Callable[[], list[str]]
) -> None:
    monkeypatch.setattr(Files, "add_files_from_theme", add_files_from_theme)
    listing = serving.ThemeListing()
    for _ in range(2):  # a new theme each rebuild
        theme = Theme(name="mkdocs")
        listing.attach(theme)
        assert "get_env" not in vars(theme)
    assert notices() == [
        "formula-check-serve: the kept theme file list is off: MkDocs' theme file filter "
        "reads more than static_templates (endswith, exclude_docs); MkDocs lists the theme's "
        "files on every rebuild"
    ]


def test_a_list_templates_of_another_signature_is_left_alone(
    monkeypatch: pytest.MonkeyPatch, notices: Callable[[], list[str]]
) -> None:
    def list_templates(self: jinja2.Environment, names: Any = None) -> list[str]:
        return []

    monkeypatch.setattr(jinja2.Environment, "list_templates", list_templates)
    theme = Theme(name="mkdocs")
    serving.ThemeListing().attach(theme)
    assert "get_env" not in vars(theme)
    assert len(notices()) == 1
    assert "Jinja's Environment.list_templates takes no (extensions, filter_func)" in notices()[0]
