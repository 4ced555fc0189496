"""A quicker ``mkdocs serve``: changes seen sooner, theme templates compiled once.

Of the time between saving a page and seeing it rebuilt, most is MkDocs' own, not the check's.
Two parts of it are waste under ``mkdocs serve``, and the plugin's ``fast_serve`` option
(default on) removes both:

* **Polling.** MkDocs looks for changed files every 0.5 s, so an edit waits 0.25 s on average
  before anything starts. :func:`quicken_polling` shortens the interval of MkDocs' own polling
  observer, sized from how long one look at the watched folders takes, so that polling never
  costs more than about 5 % of a core. Polling still; not native file events, which miss
  changes on some mounts (Docker volumes from another OS, network shares), where MkDocs'
  polling works.
  MkDocs' wait of 0.1 s for more changes before it rebuilds is kept: with quicker polling it
  spans two looks, so a save that an editor spreads over both still gives one rebuild.
* **Template compilation.** Every rebuild makes a new Jinja environment and compiles the
  theme's templates again: about 0.3 s of a 0.8 s rebuild of a small Material site.
  :class:`TemplateCache` keeps the compiled code for the life of ``mkdocs serve``. Jinja checks
  each entry against the template's source (an edited override is compiled afresh), and the
  key includes the environment's syntax settings, so a change to those is never served stale.
* **Theme file listing.** Every rebuild also lists every file of the theme to find its static
  assets: Material ships some 14,000 icons, and walking and filtering them takes about 0.15 s.
  :class:`ThemeListing` keeps the list while no folder of the theme has changed.

These three, and the uses of MkDocs' rebuild flag (:func:`rebuild_wanted`,
:func:`request_rebuild`), lean on parts of MkDocs, watchdog and Jinja that no release promises
to keep: private attributes, a nested function, the settings that decide Jinja's compiled
code. Each is a :class:`SpeedUp` naming the versions it was written and tested for; before it
changes anything, it checks the installed versions and that each part is there with the shape
it expects. Where either is not so, MkDocs is left as it is and one INFO line per serve session
says which speed-up is off and why: an upgrade turns a speed-up off, never ``mkdocs serve``.
"""

from __future__ import annotations

import contextlib
import inspect
import logging
import os
import re
import threading
import time
import weakref
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from importlib import metadata
from types import CodeType
from typing import Any

import jinja2
from mkdocs import utils as mkdocs_utils
from mkdocs.structure.files import Files
from watchdog.observers.polling import PollingObserver
from watchdog.utils.dirsnapshot import DirectorySnapshot

log = logging.getLogger("mkdocs.plugins.formula_check.serving")
"""Under ``mkdocs.plugins``, so that ``mkdocs serve`` shows its INFO lines."""


# -- the private parts: each speed-up on only where they are as it was written for --------


@dataclass(frozen=True)
class WrittenFor:
    """The versions of one package a speed-up was written and tested for: ``lowest`` up to,
    not including, ``below`` (compared on the release numbers, so ``2.0rc1`` is 2.0)."""

    package: str
    lowest: tuple[int, ...]
    below: tuple[int, ...]

    def mismatch(self) -> str | None:
        """Why the installed version is not one of these, or None when it is."""
        try:
            installed = metadata.version(self.package)
        except metadata.PackageNotFoundError:
            return f"the installed version of {self.package} is unknown"
        release = _release(installed)
        if release is None or not self.lowest <= release < self.below:
            return (
                f"{self.package} {installed} is not one of the versions it was written for ({self})"
            )
        return None

    def __str__(self) -> str:
        dotted = ".".join
        return f">={dotted(map(str, self.lowest))},<{dotted(map(str, self.below))}"


def _release(version: str) -> tuple[int, ...] | None:
    match = re.match(r"\d+(\.\d+)*", version)
    return tuple(int(part) for part in match.group().split(".")) if match else None


MKDOCS = WrittenFor("mkdocs", (1, 6), (2,))
"""The versions this project supports (``mkdocs>=1.6,<2``); tested on 1.6.1."""
WATCHDOG = WrittenFor("watchdog", (2, 0), (8,))
"""From the first MkDocs 1.6 accepts to the next major; the observers' and emitters'
``_timeout`` are read as here from 2.0 through 7.x. Tested on 7.1.0."""
JINJA = WrittenFor("jinja2", (2, 11, 1), (4,))
"""From the first MkDocs 1.6 accepts to the next major. Tested on 3.1.6."""


