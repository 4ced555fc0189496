"""The zygote's conversation with its client, over a Unix socket: one line of text per
request, one JSON object on a line per answer (see :mod:`.zygote`).

The zygote says :class:`ZygoteHello` first; then ``fork HEX`` (two descriptors attached) is
answered by the new worker's pid, and ``wait N`` by a :class:`WaitAnswer`. Both ends are the
same checker (a kept zygote's address names the checker's digest), yet the hello names the
protocol version too: a zygote that speaks another is refused, never half understood.
"""

from __future__ import annotations

import json
import os
import socket
import struct
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from formula_check.messages.fields import Fields
from formula_check.wire import VERSION, ProtocolError

LONGEST_REQUEST = 16384
"""Bytes read per request: ``fork`` with a folder path of up to 8 KiB, hex-encoded."""


@dataclass(frozen=True)
class ZygoteHello:
    """TensorFlow imported (``ok``), or why not."""

    ok: bool
    error: str = ""

    def encode(self) -> dict[str, Any]:
        """The hello's line."""
        said: dict[str, Any] = {"ok": self.ok, "version": VERSION}
        return {**said, "error": self.error} if self.error else said

    @classmethod
    def decode(cls, answer: Mapping[str, Any]) -> ZygoteHello:
        """The hello ``answer`` says; a :class:`ProtocolError` from another version."""
        fields = Fields(answer, "the zygote's hello")
        version = fields.integer("version", 0)
        if version != VERSION:
            raise ProtocolError(f"the zygote speaks version {version}, this checker {VERSION}")
        return cls(fields.flag("ok"), fields.text("error"))


@dataclass(frozen=True)
class WaitAnswer:
    """Has a worker exited: ``running``, or its exit ``status`` (None: nobody knows)."""

    running: bool = False
    status: int | None = None

    def encode(self) -> dict[str, Any]:
        """The answer's line."""
        return {"running": True} if self.running else {"status": self.status}

    @classmethod
    def decode(cls, answer: Mapping[str, Any]) -> WaitAnswer:
        """The answer ``answer`` says."""
        fields = Fields(answer, "a wait answer")
        if fields.optional("running") is True:
            return cls(running=True)
        status = fields.optional("status")
        known = isinstance(status, int) and not isinstance(status, bool)
        return cls(status=status if known else None)


def fork_command(scratch: bytes) -> bytes:
    """``fork`` and the worker's temporary folder (empty: none), hex-encoded."""
    return b"fork" + (b" " + scratch.hex().encode() if scratch else b"") + b"\n"


def send_line(sock: socket.socket, message: Mapping[str, Any]) -> None:
    """One JSON object and a newline."""
    sock.sendall(json.dumps(message).encode() + b"\n")


def read_line(control: socket.socket) -> dict[str, Any]:
    """One JSON object the zygote wrote on a line; ValueError if it hung up or wrote
    anything else."""
    line = b""
    while not line.endswith(b"\n"):
        chunk = control.recv(4096)
        if not chunk:
            raise ValueError("the zygote hung up")
        line += chunk
    answer = json.loads(line)
    if not isinstance(answer, dict):
        raise ValueError(f"unexpected answer {line!r}")
    return answer


def read_pid(control: socket.socket) -> int:
    """The pid of the worker the zygote just forked; ValueError if it said anything else."""
    try:
        return Fields(read_line(control), "a fork answer").integer("pid")
    except ProtocolError as exc:
        raise ValueError(str(exc)) from None


def peer_is_us(connection: socket.socket) -> bool:
    """Does the process at the other end of a Unix socket run as our user?"""
    try:
        credentials = connection.getsockopt(
            socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i")
        )
    except OSError:
        return False
    _, uid, _ = struct.unpack("3i", credentials)
    return bool(uid == os.getuid())
