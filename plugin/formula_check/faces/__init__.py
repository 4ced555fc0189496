"""The faces: where a user meets the checker. The MkDocs plugin, the CLI, the pytest plugin,
the ``%%formula`` Jupyter magic and the Markdown extension (the Zensical face, which the MkDocs
plugin builds on). Each reads its own configuration into one :class:`~..session.options.Options`
and calls the same session; none of them starts a worker itself."""
