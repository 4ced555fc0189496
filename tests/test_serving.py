"""The plugin under ``mkdocs serve``: what it watches beyond the docs folder, the checks a
newer edit made stale, package folders kept watched, and its options."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml
from mkdocs.config import load_config
from mkdocs.config.defaults import MkDocsConfig
from mkdocs.exceptions import PluginError
from mkdocs.livereload import LiveReloadServer

from fakes import FakeMaker
from formula_check.faces.mkdocs_plugin import FormulaCheckPlugin, snippet_files
from formula_check.faces.mkdocs_plugin.watching import Edits, FolderKeeper
from formula_check.pages.blocks import Settings, source_blocks
from formula_check.session import Engines
from formula_check.session.options import EngineSettings

MakeServer = Callable[[Path], tuple[LiveReloadServer, Path, Path]]


@pytest.fixture
def servers() -> Iterator[list[LiveReloadServer]]:
    """Servers made by a test, their sockets closed after it (they are never started)."""
    made: list[LiveReloadServer] = []
    yield made
    for server in made:
        server.server_close()


@pytest.fixture
def make_server(
    servers: list[LiveReloadServer],
) -> Callable[[Path], tuple[LiveReloadServer, Path, Path]]:
    def make(folder: Path) -> tuple[LiveReloadServer, Path, Path]:
        docs = folder / "docs"
        docs.mkdir(parents=True)
        (docs / "index.md").write_text("# Home\n", encoding="utf-8")
        config = folder / "mkdocs.yml"
        config.write_text("site_name: x\n", encoding="utf-8")
        server = LiveReloadServer(
            builder=lambda: None, host="127.0.0.1", port=0, root=str(folder / "site")
        )
        servers.append(server)
        server.watch(str(docs))
        server.watch(str(config))
        server.watch(str(docs))  # watched twice (MkDocs counts references)
        return server, docs, config

    return make


def mkdocs_config(tmp_path: Path, **settings: object) -> MkDocsConfig:
    (tmp_path / "docs").mkdir(exist_ok=True)
    (tmp_path / "docs" / "index.md").write_text("# Home\n", encoding="utf-8")
    config = tmp_path / "mkdocs.yml"
    config.write_text(yaml.safe_dump({"site_name": "T", **settings}), encoding="utf-8")
    return load_config(str(config))


def plugin_with(**options: object) -> FormulaCheckPlugin:
    plugin = FormulaCheckPlugin()
    errors, _ = plugin.load_config(dict(options))
    assert not errors
    return plugin


def test_files_a_page_starts_using_during_serve_are_watched_from_that_rebuild(
    tmp_path: Path, make_server: MakeServer
) -> None:
    server, _, _ = make_server(tmp_path)
    snippets = tmp_path / "snippets"
    snippets.mkdir()
    first, second = snippets / "first.py", snippets / "second.py"
    first.write_text("x = 1\n", encoding="utf-8")
    second.write_text("y = 2\n", encoding="utf-8")
    plugin = plugin_with()
    plugin.on_startup(command="serve", dirty=False)
    plugin.watcher.add({first, snippets / "later" / "not-yet.py"})
    plugin.on_serve(server, config=MkDocsConfig(), builder=None)
    assert str(first) in server._watched_paths
    assert str(snippets / "later" / "not-yet.py") not in server._watched_paths
    # a file named before it exists: its nearest folder is watched, without subfolders
    assert not server._watch_refs[str(snippets)].is_recursive
    plugin.watcher.add({second})  # a later rebuild finds a page using a new file
    plugin.on_post_build(config=None)  # type: ignore[arg-type]
    assert server._watched_paths[str(second)] == 1
    assert server._watched_paths[str(first)] == 1, "each file is watched once"


def test_project_files_a_snippet_imported_are_watched_however_deep(
    tmp_path: Path, make_server: MakeServer
) -> None:
    """A helper module imported by the module a block names (not by the page itself): an
    edit to it must rebuild, as it changes the verdict."""
    server, _, _ = make_server(tmp_path)
    helper = tmp_path / "utils" / "scale.py"
    helper.parent.mkdir()
    helper.write_text("def inv_sqrt(x):\n    return x ** -0.5\n", encoding="utf-8")
    plugin = plugin_with(report=False)
    plugin.on_startup(command="serve", dirty=False)
    result = SimpleNamespace(imports=("utils/scale.py",))
    plugin.session = SimpleNamespace(  # type: ignore[assignment]
        wait_all=lambda: None,
        results=lambda blocks=None: [result],
        unfilled_pages=list,
    )
    plugin.root = tmp_path
    plugin.on_serve(server, config=MkDocsConfig(), builder=None)
    config = MkDocsConfig()
    config["site_dir"] = str(tmp_path / "site")
    plugin.on_post_build(config=config)
    assert server._watched_paths[str(helper)] == 1


def test_project_modules_a_snippet_imports_are_watched_before_it_ever_finishes(
    tmp_path: Path,
) -> None:
    """A snippet that timed out reports no imports; the fix is often in the module it
    imported, and saving it must rebuild. Its import statements name them: the project's
    packages and modules are watched, installed ones and names that are no file are not."""
    for folder in ("mymodel", "helpers", "extra"):
        (tmp_path / folder).mkdir()
    (tmp_path / "mymodel" / "slow.py").write_text("def wait(): pass\n", encoding="utf-8")
    (tmp_path / "helpers" / "__init__.py").write_text("", encoding="utf-8")
    (tmp_path / "scaling.py").write_text("def scale(x): return x\n", encoding="utf-8")
    (tmp_path / "snippets").mkdir()
    (tmp_path / "snippets" / "ffn.py").write_text(
        "import numpy as np\nfrom helpers import thing\n\ndef ffn(x):\n    return x\n",
        encoding="utf-8",
    )
    page = (
        '```formula id="a" oracle="softmax"\nx\n```\n\n'
        "```python\nimport tensorflow as tf\nfrom mymodel.slow import wait\n\n"
        "def softmax(x):\n    import scaling\n    from . import nothing\n"
        "    return tf.nn.softmax(x)\n```\n\n"
        '```formula id="b" oracle="ffn" code="snippets/ffn.py:ffn"\nx\n```\n\n'
        '```formula id="c" oracle="softmax"\nx\n```\n\n'
        "```python\nimport extra.thing, os.path as p  # a comment\ndef softmax(x) return x\n```\n"
    )
    blocks = source_blocks(page, page="docs/index.md", settings=Settings(tmp_path))
    assert [block.block_id for block in blocks if block.spec is not None] == ["a", "b", "c"]
    watched = snippet_files(blocks, tmp_path)
    assert watched == {
        tmp_path / "mymodel",
        tmp_path / "scaling.py",
        tmp_path / "snippets" / "ffn.py",
        tmp_path / "helpers",
        tmp_path / "extra",
    }, "block c's snippet does not parse, yet its import line still says what to watch"


def test_turning_the_plugin_off_during_serve_stops_checking(tmp_path: Path) -> None:
    plugin = plugin_with(enabled=False)
    plugin.on_startup(command="serve", dirty=False)
    plugin.session = object()  # type: ignore[assignment]
    plugin.blocks = [object()]  # type: ignore[list-item]  # what the last build left
    maker = FakeMaker()
    plugin.engines = Engines(maker)
    plugin.engines.get(EngineSettings(tmp_path))  # the engine of the builds before
    config = mkdocs_config(tmp_path)
    plugin.on_config(config)
    assert plugin.session is None and plugin.blocks == []
    assert [engine.closed for engine in maker.made] == [True], "its workers do not stay"
    assert config.mdx_configs["formula_check"] == {"check": False}  # math only, no cards


def test_workers_are_started_in_the_background_once_per_engine(tmp_path: Path) -> None:
    """After each serve build with blocks; a start that failed (no TensorFlow) is not tried
    again on every rebuild, but a new engine (changed options) gets its own."""
    started: list[object] = []
    engines = [SimpleNamespace(start_in_background=lambda: started.append("first"))]
    plugin = plugin_with(report=False)
    plugin.on_startup(command="serve", dirty=False)
    plugin.session = SimpleNamespace(  # type: ignore[assignment]
        wait_all=lambda: None,
        results=lambda blocks=None: [],
        unfilled_pages=list,
        get_engine=lambda: engines[-1],
    )
    plugin.blocks = [SimpleNamespace(spec=object())]  # type: ignore[list-item]
    config = MkDocsConfig()
    config["site_dir"] = str(tmp_path / "site")
    plugin.on_post_build(config=config)
    plugin.on_post_build(config=config)
    assert started == ["first"]
    engines.append(SimpleNamespace(start_in_background=lambda: started.append("second")))
    plugin.on_post_build(config=config)
    assert started == ["first", "second"]
    plugin.on_startup(command="build", dirty=False)
    plugin.started = None
    plugin.on_post_build(config=config)
    assert started == ["first", "second"], "mkdocs build starts nothing ahead"


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (
            {"workers": -1},
            "formula-check: option 'workers' has a bad value -1 (0 for one per core, or a "
            "number of workers)",
        ),
        ({"timeout": 0}, "option 'timeout' has a bad value 0"),
        ({"memory_limit_mb": -5}, "option 'memory_limit_mb' has a bad value -5"),
        ({"keep_alive": float("inf")}, "option 'keep_alive' has a bad value inf"),
    ],
)
def test_a_number_out_of_range_is_a_plugin_error_naming_the_option(
    tmp_path: Path, options: dict[str, object], message: str
) -> None:
    with pytest.raises(PluginError) as caught:
        plugin_with(**options).on_config(mkdocs_config(tmp_path))
    assert str(caught.value).startswith("formula-check: ") and message in str(caught.value)


class RecordingServer:
    """What FolderKeeper uses of MkDocs' server: its public watch and unwatch."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, str]] = []

    def watch(self, path: str) -> None:
        self.calls.append(("watch", path))

    def unwatch(self, path: str) -> None:
        self.calls.append(("unwatch", path))


