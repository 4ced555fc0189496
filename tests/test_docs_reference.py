"""The option references are generated from the options' definitions: every option is in them.

The plugin's options come from the config class; the block options' table of the authoring
page from ``fences.BLOCK_OPTIONS``.
"""

from __future__ import annotations

import importlib.util
import inspect
import os
import re
from pathlib import Path
from types import ModuleType

import pytest
import yaml

from formula_check.oracles.catalog import BUILTINS
from formula_check.pages import fences
from formula_check.project.config import FormulaCheckConfig

ROOT = Path(__file__).resolve().parent.parent
HOOK = ROOT / "docs" / "hooks" / "config_reference.py"
AUTHORING = ROOT / "docs" / "authoring.md"


def load_hook() -> ModuleType:
    spec = importlib.util.spec_from_file_location("config_reference_hook", HOOK)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def option_names() -> list[str]:
    return [name for name, _ in FormulaCheckConfig._schema]


def test_every_option_has_a_row_with_its_docstring() -> None:
    hook = load_hook()
    table = hook.reference_table()
    rows = table.splitlines()[2:]
    assert [row.split("`")[1] for row in rows] == option_names()
    docs = hook.attribute_docstrings()
    assert set(docs) == set(option_names()), "every option needs an attribute docstring"
    for row, name in zip(rows, option_names(), strict=True):
        first_words = " ".join(inspect.cleandoc(docs[name]).split()[:4])
        assert first_words in row, (name, row)


def test_types_and_defaults_are_read_from_the_options() -> None:
    rows = {row.split("`")[1]: row for row in load_hook().reference_table().splitlines()[2:]}
    assert "| `int` or `float` | `60` |" in rows["timeout"]
    assert "list of one of `mismatch`, `error`" in rows["fail_on"]
    assert "`[mismatch, error, timeout]`" in rows["fail_on"]
    assert "`str` (optional) | *none*" in rows["language"]
    assert "| `bool` | `true` |" in rows["enabled"]


def test_the_marker_is_replaced_and_other_pages_are_untouched() -> None:
    hook = load_hook()
    page = f"# Options\n\n{hook.MARKER}\n"
    assert hook.MARKER not in hook.on_page_markdown(page)
    assert "| `workers` |" in hook.on_page_markdown(page)
    assert hook.on_page_markdown("# Elsewhere\n") == "# Elsewhere\n"


def test_the_site_uses_the_hook_on_its_reference_page() -> None:
    config = yaml.safe_load((ROOT / "mkdocs.yml").read_text(encoding="utf-8"))
    assert "docs/hooks/config_reference.py" in config["hooks"]
    reference = (ROOT / "docs" / "reference.md").read_text(encoding="utf-8")
    assert load_hook().MARKER in reference


def test_every_block_option_has_a_row_with_its_example_and_meaning() -> None:
    rows = load_hook().block_options_table().splitlines()[2:]
    assert [row.split("`")[1] for row in rows] == list(fences.OPTIONS)
    for row, option in zip(rows, fences.BLOCK_OPTIONS, strict=True):
        assert f'| `{option.name}="{option.example}"` |' in row
        assert option.meaning.split(".")[0] in row


def _page_table(page: str, marker: str) -> tuple[int, int]:
    """Where the table under ``marker`` starts and ends, as offsets into ``page``."""
    start = page.index(marker + "\n\n") + len(marker) + 2
    end = page.index("\n\n", start)
    return start, end


def test_the_authoring_page_holds_the_generated_block_options_table() -> None:
    hook = load_hook()
    page = AUTHORING.read_text(encoding="utf-8")
    start, end = _page_table(page, hook.BLOCK_OPTIONS_MARKER)
    generated = hook.block_options_table()
    if os.environ.get("FORMULA_CHECK_UPDATE_GOLDEN") == "1":
        AUTHORING.write_text(page[:start] + generated + page[end:], encoding="utf-8")
        return
    if page[start:end] != generated:
        pytest.fail(
            "docs/authoring.md's options table is not the one fences.BLOCK_OPTIONS makes: "
            "run with FORMULA_CHECK_UPDATE_GOLDEN=1 to rewrite it",
            pytrace=False,
        )


def test_the_block_options_table_escapes_a_pipe(monkeypatch: pytest.MonkeyPatch) -> None:
    option = fences.BlockOption("x", fences.OPTIONS["id"], "1", "a | b")
    monkeypatch.setattr(fences, "BLOCK_OPTIONS", (option,))
    assert load_hook().block_options_table().splitlines()[2] == '| `x` | `x="1"` | a \\| b |'


@pytest.mark.parametrize(
    ("page", "header"), [("verdicts.md", "| oracle |"), ("zh/verdicts.md", "| 参考实现 |")]
)
def test_every_builtin_oracle_has_a_row_in_the_regimes_table(page: str, header: str) -> None:
    """The table of input regimes names every builtin oracle, in English and in Chinese."""
    text = (ROOT / "docs" / page).read_text(encoding="utf-8")
    table = text[text.index(header) :].split("\n\n", 1)[0]
    named = {
        name for row in table.splitlines()[2:] for name in re.findall(r"`(\w+)`", row.split("|")[1])
    }
    missing = [oracle.name for oracle in BUILTINS if oracle.name not in named]
    assert not missing, f"{page}: no regimes row for {', '.join(missing)}"