@dataclass(frozen=True)
class SpeedUp:
    """A speed-up relying on private parts of the packages it was ``written_for``. Without it,
    ``instead`` is what happens: MkDocs' own behaviour."""

    name: str
    instead: str
    written_for: tuple[WrittenFor, ...]

    def mismatch(self) -> str | None:
        """Why the installed versions are not ones it was written for, or None."""
        return next(filter(None, (versions.mismatch() for versions in self.written_for)), None)


QUICKER_POLLING = SpeedUp(
    "fast_serve's quicker polling",
    "MkDocs' observer is left as it is (MkDocs polls every 0.5 s)",
    (MKDOCS, WATCHDOG),
)
KEPT_THEME_LIST = SpeedUp(
    "fast_serve's kept theme file list",
    "MkDocs lists the theme's files on every rebuild",
    (MKDOCS, JINJA),
)
KEPT_TEMPLATES = SpeedUp(
    "fast_serve's template cache",
    "Jinja compiles the theme's templates on every rebuild",
    (JINJA,),
)
STOP_STALE_CHECKS = SpeedUp(
    "stopping the checks of a build a newer edit made stale",
    "each build runs its checks to the end",
    (MKDOCS,),
)
REBUILD_ON_RETURN = SpeedUp(
    "rebuilding when a watched package folder comes back",
    "it is watched again, and the next edit rebuilds",
    (MKDOCS,),
)
SPEEDUPS = (QUICKER_POLLING, KEPT_THEME_LIST, KEPT_TEMPLATES, STOP_STALE_CHECKS, REBUILD_ON_RETURN)


Shape = Callable[[], str | None]
"""Looks at the private parts a speed-up uses: what is missing or not as expected, or None."""


class _Verdicts:
    """Whether each speed-up is on, decided once per serve session (the server, or the cache
    kept for the session) and said once when it is off. A session object that cannot be
    weakly referenced is judged on every call."""

    def __init__(self) -> None:
        self._known: weakref.WeakKeyDictionary[Any, dict[str, str | None]] = (
            weakref.WeakKeyDictionary()
        )
        self._lock = threading.Lock()  # asked from MkDocs' threads, page waits, FolderKeeper

    def on(self, session: object, speedup: SpeedUp, shape: Shape) -> bool:
        """Is ``speedup`` on for ``session``: the versions it was written for, and each
        private part as ``shape`` expects? Never raises."""
        with self._lock:
            known = self._of(session)
            if speedup.name not in known:
                reason = _looked_at(lambda: speedup.mismatch() or shape())
                self._decide(known, speedup, reason)
            return known[speedup.name] is None

    def turn_off(self, session: object, speedup: SpeedUp, reason: str) -> None:
        """A private part found not as expected while in use: off from now on, said once."""
        with self._lock:
            known = self._of(session)
            if known.get(speedup.name) is None:
                self._decide(known, speedup, reason)

    def _of(self, session: object) -> dict[str, str | None]:
        try:
            return self._known.setdefault(session, {})
        except TypeError:  # not weakly referable: nothing to remember it by
            return {}

    @staticmethod
    def _decide(known: dict[str, str | None], speedup: SpeedUp, reason: str | None) -> None:
        known[speedup.name] = reason
        if reason is not None:
            log.info(f"formula-check: {speedup.name} is off: {reason}; {speedup.instead}")


def _looked_at(shape: Shape) -> str | None:
    try:
        return shape()
    except Exception as exc:  # a private part that cannot even be looked at is not as expected
        return f"looking at the private parts it uses failed ({_failure(exc)})"


def _failure(exc: Exception) -> str:
    return f"{type(exc).__name__}: {exc}"


_verdicts = _Verdicts()


def _number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _polling_shape(server: Any) -> str | None:
    if not isinstance(getattr(server, "_watched_paths", None), dict):
        return "MkDocs' LiveReloadServer has no _watched_paths dict"
    observer = getattr(server, "observer", None)
    if not isinstance(observer, PollingObserver):
        kind = type(observer).__name__
        return f"MkDocs' server observer is not watchdog's PollingObserver but {kind}"
    if not _number(getattr(observer, "_timeout", None)):
        return "watchdog's PollingObserver has no _timeout number"
    if not all(_number(getattr(emitter, "_timeout", None)) for emitter in observer.emitters):
        return "a watchdog emitter has no _timeout number"
    return None


