"""The ``formula-check-serve`` MkDocs plugin: the speed-ups on, under ``mkdocs serve`` only.

Listed in ``plugins:`` after ``formula-check`` (or alone, on any site). ``on_startup`` makes
MkDocs keep this instance across rebuilds, so the template cache and the theme file list live
for the whole session. In ``mkdocs build`` every hook leaves MkDocs as it is.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from mkdocs.config.base import Config
from mkdocs.config.defaults import MkDocsConfig
from mkdocs.plugins import BasePlugin, event_priority

from .templates import TemplateCache
from .theme import ThemeListing

if TYPE_CHECKING:  # MkDocs' server (and watchdog with it) loads only under `mkdocs serve`
    from mkdocs.livereload import LiveReloadServer


class ServeSpeedupsConfig(Config):  # type: ignore[no-untyped-call]
    """No options: listing the plugin turns the speed-ups on, removing it turns them off."""


class ServeSpeedupsPlugin(BasePlugin[ServeSpeedupsConfig]):  # type: ignore[no-untyped-call]
    """``plugins: [formula-check-serve]``: a quicker ``mkdocs serve``."""

    def __init__(self) -> None:
        self.serving = False
        self.templates = TemplateCache()
        self.theme_listing = ThemeListing()
        self.server: LiveReloadServer | None = None
        self.later_watched: list[str] = []
        self.sized_for: frozenset[str] = frozenset()

    def on_startup(self, *, command: str, dirty: bool) -> None:
        """Remember whether we serve: nothing changes in a build."""
        self.serving = command == "serve"

    def on_config(self, config: MkDocsConfig) -> MkDocsConfig | None:
        """Keep the theme's file list (MkDocs lists the theme after this hook)."""
        if self.serving:
            self.theme_listing.attach(config.theme)
        return config

    def on_env(self, env: Any, *, config: MkDocsConfig, files: Any) -> Any:
        """Reuse the theme's compiled templates."""
        return self.templates.attach(env) if self.serving else env

    @event_priority(-100)  # after other plugins have added their watches
    def on_serve(
        self, server: LiveReloadServer, *, config: MkDocsConfig, builder: Any
    ) -> LiveReloadServer | None:
        """Poll sooner, sized for what is watched and for ``watch:``, which MkDocs adds next."""
        self.server = server
        self.later_watched = [str(path) for path in config.watch]
        self._size_polling()
        return server

    @event_priority(-100)  # after other plugins' rebuilds added watches (snippet files)
    def on_post_build(self, *, config: MkDocsConfig) -> None:
        """Size the polling anew when what is watched changed."""
        if self.server is not None:
            self._size_polling()

    def _size_polling(self) -> None:
        from .polling import quicken_polling, watched_paths

        watched = watched_paths(self.server)
        if watched != self.sized_for:
            self.sized_for = watched
            quicken_polling(self.server, self.later_watched)
