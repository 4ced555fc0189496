"""The kept theme file list: the theme's files listed once while its folders are unchanged.

Every rebuild lists every file of the theme to find its static assets: Material ships some
14,000 icons, and walking and filtering them takes about 0.15 s. :class:`ThemeListing` keeps
the list while no folder of the theme has changed.

Private parts relied on: the nested ``filter(name)`` that MkDocs' ``Files.add_files_from_theme``
passes to ``list_templates`` (its code object, the one ``config`` it closes over, and the names
it reads: :data:`THEME_FILTER_NAMES`), ``mkdocs.utils.markdown_extensions``, a ``Theme``
taking ``get_env`` as its own attribute, Jinja's ``Environment.list_templates(extensions,
filter_func)`` and ``FileSystemLoader.searchpath`` and ``.followlinks``. Where the gate
(:data:`.gates.KEPT_THEME_LIST`) says no, or a part is found not as expected while in use, the
theme is left as it is and MkDocs lists the theme's files on every rebuild.
"""

from __future__ import annotations

import inspect
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from types import CodeType
from typing import Any

import jinja2
from mkdocs import utils as mkdocs_utils
from mkdocs.structure.files import Files

from .folders import folder_state
from .gates import KEPT_THEME_LIST, failure, verdicts

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
        if not verdicts.on(self, KEPT_THEME_LIST, shape):
            return
        make_env: Callable[[], jinja2.Environment] = theme.get_env
        try:
            theme.get_env = lambda: self._listing_through(make_env())
        except (AttributeError, TypeError) as exc:  # a theme that takes no attribute
            verdicts.turn_off(self, KEPT_THEME_LIST, f"MkDocs' Theme.get_env: {failure(exc)}")

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
            reason = f"MkDocs' theme file filter's config: {failure(exc)}"
            verdicts.turn_off(self, KEPT_THEME_LIST, reason)
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
    """Each folder walked, and each search path that is not one, with its :func:`folder_state`."""

    @classmethod
    def of(cls, searchpath: tuple[str, ...]) -> _Listing:
        found: set[str] = set()
        folders: list[tuple[str, tuple[int, ...]]] = []
        settled = time.time_ns() - int(UNSETTLED_SECONDS * 1e9)
        for top in searchpath:
            if not os.path.isdir(top):
                folders.append((top, folder_state(top)))  # one that appears is noticed
            for folder, _, files in os.walk(top):
                folders.append((folder, folder_state(folder)))
                prefix = folder[len(top) :].strip(os.path.sep).replace(os.path.sep, "/")
                found.update(f"{prefix}/{name}" if prefix else name for name in files)
        if any(max(state[:2], default=0) > settled for _, state in folders):
            folders.append(("", (-2,)))  # never matches: list again next time
        return cls(tuple(sorted(found)), tuple(folders))

    def unchanged(self) -> bool:
        return all(folder_state(folder) == state for folder, state in self.folders)
