"""`mkdocs serve` lives through bad blocks: each edit shows up as a card, the server stays up,
and the TensorFlow worker started for the first build is the one that serves every rebuild."""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from support import worker_pids

pytestmark = [pytest.mark.tf, pytest.mark.site]

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "sites" / "zh"
GOOD_LINE = (
    "    weights = tf.nn.softmax(scores, axis=-1)\n    return tf.matmul(weights, v), weights\n"
)


MOUNT = "zh/"  # the path of the fixture's site_url, where mkdocs serve puts the site


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def fetch(url: str) -> str | None:
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            return str(response.read().decode("utf-8"))
    except OSError:
        return None


def wait_for(what: str, probe: Callable[[], bool], seconds: float = 120.0) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if probe():
            return
        time.sleep(0.3)
    pytest.fail(f"timed out waiting for {what}")


def holds(folder: Path, name: str) -> bool:
    """Whether a file called ``name`` is somewhere in ``folder``; a check's folder may be
    removed while it is looked through."""
    try:
        return any(folder.rglob(name))
    except OSError:
        return False


def copy_fixture(tmp_path: Path) -> Path:
    project = tmp_path / "zh"
    shutil.copytree(FIXTURE, project, ignore=shutil.ignore_patterns("site", ".cache"))
    config = project / "mkdocs.yml"  # one worker, whatever the cores: the tests follow it
    text = config.read_text(encoding="utf-8")
    config.write_text(
        text.replace("  - formula-check\n", "  - formula-check:\n      workers: 1\n"),
        encoding="utf-8",
    )
    return project