def _rebuild_flag_shape(server: Any) -> str | None:
    if not isinstance(getattr(server, "_want_rebuild", None), bool):
        return "MkDocs' LiveReloadServer has no _want_rebuild flag"
    return None


def _rebuild_request_shape(server: Any) -> str | None:
    condition = getattr(server, "_rebuild_cond", None)
    if not all(callable(getattr(condition, name, None)) for name in ("__enter__", "notify_all")):
        return "MkDocs' LiveReloadServer has no _rebuild_cond condition"
    return _rebuild_flag_shape(server)


MKDOCS_INTERVAL = 0.5
"""MkDocs' own polling interval (``LiveReloadServer(polling_interval=0.5)``)."""
FASTEST_INTERVAL = 0.05
POLLING_SHARE = 0.05
"""Polling may take this share of one core: interval = snapshot time / share."""


def polling_interval(snapshot_seconds: float) -> float:
    """The interval for one look at the watched paths taking ``snapshot_seconds``: as short as
    :data:`FASTEST_INTERVAL`, never longer than MkDocs' own."""
    return min(MKDOCS_INTERVAL, max(FASTEST_INTERVAL, snapshot_seconds / POLLING_SHARE))


def snapshot_seconds(paths: list[str]) -> float:
    """How long one poll of ``paths`` takes: what the polling emitters do each interval (a
    folder with everything below it; for a file, the folder holding it, without subfolders)."""
    start = time.perf_counter()
    for path in paths:
        try:
            if os.path.isfile(path):
                DirectorySnapshot(os.path.dirname(os.path.abspath(path)), recursive=False)
            else:
                DirectorySnapshot(path, recursive=True)
        except OSError:
            continue  # a path that is gone costs nothing to poll
    return time.perf_counter() - start


def quicken_polling(server: Any, paths: Iterable[str] = ()) -> float | None:
    """Poll what ``server`` (MkDocs' ``LiveReloadServer``) watches more often.

    The interval is sized from one look at the paths watched so far plus ``paths`` (those
    MkDocs or a later rebuild will add: ``watch:`` in ``mkdocs.yml``, snippet files). It is set
    on MkDocs' own observer and its emitters, so every watch keeps its callback and settings,
    whoever made it. Call it again when more is watched: it sizes the interval anew. Returns
    the interval, or None when :data:`QUICKER_POLLING` is off for this server: versions it
    was not written for, or a server or observer it does not know (left as is, said once).
    """
    if not _verdicts.on(server, QUICKER_POLLING, lambda: _polling_shape(server)):
        return None
    problem = _looked_at(lambda: _polling_shape(server))  # emitters come with each watch
    if problem is not None:
        _verdicts.turn_off(server, QUICKER_POLLING, problem)
        return None
    observer = server.observer
    emitters = list(observer.emitters)
    every = sorted({*map(str, server._watched_paths), *map(str, paths)})
    interval = polling_interval(snapshot_seconds(every))
    observer._timeout = interval  # for watches added from now on
    for emitter in emitters:
        emitter._timeout = interval  # read by its polling loop before each look
    log.debug(f"fast_serve: polling {len(every)} path(s) every {interval:.2f} s")
    return interval


def rebuild_wanted(server: Any) -> bool:
    """Has a change come in since this build started? MkDocs then builds again as soon as
    this build ends, so what this build still checks is stale. (MkDocs' own flag: never, where
    :data:`STOP_STALE_CHECKS` is off.)"""
    if not _verdicts.on(server, STOP_STALE_CHECKS, lambda: _rebuild_flag_shape(server)):
        return False
    return bool(getattr(server, "_want_rebuild", False))


def request_rebuild(server: Any) -> None:
    """Ask MkDocs for a rebuild, as its own watch does when a file changes (nothing, where
    :data:`REBUILD_ON_RETURN` is off)."""
    if not _verdicts.on(server, REBUILD_ON_RETURN, lambda: _rebuild_request_shape(server)):
        return
    with server._rebuild_cond:
        server._want_rebuild = True
        server._rebuild_cond.notify_all()


