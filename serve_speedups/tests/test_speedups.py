"""The serve speed-ups: quicker polling, kept templates, the kept theme file list, and the
plugin that turns them on under ``mkdocs serve`` only."""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import jinja2
import pytest
import yaml
from mkdocs.commands.build import build
from mkdocs.config import load_config
from mkdocs.config.defaults import MkDocsConfig
from mkdocs.livereload import LiveReloadServer
from mkdocs.structure.files import Files
from watchdog.events import FileSystemEventHandler
from watchdog.observers import Observer

import formula_check_serve as serving
from formula_check_serve import polling
from formula_check_serve.plugin import ServeSpeedupsPlugin

MakeServer = Callable[[Path], tuple[LiveReloadServer, Path, Path]]

# -- polling ------------------------------------------------------------------------------


def test_the_interval_follows_the_cost_of_one_look_within_bounds() -> None:
    assert polling.polling_interval(0.0) == polling.FASTEST_INTERVAL
    assert polling.polling_interval(0.004) == pytest.approx(0.08)
    assert polling.polling_interval(0.1) == polling.MKDOCS_INTERVAL
    assert polling.polling_interval(30.0) == polling.MKDOCS_INTERVAL


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


def wait_for_rebuild_request(server: LiveReloadServer, seconds: float = 10.0) -> bool:
    """Did the server ask for a rebuild within ``seconds``? Takes the request, so the next
    call waits for a new one; with no time to wait, it looks once (to drain a request)."""
    deadline = time.monotonic() + seconds
    while True:
        with server._rebuild_cond:
            if server._want_rebuild:
                server._want_rebuild = False
                return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.01)


def timeouts(server: LiveReloadServer) -> set[float]:
    """The polling intervals of the observer and of each of its emitters."""
    observer = server.observer
    return {observer._timeout, *(emitter._timeout for emitter in observer.emitters)}


@pytest.fixture
def quick_looks(monkeypatch: pytest.MonkeyPatch) -> None:
    """One look at the watched folders costs 1 ms: a look timed on a busy machine could
    take long enough to keep MkDocs' own interval, which is not what these tests are about."""
    monkeypatch.setattr(serving.polling, "snapshot_seconds", lambda paths: 0.001)


@pytest.mark.usefixtures("quick_looks")
def test_the_quicker_observer_keeps_every_watch_and_sees_each_kind_of_change(
    tmp_path: Path, make_server: MakeServer
) -> None:
    server, docs, config = make_server(tmp_path)
    observer = server.observer
    assert timeouts(server) == {polling.MKDOCS_INTERVAL}
    interval = polling.quicken_polling(server)
    assert interval is not None and interval < polling.MKDOCS_INTERVAL
    assert server.observer is observer and timeouts(server) == {interval}
    # a file is polled through its folder (without subfolders), as MkDocs' observer does
    watches = {(e.watch.path, e.watch.is_recursive) for e in server.observer.emitters}
    assert watches == {(str(docs), True), (str(tmp_path), False)}
    server.observer.start()
    try:
        assert not wait_for_rebuild_request(server, seconds=0.5), "nothing changed yet"
        (docs / "index.md").write_text("# Home, edited\n", encoding="utf-8")
        assert wait_for_rebuild_request(server), "an edited page"
        (docs / "sub").mkdir()
        (docs / "sub" / "new.md").write_text("# New\n", encoding="utf-8")
        assert wait_for_rebuild_request(server), "a page in a new folder"
        config.write_text("site_name: y\n", encoding="utf-8")
        assert wait_for_rebuild_request(server), "the config file"
        (docs / "sub" / "new.md").unlink()
        assert wait_for_rebuild_request(server), "a deleted page"
        server.unwatch(str(docs))
        server.unwatch(str(docs))
        time.sleep(0.3)
        wait_for_rebuild_request(server, seconds=0.0)
        (docs / "index.md").write_text("# Unwatched\n", encoding="utf-8")
        assert not wait_for_rebuild_request(server, seconds=1.0), "no longer watched"
    finally:
        server.observer.stop()
        server.observer.join()


