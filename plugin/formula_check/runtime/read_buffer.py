"""A buffer the warm worker reads its messages into, kept from one message to the next and
left out of every process it forks.

A warm worker reads each request whole before it sends it on, and each answer whole before
it passes it on (:mod:`.isolation`): megabytes a check, of weights and outputs. Read into a
fresh buffer each time, every page of it is new memory, faulted in and zeroed by the kernel,
for each message. Kept, its pages are faulted in once. But a page the warm worker holds when
it forks is shared with the child until one of them writes to it, and the warm worker writes
to this one with every message: kept as ordinary memory, each write after a fork would copy
the page first. So the buffer is mapped on its own and marked not to be inherited (Linux's
``MADV_DONTFORK``): a check's process has no such pages at all, so no copy is made, and no
check's process can read what an earlier check sent or answered. (Elsewhere it is an
ordinary mapping, inherited as the rest.)

Only the warm worker uses one, from one thread. States: *empty* (nothing mapped), *mapped*
(a buffer as large as the largest message yet; a larger one maps a larger buffer, and the
old one goes once no view of it is left).
"""

from __future__ import annotations

import mmap

_PAGE = mmap.PAGESIZE
_RESERVED = 64 << 20
"""Bytes mapped at the least: address space only, until a read writes to them; so that the
buffer seldom grows, which copies what was read so far."""


class Unshared:
    """One growing buffer, not inherited by a forked child; :meth:`room` lends views of it.
    A view lent before is overwritten by the next use: a message read into it is passed on
    before the next one is read."""

    def __init__(self) -> None:
        self._buffer: mmap.mmap | None = None

    def room(self, size: int, keep: int = 0) -> memoryview:
        """``size`` writable bytes at the start of the buffer; the first ``keep`` of them as
        they were (the message read so far), also when a larger buffer is mapped."""
        if size < 0 or keep > size:
            raise ValueError(f"no room of {size} bytes keeping {keep}")
        old = self._buffer
        if old is None or len(old) < size:
            grown = _mapped(size)
            if old is not None and keep:
                with memoryview(grown) as to, memoryview(old) as since:
                    to[:keep] = since[:keep]  # one copy: no bytes made of it on the way
            self._buffer = grown
        assert self._buffer is not None
        return memoryview(self._buffer)[:size]

    @property
    def mapped(self) -> int:
        """How many bytes are mapped now (0 when empty)."""
        return 0 if self._buffer is None else len(self._buffer)


def _mapped(size: int) -> mmap.mmap:
    """A private anonymous mapping of at least ``size`` bytes (whole pages, and
    :data:`_RESERVED` at the least), its pages left out of forked children where the system
    can."""
    length = max(_RESERVED, -(-size // _PAGE) * _PAGE)
    buffer = mmap.mmap(-1, length, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    dontfork = getattr(mmap, "MADV_DONTFORK", None)
    if dontfork is not None:
        buffer.madvise(dontfork)
    return buffer