class FolderKeeper:
    """Keeps the watches on project folders (a package a snippet imports) through their
    removal and return. A folder that goes away ends its watch for good (the polling emitter
    stops), and MkDocs ignores the folder's own deletion: a package moved away and back, as a
    branch switch does, would be edited unseen for the rest of ``mkdocs serve``. Once a second
    each folder is looked at; one gone or back (another inode) is watched afresh, and a
    rebuild is asked for, since the verdicts of the blocks importing it changed."""

    def __init__(self, server: Any, interval: float = 1.0) -> None:
        self.server = server
        self.interval = interval
        self.folders: dict[str, tuple[int, ...]] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def add(self, folder: str) -> None:
        with self._lock:
            self.folders.setdefault(folder, _identity(folder))
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._run, name="formula-check-folders", daemon=True
                )
                self._thread.start()

    def look(self) -> bool:
        """Watch afresh each folder removed or put back since the last look; True if any."""
        changed = False
        with self._lock:
            for folder, known in list(self.folders.items()):
                now = _identity(folder)
                if now == known:
                    continue
                self.folders[folder] = now
                with contextlib.suppress(KeyError, OSError):
                    self.server.unwatch(folder)
                if now:
                    self.server.watch(folder)
                changed = True
        if changed:
            request_rebuild(self.server)
        return changed

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            self.look()

    def close(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()


def _identity(folder: str) -> tuple[int, ...]:
    """The folder's inode and device (:func:`_state` without its times, which move with every
    file added); empty when it is gone."""
    return _state(folder)[2:]


def _syntax(environment: jinja2.Environment) -> tuple[Any, ...]:
    """What besides the source and the callables below decides a template's compiled code."""
    return (
        type(environment),
        tuple(sorted(environment.extensions)),
        environment.block_start_string,
        environment.block_end_string,
        environment.variable_start_string,
        environment.variable_end_string,
        environment.comment_start_string,
        environment.comment_end_string,
        environment.line_statement_prefix,
        environment.line_comment_prefix,
        environment.trim_blocks,
        environment.lstrip_blocks,
        environment.newline_sequence,
        environment.keep_trailing_newline,
        environment.optimized,
        environment.is_async,
        getattr(environment, "newstyle_gettext", None),
    )


def _callables(environment: jinja2.Environment) -> tuple[tuple[str, Any], ...]:
    """Objects Jinja consults while compiling: how a filter or test is called is fixed in the
    code, and a filter of a constant is run then and its result stored. An entry compiled
    with other objects (a hook redefined a filter on this rebuild) is compiled again."""
    return (
        *(("filter:" + name, value) for name, value in sorted(environment.filters.items())),
        *(("test:" + name, value) for name, value in sorted(environment.tests.items())),
        *(("policy:" + name, value) for name, value in sorted(environment.policies.items())),
        ("finalize", environment.finalize),
        ("autoescape", environment.autoescape),
    )


def _same(old: tuple[tuple[str, Any], ...], new: tuple[tuple[str, Any], ...]) -> bool:
    return len(old) == len(new) and all(
        a[0] == b[0] and a[1] is b[1] for a, b in zip(old, new, strict=True)
    )


class TemplateCache(jinja2.BytecodeCache):
    """Compiled templates kept in memory across the Jinja environments of serve rebuilds.

    One entry per template and syntax, replaced when the source or the compile-time callables
    differ, so a long session holds at most one entry per template."""

    def __init__(self) -> None:
        self._code: dict[tuple[tuple[Any, ...], str], _Entry] = {}
        self.hits = 0
        self.compiled = 0

    def load_bytecode(self, bucket: jinja2.bccache.Bucket) -> None:
        entry = self._code.get((_syntax(bucket.environment), bucket.key))
        if (
            entry is not None
            and entry.checksum == bucket.checksum
            and _same(entry.callables, _callables(bucket.environment))
        ):
            bucket.code = entry.code
            self.hits += 1

    def dump_bytecode(self, bucket: jinja2.bccache.Bucket) -> None:
        if bucket.code is not None:
            entry = _Entry(bucket.checksum, _callables(bucket.environment), bucket.code)
            self._code[(_syntax(bucket.environment), bucket.key)] = entry
            self.compiled += 1

    def __len__(self) -> int:
        return len(self._code)

    def clear(self) -> None:
        """Forget every compiled template (and the counts)."""
        self._code.clear()
        self.hits = self.compiled = 0

    def attach(self, environment: jinja2.Environment) -> jinja2.Environment:
        """Use this cache for ``environment`` unless it already has a bytecode cache, or
        :data:`KEPT_TEMPLATES` is off (a Jinja it was not written for: its key names what
        decides the compiled code there)."""
        if environment.bytecode_cache is None and _verdicts.on(
            self, KEPT_TEMPLATES, lambda: _template_key_shape(environment)
        ):
            environment.bytecode_cache = self
        return environment


@dataclass(frozen=True)
class _Entry:
    checksum: str
    callables: tuple[tuple[str, Any], ...]
    code: CodeType


def _template_key_shape(environment: jinja2.Environment) -> str | None:
    _syntax(environment)  # raises where a setting it names is gone
    _callables(environment)
    bucket = jinja2.bccache.Bucket(environment, "probe", "")
    missing = [
        name for name in ("environment", "key", "checksum", "code") if not hasattr(bucket, name)
    ]
    return f"Jinja's bytecode Bucket has no {', '.join(missing)}" if missing else None


UNSETTLED_SECONDS = 2.0
"""A folder changed this recently before it was listed may change again within its
modification time's resolution (one or two seconds on some filesystems): listed again."""


def _mkdocs_theme_filter() -> CodeType | None:
    """The code of the filter MkDocs' ``Files.add_files_from_theme`` passes to
    ``list_templates``: its answer for a name depends only on the theme's
    ``static_templates`` and MkDocs' Markdown extensions (:func:`_theme_listing_shape`)."""
    method = getattr(Files, "add_files_from_theme", None)
    constants = getattr(getattr(method, "__code__", None), "co_consts", ())
    found = [c for c in constants if isinstance(c, CodeType) and c.co_name == "filter"]
    return found[0] if len(found) == 1 and found[0].co_freevars == ("config",) else None


THEME_FILTER_NAMES = frozenset(
    {"append", "extend", "fnmatch", "lower", "utils", "markdown_extensions", "theme"}
    | {"static_templates"}
)
"""Every name MkDocs 1.6's theme file filter looks up: one that reads more (a setting of
``config`` besides the theme's ``static_templates``) could answer differently for the same
key, so its list is not kept."""


def _theme_listing_shape(theme: Any, code: CodeType | None) -> str | None:
    if not callable(getattr(theme, "get_env", None)):
        return "MkDocs' Theme has no get_env method"
    return _theme_filter_shape(code) or _jinja_listing_shape()


def _theme_filter_shape(code: CodeType | None) -> str | None:
    if code is None:
        return "MkDocs' Files.add_files_from_theme has no nested filter(name) over config"
    names = {
        name for c in (code, *code.co_consts) if isinstance(c, CodeType) for name in c.co_names
    }
    if not names <= THEME_FILTER_NAMES:
        more = ", ".join(sorted(names - THEME_FILTER_NAMES))
        return f"MkDocs' theme file filter reads more than static_templates ({more})"
    if not isinstance(getattr(mkdocs_utils, "markdown_extensions", None), (list, tuple)):
        return "mkdocs.utils has no markdown_extensions tuple"
    return None


def _jinja_listing_shape() -> str | None:
    parameters = inspect.signature(jinja2.Environment.list_templates).parameters
    if list(parameters)[1:3] != ["extensions", "filter_func"]:
        return "Jinja's Environment.list_templates takes no (extensions, filter_func)"
    probe = jinja2.FileSystemLoader([])
    if not isinstance(getattr(probe, "searchpath", None), list) or not hasattr(
        probe, "followlinks"
    ):
        return "Jinja's FileSystemLoader has no searchpath list or followlinks"
    return None


class ThemeListing:
    """The theme's file list, kept across the Jinja environments of ``serve`` rebuilds.

    Kept for a loader's folders (a plain ``FileSystemLoader``, links not followed) while the
    modification time of each folder below them is what it was when they were listed: adding,
    removing or renaming a file changes its folder's time. The filtered list MkDocs asks for
    is kept too, for the same folders and the same ``static_templates``. Any other loader or
    filter is answered by Jinja, as without this."""

    def __init__(self) -> None:
        self._names: dict[tuple[str, ...], _Listing] = {}
        self._filtered: dict[tuple[Any, ...], list[str]] = {}
        self._filter_code = _mkdocs_theme_filter()
        self.walks = 0
        self.hits = 0

    def attach(self, theme: Any) -> None:
        """Make the environments of ``theme`` (MkDocs' ``Theme``) list through this, unless
        :data:`KEPT_THEME_LIST` is off: then ``theme`` is left as it is."""
        shape = lambda: _theme_listing_shape(theme, self._filter_code)  # noqa: E731
        if not _verdicts.on(self, KEPT_THEME_LIST, shape):
            return
        make_env: Callable[[], jinja2.Environment] = theme.get_env
        try:
            theme.get_env = lambda: self._listing_through(make_env())
        except (AttributeError, TypeError) as exc:  # a theme that takes no attribute
            _verdicts.turn_off(self, KEPT_THEME_LIST, f"MkDocs' Theme.get_env: {_failure(exc)}")

    def _listing_through(self, environment: jinja2.Environment) -> jinja2.Environment:
        loader = environment.loader
        if type(loader) is not jinja2.FileSystemLoader or loader.followlinks:
            return environment
        jinja_list: Callable[..., list[str]] = environment.list_templates
        searchpath = tuple(loader.searchpath)

        def list_templates(extensions: Any = None, filter_func: Any = None) -> list[str]:
            key = self._filter_key(filter_func, extensions)
            if key is None:
                return jinja_list(extensions, filter_func)
            return self._listed(searchpath, key, filter_func)

        setattr(environment, "list_templates", list_templates)  # noqa: B010 (a method)
        return environment

    def _filter_key(self, filter_func: Any, extensions: Any) -> tuple[Any, ...] | None:
        if extensions is not None:
            return None
        if filter_func is None:
            return ()
        code = getattr(filter_func, "__code__", None)
        if code is None or code is not self._filter_code:
            return None
        try:
            config = filter_func.__closure__[0].cell_contents
            static = tuple(config.theme.static_templates)
        except (AttributeError, IndexError, TypeError, ValueError) as exc:
            reason = f"MkDocs' theme file filter's config: {_failure(exc)}"
            _verdicts.turn_off(self, KEPT_THEME_LIST, reason)
            return None  # Jinja lists this one; no later theme is patched
        return (static, tuple(mkdocs_utils.markdown_extensions))

    def _listed(self, searchpath: tuple[str, ...], key: tuple[Any, ...], keep: Any) -> list[str]:
        listing = self._names.get(searchpath)
        if listing is None or not listing.unchanged():
            listing = _Listing.of(searchpath)
            self._names[searchpath] = listing
            self._filtered = {k: v for k, v in self._filtered.items() if k[0] != searchpath}
            self.walks += 1
        else:
            self.hits += 1
        if not key:
            return list(listing.names)
        entry = (searchpath, *key)
        filtered = self._filtered.get(entry)
        if filtered is None:
            filtered = [name for name in listing.names if keep(name)]
            self._filtered[entry] = filtered
        return list(filtered)


@dataclass(frozen=True)
class _Listing:
    names: tuple[str, ...]
    folders: tuple[tuple[str, tuple[int, ...]], ...]
    """Each folder walked, and each search path that is not one, with its :func:`_state`."""

    @classmethod
    def of(cls, searchpath: tuple[str, ...]) -> _Listing:
        found: set[str] = set()
        folders: list[tuple[str, tuple[int, ...]]] = []
        settled = time.time_ns() - int(UNSETTLED_SECONDS * 1e9)
        for top in searchpath:
            if not os.path.isdir(top):
                folders.append((top, _state(top)))  # one that appears is noticed
            for folder, _, files in os.walk(top):
                folders.append((folder, _state(folder)))
                prefix = folder[len(top) :].strip(os.path.sep).replace(os.path.sep, "/")
                found.update(f"{prefix}/{name}" if prefix else name for name in files)
        if any(max(state[:2], default=0) > settled for _, state in folders):
            folders.append(("", (-2,)))  # never matches: list again next time
        return cls(tuple(sorted(found)), tuple(folders))

    def unchanged(self) -> bool:
        return all(_state(folder) == state for folder, state in self.folders)


def _state(folder: str) -> tuple[int, ...]:
    """What changes when a folder's entries do: its modification time, and its change time,
    which also moves when a tool (``rsync -a``, ``tar x``) sets the modification time back;
    the inode and device, for a folder replaced by another. Empty when there is none."""
    try:
        info = os.stat(folder)
    except OSError:
        return ()
    return (info.st_mtime_ns, info.st_ctime_ns, info.st_ino, info.st_dev)