def test_watches_made_by_others_keep_their_handlers_and_settings(
    tmp_path: Path, make_server: MakeServer
) -> None:
    """Another plugin's ``on_serve`` may watch without recursion, or schedule a handler of
    its own on MkDocs' observer: both survive, and run at the new interval."""
    server, _, _ = make_server(tmp_path)
    shallow = tmp_path / "shallow"
    (shallow / "deep").mkdir(parents=True)
    server.watch(str(shallow), recursive=False)
    own = tmp_path / "own"
    own.mkdir()
    seen: list[str] = []
    handler = FileSystemEventHandler()
    handler.on_any_event = lambda event: seen.append(str(event.src_path))  # type: ignore[method-assign]
    server.observer.schedule(handler, str(own), recursive=True)
    interval = polling.quicken_polling(server)
    assert interval is not None and timeouts(server) == {interval}
    assert (str(shallow), False) in {
        (e.watch.path, e.watch.is_recursive) for e in server.observer.emitters
    }
    server.observer.start()
    try:
        (own / "file.txt").write_text("x", encoding="utf-8")
        deadline = time.monotonic() + 10
        while str(own / "file.txt") not in seen and time.monotonic() < deadline:
            time.sleep(0.01)
        assert str(own / "file.txt") in seen, "the other plugin's handler still hears its folder"
        wait_for_rebuild_request(server, seconds=0.5)
        (shallow / "deep" / "inner.md").write_text("x", encoding="utf-8")
        assert not wait_for_rebuild_request(server, seconds=1.0), "still not recursive"
        (shallow / "top.md").write_text("x", encoding="utf-8")
        assert wait_for_rebuild_request(server), "its own level is watched"
    finally:
        server.observer.stop()
        server.observer.join()


