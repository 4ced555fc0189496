"""The client's end of a zygote kept alive between runs (``keep_alive`` seconds).

It connects to the zygote listening for this project, Python, checker and environment
(:func:`.kept_socket.kept_address`), starting one if none answers. Closing hangs up: the
zygote's handler for this connection then stops this client's workers, and the zygote stays
for the next run. Where no zygote can be kept (no private folder, a full disk) the client
becomes ``private``: a zygote of its own, as without ``keep_alive``. Its states are those of
:class:`.zygote_client.Zygote`.
"""

from __future__ import annotations

import contextlib
import fcntl
import socket
import subprocess
from pathlib import Path

from formula_check.errors import MissingTensorFlowError, WorkerError
from formula_check.runtime.control import peer_is_us
from formula_check.runtime.environment import worker_environment
from formula_check.runtime.kept_socket import NoKeptPlaceError, connect, kept_address, private_open
from formula_check.runtime.limits import STARTUP_TIMEOUT
from formula_check.runtime.zygote_client import CLOSED, Zygote, ZygoteState


class KeptZygote(Zygote):
    """The client's end of a kept zygote; see the module's docstring."""

    def __init__(
        self,
        root: Path,
        python: str | None = None,
        keep_alive: float = 0.0,
        env: tuple[str, ...] = (),
    ) -> None:
        super().__init__(root, python, env)
        self.keep_alive = keep_alive
        self.private = False
        """No place to keep a zygote: this run has a zygote of its own, as without keep_alive."""

    def _started(self) -> socket.socket:
        if self.private:
            return super()._started()
        if self.closed:
            raise WorkerError(CLOSED)
        if self.failed:
            raise WorkerError(self.failed)
        if self.control is not None:
            return self.control  # one gone stops answering: lost() clears it, and we reconnect
        try:
            address = kept_address(self.root, self.python, self.keep_alive, self.env)
            return self._connected(address)
        except (OSError, NoKeptPlaceError):  # no usable folder, a full disk...
            self.stop()
            self.private = True
            return super()._started()

    def _connected(self, address: Path) -> socket.socket:
        for last in (False, True):
            started = False
            with private_open(address.parent / "start.lock") as lock:
                fcntl.flock(lock, fcntl.LOCK_EX)  # one starter at a time
                control = connect(address)
                if control is None:
                    control, started = self._start(address), True
            self.control = control  # now closing the pool can end the wait for its hello
            if self.closed:
                self.stop()
                raise WorkerError(CLOSED)
            if not peer_is_us(control):
                self.give_up(f"{address} is served by another user: not using it")
                raise WorkerError(self.failed)
            try:
                return self._greeted(control)
            except MissingTensorFlowError:
                raise
            except WorkerError:
                if last or started or self.closed:
                    raise
                self.state, self.why_broken = ZygoteState.NONE, ""  # it died as we connected:
                # connect again (or start), once
        raise AssertionError("unreachable")  # pragma: no cover

    def _start(self, address: Path) -> socket.socket:
        with contextlib.suppress(FileNotFoundError):
            address.unlink()  # a socket nobody listens on: its zygote is gone
        log = address.with_suffix(".log")
        with private_open(log) as stderr:
            starter = subprocess.Popen(
                [
                    *(self.python, "-m", "formula_check.runtime.zygote", str(self.root)),
                    *("--listen", str(address), "--idle", f"{self.keep_alive:g}"),
                ],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=stderr,
                cwd=self.root,
                env=worker_environment(self.env),
                start_new_session=True,
            )
            try:
                code = starter.wait(STARTUP_TIMEOUT)
            except subprocess.TimeoutExpired:
                starter.kill()
                code = starter.wait()
        control = connect(address)
        if control is None:
            self.give_up(f"the kept-alive zygote did not start (exit {code}); see {log}")
            raise WorkerError(self.failed)
        return control