def stop(server: subprocess.Popen[str]) -> None:
    """Ctrl-C, as a user stops it; killed if it does not end within 20 s."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(server.pid, signal.SIGINT)
    try:
        server.wait(timeout=20)
    except subprocess.TimeoutExpired:
        os.killpg(server.pid, signal.SIGKILL)
        server.wait()


def first_build_served(server: subprocess.Popen[str], url: str, marker: str) -> bool:
    """Wait until ``server`` serves its first build (True), or exits first (False): the port
    was taken between probing it and binding it. A file only this project holds tells our
    server from another one that took the port."""
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if server.poll() is not None:
            return False
        if fetch(url + MOUNT + "serve-marker.txt") == marker and "fc-card" in (fetch(url) or ""):
            return True
        time.sleep(0.3)
    pytest.fail("timed out waiting for the first build")


@contextlib.contextmanager
def serving(
    project: Path, log: Path | None = None, temporary: Path | None = None
) -> Iterator[tuple[str, subprocess.Popen[str]]]:
    """``mkdocs serve`` of ``project`` after its first build (what it logs into ``log``, if
    given; its temporary files, each check's folder among them, in ``temporary``, if given);
    Ctrl-C at the end."""
    marker = uuid.uuid4().hex
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    if temporary is not None:
        temporary.mkdir(exist_ok=True)
        env["TMPDIR"] = str(temporary)
    (project / "docs" / "serve-marker.txt").write_text(marker, encoding="utf-8")
    for _ in range(5):
        port = free_port()
        logged = log.open("w", encoding="utf-8") if log is not None else subprocess.DEVNULL
        server = subprocess.Popen(
            [sys.executable, "-m", "mkdocs", "serve", "-a", f"127.0.0.1:{port}"],
            cwd=project,
            stdout=subprocess.DEVNULL,
            stderr=logged,
            text=True,
            start_new_session=True,
            env=env,
        )
        if log is not None:
            logged.close()  # the server has its own copy
        url = f"http://127.0.0.1:{port}/"
        try:
            if first_build_served(server, url, marker):
                break
        except BaseException:
            stop(server)
            raise
        stop(server)
    else:
        pytest.fail("mkdocs serve found no free port in 5 tries")
    try:
        yield url, server
    finally:
        stop(server)


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[Path, str, subprocess.Popen[str]]]:
    project = copy_fixture(tmp_path)
    with serving(project, temporary=tmp_path / "temporary") as (url, server):
        yield project, url, server


def card_status(url: str, block: str) -> str:
    page = fetch(url) or ""
    match = re.search(rf'id="fc-{re.escape(block)}" data-fc-status="([a-z_]+)"', page)
    return match.group(1) if match else ""


def test_serve_survives_bad_blocks_and_recovers(
    served: tuple[Path, str, subprocess.Popen[str]],
) -> None:
    project, url, server = served
    page = project / "docs" / "index.md"
    workers = worker_pids(project.resolve())
    assert len(workers) == 1, "one warm worker after the first build"
    original = page.read_text(encoding="utf-8")
    assert GOOD_LINE in original
    assert card_status(url, "注意力") == "verified"

    page.write_text(
        original.replace(GOOD_LINE, "    raise ValueError('<b>boom</b>')\n", 1), encoding="utf-8"
    )
    wait_for("the error card", lambda: card_status(url, "注意力") == "error")
    html = fetch(url) or ""
    assert "&lt;b&gt;boom&lt;/b&gt;" in html and "<b>boom</b>" not in html

    page.write_text(
        original.replace('timing="off"', 'timing="off" dimz="b=2"', 1), encoding="utf-8"
    )
    wait_for(
        "the header error card",
        lambda: (
            "unknown option &#x27;dimz&#x27;" in (fetch(url) or "")
            or "unknown option 'dimz'" in (fetch(url) or "")
        ),
    )

    page.write_text(original, encoding="utf-8")
    wait_for("the fixed block", lambda: card_status(url, "注意力") == "verified")
    assert server.poll() is None, "the server is still running"
    assert worker_pids(project.resolve()) == workers, "TensorFlow stayed loaded in the same worker"


def test_serve_starts_the_worker_after_a_first_build_served_from_the_cache(
    tmp_path: Path,
) -> None:
    """Every block cached: the first build runs no snippet, and the worker starts right after
    it, so that the first edit of a block does not wait for the TensorFlow import."""
    project = copy_fixture(tmp_path)
    subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "-q"],
        cwd=project,
        check=True,
        capture_output=True,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
    )
    assert not worker_pids(project.resolve()), "the build's worker is gone"
    with serving(project) as (url, server):
        assert "缓存结果" in (fetch(url) or ""), "the first build came from the cache"
        wait_for("a worker started in the background", lambda: bool(worker_pids(project.resolve())))
        workers = worker_pids(project.resolve())
        assert len(workers) == 1
        page = project / "docs" / "index.md"
        original = page.read_text(encoding="utf-8")
        page.write_text(
            original.replace(GOOD_LINE, "    raise ValueError('edited')\n", 1), encoding="utf-8"
        )
        wait_for("the edited block's card", lambda: card_status(url, "注意力") == "error")
        assert worker_pids(project.resolve()) == workers, "the edit used the started worker"
        assert server.poll() is None


def test_an_edit_stops_a_check_still_running_instead_of_waiting_for_its_timeout(
    served: tuple[Path, str, subprocess.Popen[str]], tmp_path: Path
) -> None:
    """A slip that makes a snippet loop forever, saved: pages wait for that build. Saving the
    fix stops the running check at once, rather than after the block's 300 s timeout.

    The snippet tells it has started by a file in its own temporary folder, the one place a
    confined check may write (a file anywhere else would never land); the server's
    temporary files, that folder among them, are in ``tmp_path``."""
    project, url, server = served
    page = project / "docs" / "index.md"
    original = page.read_text(encoding="utf-8")
    looping = (
        "    import tempfile\n"
        "    open(tempfile.gettempdir() + '/loop-started', 'w').close()\n"
        "    while True:\n        pass\n"
    )
    page.write_text(
        original.replace(GOOD_LINE, looping, 1).replace(
            'timing="off"', 'timing="off" timeout="300"', 1
        ),
        encoding="utf-8",
    )
    temporary = tmp_path / "temporary"
    wait_for("the looping check to start", lambda: holds(temporary, "loop-started"))
    page.write_text(original, encoding="utf-8")
    wait_for("the fixed block", lambda: card_status(url, "注意力") == "verified", seconds=120)
    assert server.poll() is None, "the server is still running"