def test_the_interval_is_sized_for_paths_watched_later(
    tmp_path: Path, make_server: MakeServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    server, _, _ = make_server(tmp_path)
    measured: list[list[str]] = []

    def cost(paths: list[str]) -> float:
        measured.append(paths)
        return 0.02 * len(paths)  # a costly look per path

    monkeypatch.setattr(serving.polling, "snapshot_seconds", cost)
    later = str(tmp_path / "src")
    assert polling.quicken_polling(server, [later]) == polling.MKDOCS_INTERVAL
    assert later in measured[-1], "watch: entries MkDocs adds after on_serve count"
    assert timeouts(server) == {polling.MKDOCS_INTERVAL}, "a costly look keeps MkDocs' pace"


def test_servers_it_does_not_know_are_left_alone(tmp_path: Path, make_server: MakeServer) -> None:
    server, _, _ = make_server(tmp_path)
    native = Observer()
    server.observer = native  # type: ignore[assignment]
    assert polling.quicken_polling(server) is None and server.observer is native
    assert polling.quicken_polling(object()) is None


def test_a_running_observer_is_sized_anew(tmp_path: Path, make_server: MakeServer) -> None:
    server, docs, _ = make_server(tmp_path)
    server.observer.start()
    try:
        interval = polling.quicken_polling(server)
        assert interval is not None and timeouts(server) == {interval}
        wait_for_rebuild_request(server, seconds=0.3)
        (docs / "index.md").write_text("# Edited while running\n", encoding="utf-8")
        assert wait_for_rebuild_request(server)
    finally:
        server.observer.stop()
        server.observer.join()


# -- compiled templates -------------------------------------------------------------------


def environment(
    templates: dict[str, str], cache: serving.TemplateCache, **options: Any
) -> jinja2.Environment:
    env = jinja2.Environment(loader=jinja2.DictLoader(templates), **options)
    return cache.attach(env)


def test_a_new_environment_reuses_the_compiled_template() -> None:
    cache = serving.TemplateCache()
    templates = {"page.html": "{% block body %}Hello {{ name }}{% endblock %}"}
    first = environment(templates, cache).get_template("page.html").render(name="A")
    second = environment(templates, cache).get_template("page.html").render(name="B")
    assert (first, second) == ("Hello A", "Hello B")
    assert (cache.compiled, cache.hits) == (1, 1)


def test_an_edited_template_is_compiled_again() -> None:
    cache = serving.TemplateCache()
    environment({"page.html": "old {{ x }}"}, cache).get_template("page.html").render(x=1)
    edited = environment({"page.html": "new {{ x }}"}, cache)
    assert edited.get_template("page.html").render(x=2) == "new 2"
    assert (cache.compiled, cache.hits) == (2, 0)


def test_other_syntax_settings_never_share_code() -> None:
    cache = serving.TemplateCache()
    source = {"page.html": "[[ x ]] {{ x }}"}
    plain = environment(source, cache).get_template("page.html").render(x=1)
    brackets = environment(source, cache, variable_start_string="[[", variable_end_string="]]")
    assert plain == "[[ x ]] 1"
    assert brackets.get_template("page.html").render(x=1) == "1 {{ x }}"
    trimmed = environment({"t.html": "{% if 1 %}\nA\n{% endif %}\n"}, cache, trim_blocks=True)
    untrimmed = environment({"t.html": "{% if 1 %}\nA\n{% endif %}\n"}, cache)
    assert trimmed.get_template("t.html").render() == "A\n"
    assert untrimmed.get_template("t.html").render() == "\nA\n"
    assert cache.hits == 0


def test_the_same_filters_share_code_and_new_ones_are_compiled_with() -> None:
    cache = serving.TemplateCache()
    source = {"page.html": "{{ word | tone }}"}
    first = environment(source, cache)
    first.filters["tone"] = str.upper
    again = environment(source, cache)
    again.filters["tone"] = str.upper
    assert first.get_template("page.html").render(word="Mixed") == "MIXED"
    assert again.get_template("page.html").render(word="Mixed") == "MIXED"
    assert (cache.compiled, cache.hits) == (1, 1)
    redefined = environment(source, cache)
    redefined.filters["tone"] = str.lower  # a hook redefined the filter on this rebuild
    assert redefined.get_template("page.html").render(word="Mixed") == "mixed"
    assert (cache.compiled, cache.hits, len(cache)) == (2, 1, 1)


def test_a_filter_that_now_takes_the_context_is_compiled_again() -> None:
    """How a filter is called is fixed in the compiled code."""
    cache = serving.TemplateCache()
    source = {"page.html": "{{ title | badge }}"}
    plain = environment(source, cache)
    plain.filters["badge"] = lambda value: f"[{value}]"
    assert plain.get_template("page.html").render(title="Home") == "[Home]"
    with_context = environment(source, cache)
    with_context.filters["badge"] = jinja2.pass_context(
        lambda context, value: f"[{value} @ {context['site']}]"
    )
    assert with_context.get_template("page.html").render(title="Home", site="S") == "[Home @ S]"


def test_a_filter_of_a_constant_is_not_served_from_an_old_compile() -> None:
    """Jinja runs a filter of a literal while compiling and stores its result."""
    cache = serving.TemplateCache()
    source = {"page.html": '{{ "release" | stamp }}'}
    for label in ("ONE", "TWO", "THREE"):
        env = environment(source, cache)
        env.filters["stamp"] = lambda value, label=label: f"{value}: {label}"
        assert env.get_template("page.html").render() == f"release: {label}"


def test_a_new_finalize_each_rebuild_does_not_grow_the_cache() -> None:
    cache = serving.TemplateCache()
    for n in range(5):
        env = environment({"page.html": "{{ x }}"}, cache, finalize=lambda v, n=n: f"{v}/{n}")
        assert env.get_template("page.html").render(x=1) == f"1/{n}"
    assert len(cache) == 1


def test_an_environment_with_its_own_cache_keeps_it() -> None:
    own = jinja2.FileSystemBytecodeCache()
    env = jinja2.Environment(bytecode_cache=own)
    assert serving.TemplateCache().attach(env).bytecode_cache is own


# -- the theme's file list ----------------------------------------------------------------


@pytest.fixture
def settled(monkeypatch: pytest.MonkeyPatch) -> None:
    """Folders changed a moment ago count as settled (a theme is installed long before it is
    served; a test's folders are made just now, and their change time cannot be set back)."""
    monkeypatch.setattr(serving.theme, "UNSETTLED_SECONDS", 0.0)


def tick(tmp_path: Path, *folders: Path) -> None:
    """Wait until the file system's clock has moved past the last change to ``folders`` and
    to the folders below them: on kernels that stamp times once per timer tick (up to 10 ms),
    a change made right after the tree was made could otherwise keep the same times."""
    newest = max(
        (
            path.stat().st_ctime_ns
            for folder in folders
            if folder.exists()
            for path in [folder, *(p for p in folder.rglob("*") if p.is_dir())]
        ),
        default=0,
    )
    probe = tmp_path / "clock-probe"
    while True:
        probe.write_text("-", encoding="utf-8")
        if probe.stat().st_ctime_ns > newest:
            return
        time.sleep(0.001)


def theme_tree(tmp_path: Path) -> list[Path]:
    main, custom = tmp_path / "theme", tmp_path / "overrides"
    for relative in ("main.html", "assets/app.js", "assets/icons/a.svg", ".icons/x/y.svg"):
        (main / relative).parent.mkdir(parents=True, exist_ok=True)
        (main / relative).write_text("-", encoding="utf-8")
    return [custom, main]  # the custom folder does not exist yet


def listing_of(searchpath: list[Path], listing: serving.ThemeListing) -> list[str]:
    theme = SimpleNamespace(
        get_env=lambda: jinja2.Environment(loader=jinja2.FileSystemLoader(searchpath))
    )
    listing.attach(theme)
    names = theme.get_env().list_templates()
    assert names == jinja2.FileSystemLoader(searchpath).list_templates(), "as Jinja lists"
    return names


@pytest.mark.usefixtures("settled")
def test_the_theme_is_listed_once_while_its_folders_stay_as_they_were(tmp_path: Path) -> None:
    searchpath = theme_tree(tmp_path)
    listing = serving.ThemeListing()
    first = listing_of(searchpath, listing)
    assert first == [".icons/x/y.svg", "assets/app.js", "assets/icons/a.svg", "main.html"]
    assert listing_of(searchpath, listing) == first
    assert (listing.walks, listing.hits) == (1, 1)


@pytest.mark.usefixtures("settled")
@pytest.mark.parametrize("change", ["add", "remove", "rename", "new folder", "custom dir"])
def test_a_change_to_the_theme_folders_is_listed(tmp_path: Path, change: str) -> None:
    searchpath = theme_tree(tmp_path)
    custom, main = searchpath
    listing = serving.ThemeListing()
    before = listing_of(searchpath, listing)
    tick(tmp_path, *searchpath)
    if change == "add":
        (main / "assets" / "icons" / "b.svg").write_text("-", encoding="utf-8")
    elif change == "remove":
        (main / "assets" / "icons" / "a.svg").unlink()
    elif change == "rename":
        (main / "assets" / "app.js").rename(main / "assets" / "bundle.js")
    elif change == "new folder":
        (main / "assets" / "fonts").mkdir()
        (main / "assets" / "fonts" / "f.woff2").write_text("-", encoding="utf-8")
    else:
        (custom / "partials").mkdir(parents=True)
        (custom / "partials" / "footer.html").write_text("-", encoding="utf-8")
    after = listing_of(searchpath, listing)  # compared with Jinja's own listing inside
    assert after != before and listing.walks == 2


def test_folders_changed_just_before_the_listing_are_listed_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Within a modification time's resolution a later change could keep the same time."""
    monkeypatch.setattr(serving.theme, "UNSETTLED_SECONDS", 60.0)  # however slow this machine is
    searchpath = theme_tree(tmp_path)
    (searchpath[1] / "assets" / "late.css").write_text("-", encoding="utf-8")
    listing = serving.ThemeListing()
    listing_of(searchpath, listing)
    listing_of(searchpath, listing)
    assert listing.walks == 2
    monkeypatch.setattr(serving.theme, "UNSETTLED_SECONDS", 0.0)  # some time later
    listing_of(searchpath, listing)
    listing_of(searchpath, listing)
    assert (listing.walks, listing.hits) == (3, 1)


@pytest.mark.usefixtures("settled")
def test_a_folder_whose_modification_time_was_set_back_is_listed_again(tmp_path: Path) -> None:
    """``rsync -a`` or ``tar x`` restore a folder's modification time after changing it;
    its change time still moves."""
    searchpath = theme_tree(tmp_path)
    assets = searchpath[1] / "assets"
    listing = serving.ThemeListing()
    before = listing_of(searchpath, listing)
    tick(tmp_path, *searchpath)
    times = assets.stat()
    (assets / "app.js").rename(assets / "bundle.js")
    os.utime(assets, ns=(times.st_atime_ns, times.st_mtime_ns))
    assert assets.stat().st_mtime_ns == times.st_mtime_ns
    assert listing_of(searchpath, listing) != before  # compared with Jinja's inside


def mkdocs_config(tmp_path: Path, **settings: object) -> MkDocsConfig:
    (tmp_path / "docs").mkdir(exist_ok=True)
    (tmp_path / "docs" / "index.md").write_text("# Home\n", encoding="utf-8")
    config = tmp_path / "mkdocs.yml"
    config.write_text(yaml.safe_dump({"site_name": "T", **settings}), encoding="utf-8")
    return load_config(str(config))


def theme_files(config: MkDocsConfig, listing: serving.ThemeListing | None) -> list[str]:
    if listing is not None:
        listing.attach(config.theme)
    files = Files([])
    files.add_files_from_theme(config.theme.get_env(), config)
    return [file.src_uri for file in files]


@pytest.mark.usefixtures("settled")
def test_mkdocs_gets_the_same_theme_files_from_the_kept_list(tmp_path: Path) -> None:
    """Material's own theme, with MkDocs' filter of what is copied; ``static_templates``
    decides what the filter keeps, so the kept filtered list is per value."""
    listing = serving.ThemeListing()
    plain = theme_files(mkdocs_config(tmp_path, theme="material"), None)
    assert len(plain) > 10 and all(not name.startswith(".icons") for name in plain)
    for _ in range(2):
        assert theme_files(mkdocs_config(tmp_path, theme="material"), listing) == plain
    assert (listing.walks, listing.hits) == (1, 1)
    dropped = plain[0]
    kept_out = {"name": "material", "static_templates": [dropped]}
    without = theme_files(mkdocs_config(tmp_path, theme=kept_out), listing)
    assert without == theme_files(mkdocs_config(tmp_path, theme=kept_out), None)
    assert dropped not in without and dropped in plain and listing.walks == 1


def test_other_filters_and_loaders_are_left_to_jinja(tmp_path: Path) -> None:
    searchpath = theme_tree(tmp_path)
    listing = serving.ThemeListing()
    asked: list[str] = []

    def only_svg(name: str) -> bool:
        asked.append(name)
        return name.endswith(".svg")

    theme = SimpleNamespace(
        get_env=lambda: jinja2.Environment(loader=jinja2.FileSystemLoader(searchpath))
    )
    listing.attach(theme)
    for _ in range(2):
        assert theme.get_env().list_templates(filter_func=only_svg) == [
            ".icons/x/y.svg",
            "assets/icons/a.svg",
        ]
        assert theme.get_env().list_templates(extensions=["js"]) == ["assets/app.js"]
    assert len(asked) == 8 and listing.walks == 0
    followed = SimpleNamespace(
        get_env=lambda: jinja2.Environment(
            loader=jinja2.FileSystemLoader(searchpath, followlinks=True)
        )
    )
    listing.attach(followed)
    followed.get_env().list_templates()
    assert listing.walks == 0


def plugin_for(command: str) -> ServeSpeedupsPlugin:
    plugin = ServeSpeedupsPlugin()
    errors, _ = plugin.load_config({})
    assert not errors
    plugin.on_startup(command=command, dirty=False)
    return plugin


@pytest.mark.parametrize(("command", "on"), [("serve", True), ("build", False)])
def test_the_plugin_changes_nothing_outside_serve(tmp_path: Path, command: str, on: bool) -> None:
    plugin = plugin_for(command)
    env = plugin.on_env(jinja2.Environment(), config=None, files=None)  # type: ignore[arg-type]
    assert (env.bytecode_cache is plugin.templates) is on
    config = mkdocs_config(tmp_path)
    plugin.on_config(config)
    files = Files([])
    for _ in range(2):
        files.add_files_from_theme(config.theme.get_env(), config)
    assert (plugin.theme_listing.walks, plugin.theme_listing.hits) == ((1, 1) if on else (0, 0))


@pytest.mark.usefixtures("quick_looks")
def test_the_plugin_polls_sooner_and_sizes_anew_what_others_watch_later(
    tmp_path: Path, make_server: MakeServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    server, _, _ = make_server(tmp_path)
    build_delay = server.build_delay
    plugin = plugin_for("serve")
    plugin.on_serve(server, config=MkDocsConfig(), builder=None)
    assert max(timeouts(server)) < polling.MKDOCS_INTERVAL
    assert server.build_delay == build_delay == 0.1, "MkDocs' wait for more changes is kept"
    sized: list[object] = []
    monkeypatch.setattr(polling, "quicken_polling", lambda *args: sized.append(args))
    plugin.on_post_build(config=MkDocsConfig())
    assert sized == [], "nothing new watched: not sized again"
    server.watch(str(tmp_path / "docs" / "index.md"))  # another plugin's rebuild watched more
    plugin.on_post_build(config=MkDocsConfig())
    assert len(sized) == 1


def test_a_rebuild_from_cached_templates_writes_the_same_site(tmp_path: Path) -> None:
    """Builds in one process as ``mkdocs serve`` makes them: the first compiles every template
    and lists the theme afresh, the second reuses both; they write the same files, byte for
    byte."""
    project = tmp_path / "project"
    (project / "docs").mkdir(parents=True)
    (project / "docs" / "index.md").write_text("# Home\n\nText $x$.\n", encoding="utf-8")
    settings = {"site_name": "T", "theme": {"name": "material"}, "plugins": ["formula-check-serve"]}
    (project / "mkdocs.yml").write_text(yaml.safe_dump(settings), encoding="utf-8")
    sites = [tmp_path / "fresh", tmp_path / "reused"]
    config = load_config(str(project / "mkdocs.yml"), site_dir=str(sites[0]))
    config.plugins.on_startup(command="serve", dirty=False)
    plugin = config.plugins["formula-check-serve"]
    assert isinstance(plugin, ServeSpeedupsPlugin)
    hits = []
    for index, site in enumerate(sites):
        build(
            config if index == 0 else load_config(str(project / "mkdocs.yml"), site_dir=str(site))
        )
        hits.append((plugin.templates.hits, plugin.theme_listing.hits))
    assert hits[0] == (0, 0) and min(hits[1]) > 0, hits
    written = sorted(path.relative_to(sites[0]) for path in sites[0].rglob("*") if path.is_file())
    assert any(path.suffix == ".html" for path in written)
    assert written == sorted(p.relative_to(sites[1]) for p in sites[1].rglob("*") if p.is_file())
    for path in written:
        assert (sites[0] / path).read_bytes() == (sites[1] / path).read_bytes(), path