def test_a_package_folder_removed_and_put_back_is_watched_again(tmp_path: Path) -> None:
    """A branch switch moves a package away and back: its watch ended with the folder, so
    the keeper watches it afresh, and the next edit in it rebuilds."""
    package = tmp_path / "team_model"
    package.mkdir()
    server = RecordingServer()
    keeper = FolderKeeper(server, interval=3600)  # type: ignore[arg-type]
    try:
        keeper.add(str(package))
        assert not keeper.look() and server.calls == []
        package.rename(tmp_path / "elsewhere")
        assert keeper.look() and server.calls == [("unwatch", str(package))]
        assert not keeper.look(), "still gone: nothing more to do"
        (tmp_path / "elsewhere").rename(package)
        assert keeper.look() and server.calls[-2:] == [
            ("unwatch", str(package)),
            ("watch", str(package)),
        ]
    finally:
        keeper.close()


def test_a_file_the_build_read_saved_again_makes_its_checks_stale(tmp_path: Path) -> None:
    """Read from the files alone: a page saved again (the same length), a snippet file
    removed; a file the build did not read changes nothing."""
    page, snippet, other = (tmp_path / name for name in ("page.md", "ffn.py", "other.md"))
    for path in (page, snippet, other):
        path.write_text("one\n", encoding="utf-8")
    edits = Edits()
    edits.begin([page, snippet])
    other.write_text("two\n", encoding="utf-8")
    assert not edits.since()
    time.sleep(0.01)  # past the file system's clock tick
    page.write_text("two\n", encoding="utf-8")
    assert edits.since()
    edits.begin([page, snippet])
    assert not edits.since()
    snippet.unlink()
    assert edits.since()


def test_only_a_served_build_is_ever_superseded(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text("one\n", encoding="utf-8")
    plugin = plugin_with()
    plugin.edits.begin([page])
    page.write_text("a longer page\n", encoding="utf-8")
    assert not plugin._superseded(), "mkdocs build: no server, every check runs to its end"
    plugin.watcher.server = object()  # type: ignore[assignment]
    assert plugin._superseded()


def test_an_old_config_setting_fast_serve_still_loads_with_a_note() -> None:
    plugin = FormulaCheckPlugin()
    errors, warnings = plugin.load_config({"fast_serve": False})
    assert errors == []
    assert [key for key, _ in warnings] == ["fast_serve"]
    assert "formula-check-serve" in warnings[0][1]
