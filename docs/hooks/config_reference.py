"""MkDocs hook: the option references, generated from the options' definitions themselves.

A page that contains :data:`MARKER` gets it replaced by a table of every plugin option: its
name, its type, its default and the attribute docstring written under it in ``config.py``.
The text is never copied by hand, so the reference cannot drift from the code.

The block options' table (:func:`block_options_table`, from ``fences.BLOCK_OPTIONS``) is
written into ``docs/authoring.md`` instead, below :data:`BLOCK_OPTIONS_MARKER`: a table put
in at build time would move every formula block under it down the page, and a block's line
is where the build and the command line say it is. ``tests/test_docs_reference.py`` fails when
the page's table is not the generated one; ``FORMULA_CHECK_UPDATE_GOLDEN=1`` rewrites it.
"""

from __future__ import annotations

import ast
import inspect
import itertools
from typing import Any

from mkdocs.config import config_options as c
from mkdocs.config.base import BaseConfigOption

from formula_check.pages import fences
from formula_check.project import config

MARKER = "<!-- formula-check:config-reference -->"
BLOCK_OPTIONS_MARKER = (
    "<!-- Generated from BLOCK_OPTIONS in plugin/formula_check/pages/fences.py: edit them there. "
    "FORMULA_CHECK_UPDATE_GOLDEN=1 python -m pytest tests/test_docs_reference.py rewrites "
    "this table. -->"
)


def on_page_markdown(markdown: str, **kwargs: Any) -> str:
    """Replace the marker, wherever it appears, with the generated table."""
    if MARKER not in markdown:
        return markdown
    return markdown.replace(MARKER, reference_table())


def block_options_table() -> str:
    """A Markdown table with one row per block option, in the order the code lists them."""
    rows = [
        "| Option | Example | Meaning |",
        "|---|---|---|",
    ]
    for option in fences.BLOCK_OPTIONS:
        example = f'`{option.name}="{option.example}"`'
        meaning = option.meaning.replace("|", "\\|")
        rows.append(f"| `{option.name}` | {example} | {meaning} |")
    return "\n".join(rows)


def reference_table() -> str:
    """A Markdown table with one row per option, in the order the class declares them."""
    docs = attribute_docstrings()
    rows = [
        "| Option | Type | Default | Meaning |",
        "|---|---|---|---|",
    ]
    for name, option in config.FormulaCheckConfig._schema:
        text = " ".join(docs.get(name, "").split()).replace("|", "\\|")
        rows.append(f"| `{name}` | {describe_type(option)} | {describe_default(option)} | {text} |")
    return "\n".join(rows)


def attribute_docstrings() -> dict[str, str]:
    """``{option: docstring}`` for the string literal that follows each class attribute."""
    tree = ast.parse(inspect.getsource(config))
    found: dict[str, str] = {}
    for node in ast.walk(tree):
        if not (isinstance(node, ast.ClassDef) and node.name == "FormulaCheckConfig"):
            continue
        for statement, following in itertools.pairwise(node.body):
            if (
                isinstance(statement, ast.Assign)
                and len(statement.targets) == 1
                and isinstance(statement.targets[0], ast.Name)
                and isinstance(following, ast.Expr)
                and isinstance(following.value, ast.Constant)
                and isinstance(following.value.value, str)
            ):
                found[statement.targets[0].id] = inspect.cleandoc(following.value.value)
    return found


def describe_type(option: BaseConfigOption[Any]) -> str:
    """A reader's name for the option's type: ``int or float``, ``list of one of ...``."""
    if isinstance(option, c.Optional):
        return describe_type(option.option) + " (optional)"
    if isinstance(option, c.ListOfItems):
        return "list of " + describe_type(option.option_type)
    if isinstance(option, c.Choice):
        return "one of " + ", ".join(f"`{choice}`" for choice in option.choices)
    if isinstance(option, c.Type):
        kinds = option._type if isinstance(option._type, tuple) else (option._type,)
        return " or ".join(f"`{kind.__name__}`" for kind in kinds)
    return type(option).__name__


def describe_default(option: BaseConfigOption[Any]) -> str:
    """The default as YAML would spell it."""
    value = option.default
    if value is None:
        return "*none*"
    if isinstance(value, bool):
        return f"`{str(value).lower()}`"
    if isinstance(value, list):
        return "`[" + ", ".join(str(item) for item in value) + "]`"
    return f"`{value}`"
