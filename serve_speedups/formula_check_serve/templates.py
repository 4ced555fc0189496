"""The template cache: the theme's templates compiled once per ``mkdocs serve``.

Every rebuild makes a new Jinja environment and compiles the theme's templates again: about
0.3 s of a 0.8 s rebuild of a small Material site. :class:`TemplateCache` keeps the compiled
code for the life of ``mkdocs serve``. Jinja checks each entry against the template's source
(an edited override is compiled afresh), and the key includes the environment's syntax
settings, so a change to those is never served stale.

Private parts relied on: the fields of Jinja's ``bccache.Bucket`` (``environment``, ``key``,
``checksum``, ``code``) and the ``Environment`` settings that decide a template's compiled code
(:func:`_syntax`, :func:`_callables`); Jinja promises neither to stay as they are. Where the
gate (:data:`.gates.KEPT_TEMPLATES`) says no, no environment gets this cache and Jinja compiles
the theme's templates on every rebuild.
"""

from __future__ import annotations

from dataclasses import dataclass
from types import CodeType
from typing import Any

import jinja2

from .gates import KEPT_TEMPLATES, verdicts


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
        if environment.bytecode_cache is None and verdicts.on(
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
