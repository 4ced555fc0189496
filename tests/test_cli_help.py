"""``formula-check --help`` and each command's: every argument says what it is, and the top
help says the exit codes, so no option has to be guessed from its name."""

from __future__ import annotations

import argparse

import pytest

from formula_check.faces import cli


def _parsers() -> list[tuple[str, argparse.ArgumentParser]]:
    top = cli.build_parser()
    (commands,) = [a for a in top._actions if isinstance(a, argparse._SubParsersAction)]
    return [("formula-check", top), *commands.choices.items()]


@pytest.mark.parametrize(
    ("name", "parser"), _parsers(), ids=lambda x: x if isinstance(x, str) else ""
)
def test_every_argument_has_help_that_reads_as_a_phrase(
    name: str, parser: argparse.ArgumentParser
) -> None:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            continue
        text = action.help or ""
        assert len(text.split()) >= 2, f"{name} {action.option_strings or action.dest}: {text!r}"
        assert not text.startswith("and "), f"{name} {action.option_strings}: {text!r}"


@pytest.mark.parametrize(
    ("name", "parser"), _parsers()[1:], ids=lambda x: x if isinstance(x, str) else ""
)
def test_every_command_describes_itself_in_its_own_help(
    name: str, parser: argparse.ArgumentParser
) -> None:
    assert parser.description, name
    assert " ".join(parser.description.split()[:4]) in parser.format_help(), name


def test_the_top_help_says_the_version_option_and_the_exit_codes(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit) as stopped:
        cli.main(["--help"])
    assert stopped.value.code == 0
    out = capsys.readouterr().out
    assert "--version   print the version and exit" in out
    for code in ("0", "1", "2"):
        assert f"\n  {code}  " in out
