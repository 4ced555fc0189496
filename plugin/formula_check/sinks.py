r"""Any string made safe for the place it is written to: a UTF-8 file, markup, a log line.

A snippet's exception text, its printed output, an output's name and a page's file name are
open-ended: a lone surrogate (``"\ud800"``) cannot be encoded as UTF-8, a C0 control
character makes XML not well-formed, a terminal escape resets the reader's screen, and a line
starting ``::`` or holding ``##[`` is a workflow command to a GitHub runner reading a log.
Every writer passes what it writes through :func:`for_sink` once, for its sink, and a
character that cannot go there is shown by a visible stand-in rather than dropped or
allowed to break the output: U+FFFD for a lone surrogate, a control picture (``␁``, ``␛``)
for a control character.
"""

from __future__ import annotations

import enum
import logging
import re

# Keras 3 puts colours in error strings even off a terminal; a snippet may print any escape.
# ECMA-48's escape sequences, all of them: what is not one (a lone ESC) is left for a sink to
# show (:func:`for_sink`).
_ANSI = re.compile(
    r"\x1b(?:\[[0-?]*[ -/]*[@-~]"  # CSI: colours, cursor moves
    r"|[\]PX^_][^\x07\x1b]*(?:\x07|\x1b\\)"  # OSC, DCS, SOS, PM, APC: a string up to BEL or ST
    r"|[ -/]*[0-~])"  # every other escape: ``ESC c`` (a full reset), ``ESC 7``, ``ESC ( B``
)


def strip_ansi(text: str) -> str:
    """``text`` without terminal escape sequences."""
    return _ANSI.sub("", text)


REPLACEMENT = "\ufffd"
"""What a character that no sink can hold (a lone surrogate) is shown as."""


class Sink(enum.Enum):
    """Where a text goes, and so which characters it may hold."""

    UTF8 = "utf8"
    """A UTF-8 file whose format escapes what it must itself (JSON)."""
    MARKUP = "markup"
    """XML or HTML: characters XML 1.0 has no place for are shown by stand-ins."""
    LINE = "line"
    """Text a person or a CI runner reads (a terminal, a log, an annotation): no terminal
    escapes, no control character but tab and newline, no workflow command."""


_SURROGATES = re.compile("[\ud800-\udfff]")
# XML 1.0's Char production leaves out C0 but tab, newline and carriage return, the
# surrogates, U+FFFE and U+FFFF; HTML calls C1 controls and DEL parse errors.
_NOT_MARKUP = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\ud800-\udfff\ufffe\uffff]")
# A terminal or a log: any control character but tab and newline (a lone carriage return,
# backspace or bell lets a line overwrite or hide what came before it).
_NOT_LINE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\ud800-\udfff\ufffe\uffff]")
_LINE_ENDS = re.compile(r"\r\n|\r")


def _stand_in(match: re.Match[str]) -> str:
    """A control character's picture (U+2400 + its code, DEL U+2421), else U+FFFD."""
    code = ord(match.group())
    if code < 0x20:
        return chr(0x2400 + code)
    return "\u2421" if code == 0x7F else REPLACEMENT


def for_sink(text: str, sink: Sink) -> str:
    """``text`` as ``sink`` can hold it: what it cannot is shown by a stand-in."""
    if sink is Sink.UTF8:
        return _SURROGATES.sub(REPLACEMENT, text)
    if sink is Sink.MARKUP:
        return _NOT_MARKUP.sub(_stand_in, text)
    lines = _LINE_ENDS.sub("\n", strip_ansi(text))
    return no_workflow_commands(_NOT_LINE.sub(_stand_in, lines))


def no_workflow_commands(text: str) -> str:
    """``text`` with no line a GitHub runner would run as a workflow command, so that a
    snippet's error message cannot forge an annotation or mask a secret. The runner reads a
    line that starts with ``::`` (after blanks) as one, and the older ``##[command]``
    anywhere in a line; a zero-width space breaks both. Lone carriage returns end lines
    there too. Other characters are kept (our own colours in a summary)."""
    return "\n".join(
        (line.replace("::", ":\u200b:", 1) if line.lstrip().startswith("::") else line).replace(
            "##[", "#\u200b#["
        )
        for line in _LINE_ENDS.sub("\n", text).split("\n")
    )


class SafeLines(logging.Filter):
    """A logger's filter: every record's message as a :attr:`Sink.LINE` (a build's log is
    read by a terminal and, in CI, by the runner)."""

    def filter(self, record: logging.LogRecord) -> bool:
        """Rewrite ``record``'s message in place; every record passes."""
        record.msg = for_sink(record.getMessage(), Sink.LINE)
        record.args = None
        return True
