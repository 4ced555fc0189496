"""A worker's stderr: a scratch file that the worker and every check's process append to,
read back (its end, TensorFlow's noise left out) when one of them dies.

Opened afresh for each process of the worker (:meth:`StderrLog.fresh`); a close may come
from another thread (Ctrl-C) while a check reads it, so each method takes the log's lock.
"""

from __future__ import annotations

import fcntl
import os
import tempfile
import threading
from typing import IO


class StderrLog:
    """One worker's stderr file; see the module's docstring."""

    def __init__(self) -> None:
        self._file: IO[bytes] | None = None
        self._lock = threading.Lock()

    @property
    def is_open(self) -> bool:
        """Is there a log (a process of the worker may be writing to it)?"""
        return self._file is not None

    def fresh(self) -> IO[bytes]:
        """Close the last log; a new one, for a new process."""
        with self._lock:
            self._close()
            log = self._file = tempfile.TemporaryFile()  # noqa: SIM115  (lives with the process)
            # Appended to by every check's process: none can move where the next one writes
            flags = fcntl.fcntl(log.fileno(), fcntl.F_GETFL)
            fcntl.fcntl(log.fileno(), fcntl.F_SETFL, flags | os.O_APPEND)
            return log

    def close(self) -> None:
        """Close the log (what it held is gone)."""
        with self._lock:
            self._close()

    def _close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None

    def size(self) -> int:
        """Bytes written so far (0 without a log)."""
        with self._lock:
            return 0 if self._file is None else os.fstat(self._file.fileno()).st_size

    def tail(self, limit: int = 1500, since: int = 0) -> str:
        """The end of what was written from byte ``since`` on (another check's lines are not
        this one's to show); TensorFlow noise filtered out."""
        with self._lock:
            if self._file is None:
                return ""
            self._file.seek(since)
            text = self._file.read().decode("utf-8", "replace")
        useful = [
            line
            for line in text.splitlines()
            if line.strip() and " I tensorflow/" not in line and "W0000" not in line
        ]
        return "\n".join(useful)[-limit:]
