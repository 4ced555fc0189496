"""JupyterLab next to ``mkdocs serve`` in the image, tested without a Docker engine.

The entry point's ``lab``, ``serve+lab`` and ``health`` modes run here against stand-in
``mkdocs`` and ``jupyter`` commands that write down their arguments and the signals they get;
where JupyterLab is installed, the real one is started too, next to a real ``mkdocs serve``.
"""

from __future__ import annotations

import http.server
import importlib.util
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
ENTRYPOINT = ROOT / "docker" / "entrypoint.sh"
JUPYTER_CONFIG = ROOT / "docker" / "jupyter"

# A stand-in server. FAKE_<NAME> says how it behaves: "serve" (the default) waits for a signal
# and exits 0 on SIGINT or SIGTERM; "exit=N" exits N (once the file FAKE_WAIT_FOR, if named,
# is there); "stubborn" ignores both signals.
FAKE = """\
import json, os, signal, sys, time
name = os.path.basename(sys.argv[0])
log = os.environ["FAKE_LOG"]
behaviour = os.environ.get("FAKE_" + name.upper(), "serve")

def stopped(signum, frame):
    with open(os.path.join(log, name + ".signal"), "w") as out:
        out.write(signal.Signals(signum).name)
    sys.exit(0)

for signum in (signal.SIGINT, signal.SIGTERM):
    signal.signal(signum, signal.SIG_IGN if behaviour == "stubborn" else stopped)
with open(os.path.join(log, name + ".pid"), "w") as out:
    out.write(str(os.getpid()))
with open(os.path.join(log, name + ".json"), "w") as out:  # written once the handlers are in
    json.dump({"argv": sys.argv[1:], "cwd": os.getcwd()}, out)
if behaviour.startswith("exit="):
    while not os.path.exists(os.environ.get("FAKE_WAIT_FOR", os.devnull)):
        time.sleep(0.01)
    sys.exit(int(behaviour[5:]))
while True:
    signal.pause()
"""


@pytest.fixture
def project(tmp_path: Path) -> Path:
    docs = tmp_path / "project"
    docs.mkdir()
    (docs / "mkdocs.yml").write_text("site_name: x\n")
    return docs


@pytest.fixture
def log(tmp_path: Path) -> Path:
    folder = tmp_path / "log"
    folder.mkdir()
    return folder


@pytest.fixture
def env(tmp_path: Path, project: Path, log: Path) -> dict[str, str]:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name in ("mkdocs", "jupyter"):
        tool = bin_dir / name
        tool.write_text(f"#!{sys.executable}\n{FAKE}")
        tool.chmod(0o755)
    health = tmp_path / "tmp"
    health.mkdir()
    return {
        **os.environ,
        "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}",
        "FORMULA_CHECK_DOCS": str(project),
        "FAKE_LOG": str(log),
        "TMPDIR": str(health),
    }


STARTED: list[subprocess.Popen[str]] = []
"""The entry points this test started, ended after it however it ended (see below)."""


def start(args: list[str], env: dict[str, str]) -> subprocess.Popen[str]:
    process = subprocess.Popen(
        ["sh", str(ENTRYPOINT), *args],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    STARTED.append(process)
    return process


@pytest.fixture(autouse=True)
def nothing_left_running() -> Iterator[None]:
    """A test that fails before it stops its servers must not leave them running: two stop
    signals make the entry point kill both at once (the second one kills)."""
    yield
    while STARTED:
        process = STARTED.pop()
        for _ in range(2):
            if process.poll() is None:
                process.send_signal(signal.SIGINT)
                time.sleep(0.2)
        try:
            process.communicate(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.communicate()


def run(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["sh", str(ENTRYPOINT), *args], env=env, capture_output=True, text=True, check=False
    )


def until(condition: Callable[[], bool], seconds: float = 15) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.02)


def recorded(log: Path, name: str) -> dict[str, object]:
    until(lambda: (log / f"{name}.json").exists() and (log / f"{name}.json").stat().st_size > 0)
    return json.loads((log / f"{name}.json").read_text())


def signal_of(log: Path, name: str) -> str | None:
    path = log / f"{name}.signal"
    return path.read_text() if path.exists() else None


def reaped(pid: int) -> bool:
    """Whether a stand-in server has ended and been waited for (a zombie still answers)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


def finish(process: subprocess.Popen[str]) -> tuple[int, str]:
    _, stderr = process.communicate(timeout=20)
    return process.returncode, stderr


def test_lab_alone_starts_in_the_project_with_the_callers_flags(
    project: Path, log: Path, env: dict[str, str]
) -> None:
    env["FAKE_JUPYTER"] = "exit=0"
    result = run(["lab", "--IdentityProvider.token=abc"], env)
    assert result.returncode == 0, result.stderr
    seen = recorded(log, "jupyter")
    assert seen == {"argv": ["lab", "--IdentityProvider.token=abc"], "cwd": str(project)}


def test_both_start_with_their_own_flags_and_a_stop_signal_reaches_each_once(
    project: Path, log: Path, env: dict[str, str]
) -> None:
    process = start(["serve+lab", "--dirty", "--", "--ServerApp.port=9999"], env)
    mkdocs, jupyter = recorded(log, "mkdocs"), recorded(log, "jupyter")
    config = str(project / "mkdocs.yml")
    assert mkdocs["argv"] == [
        "serve", "--config-file", config, "--dev-addr", "0.0.0.0:8000", "--dirty",
    ]  # fmt: skip
    assert jupyter == {"argv": ["lab", "--ServerApp.port=9999"], "cwd": str(project)}
    process.send_signal(signal.SIGTERM)
    code, stderr = finish(process)
    assert code == 128 + signal.SIGTERM
    assert signal_of(log, "mkdocs") == "SIGINT"  # MkDocs' graceful way out
    assert signal_of(log, "jupyter") == "SIGTERM"  # Jupyter Server's
    assert stderr == ""


def test_ctrl_c_stops_both(log: Path, env: dict[str, str]) -> None:
    process = start(["serve+lab"], env)
    recorded(log, "mkdocs")
    recorded(log, "jupyter")
    process.send_signal(signal.SIGINT)
    code, _ = finish(process)
    assert code == 128 + signal.SIGINT
    assert (signal_of(log, "mkdocs"), signal_of(log, "jupyter")) == ("SIGINT", "SIGTERM")


@pytest.mark.parametrize(
    ("fails", "survivor", "its_signal", "message"),
    [
        ("mkdocs", "jupyter", "SIGTERM", "mkdocs serve exited with status 3; stopping JupyterLab"),
        ("jupyter", "mkdocs", "SIGINT", "JupyterLab exited with status 3; stopping mkdocs serve"),
    ],
)
def test_when_one_fails_the_other_is_stopped_and_its_status_is_the_exit_status(
    log: Path, env: dict[str, str], fails: str, survivor: str, its_signal: str, message: str
) -> None:
    env[f"FAKE_{fails.upper()}"] = "exit=3"
    env["FAKE_WAIT_FOR"] = str(log / f"{survivor}.json")  # fails once the other one is up
    process = start(["serve+lab"], env)
    code, stderr = finish(process)
    assert code == 3
    assert signal_of(log, survivor) == its_signal
    assert stderr == f"formula-check: {message}\n"


def test_a_server_that_ignores_its_stop_signal_is_killed(log: Path, env: dict[str, str]) -> None:
    env |= {"FAKE_MKDOCS": "stubborn", "FORMULA_CHECK_STOP_TIMEOUT": "1"}
    process = start(["serve+lab"], env)
    recorded(log, "mkdocs")
    recorded(log, "jupyter")
    began = time.monotonic()
    process.send_signal(signal.SIGTERM)
    code, stderr = finish(process)
    assert code == 128 + signal.SIGTERM
    assert 1 <= time.monotonic() - began < 10
    assert stderr == "formula-check: killing mkdocs serve: it did not stop within 1 s\n"
    assert signal_of(log, "jupyter") == "SIGTERM"


def test_a_second_stop_signal_kills_at_once(log: Path, env: dict[str, str]) -> None:
    env |= {"FAKE_MKDOCS": "stubborn", "FORMULA_CHECK_STOP_TIMEOUT": "30"}
    process = start(["serve+lab"], env)
    recorded(log, "mkdocs")
    recorded(log, "jupyter")
    jupyter = int((log / "jupyter.pid").read_text())
    process.send_signal(signal.SIGINT)
    until(lambda: signal_of(log, "jupyter") == "SIGTERM")  # the first one was taken
    until(lambda: reaped(jupyter))  # and JupyterLab is gone: only mkdocs is left
    began = time.monotonic()
    process.send_signal(signal.SIGINT)
    code, stderr = finish(process)
    assert code == 128 + signal.SIGINT
    assert time.monotonic() - began < 10
    assert stderr == "formula-check: killing mkdocs serve: a second stop signal came\n"


def test_serve_and_lab_without_a_project_explain_the_mount(
    project: Path, log: Path, env: dict[str, str]
) -> None:
    (project / "mkdocs.yml").unlink()
    result = run(["serve+lab"], env)
    assert result.returncode == 2
    assert "no mkdocs.yml in" in result.stderr and '-v "$PWD:/docs"' in result.stderr
    assert list(log.iterdir()) == []


@pytest.fixture
def http_port() -> Iterator[int]:
    """A port where a small HTTP server answers 404 to everything."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), http.server.BaseHTTPRequestHandler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server.server_address[1]
    server.shutdown()
    server.server_close()
    thread.join()


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def test_health_asks_each_server_this_container_started(
    env: dict[str, str], http_port: int
) -> None:
    assert run(["health"], env).returncode == 0  # a container that only checks has none
    env |= {"FAKE_MKDOCS": "exit=0", "FAKE_JUPYTER": "exit=0"}
    env |= {"FORMULA_CHECK_ADDR": f"0.0.0.0:{http_port}", "JUPYTER_PORT": str(http_port)}
    assert run(["serve+lab"], env).returncode == 0
    health = Path(env["TMPDIR"]) / "formula-check-health"
    assert (health / "mkdocs").read_text() == f"http://127.0.0.1:{http_port}/\n"
    assert (health / "jupyterlab").read_text() == f"http://127.0.0.1:{http_port}/api\n"
    assert run(["health"], env).returncode == 0  # an error page is an answer

    env["JUPYTER_PORT"] = str(free_port())
    assert run(["lab"], env).returncode == 0
    result = run(["health"], env)
    assert result.returncode == 1
    assert result.stderr.startswith(f"formula-check: http://127.0.0.1:{env['JUPYTER_PORT']}/api")
    assert "does not answer" in result.stderr


def test_jupyter_config_binds_every_address_and_never_moves_the_port() -> None:
    config = json.loads((JUPYTER_CONFIG / "jupyter_server_config.json").read_text())
    assert config == {"ServerApp": {"ip": "0.0.0.0", "open_browser": False, "port_retries": 0}}


def test_dockerfile_installs_jupyterlab_and_bakes_no_secret() -> None:
    text = (ROOT / "Dockerfile").read_text()
    assert '"./[docs,notebook${EXTRA:+,${EXTRA}}]"' in text  # the extra, when one is given
    assert '"jupyterlab>=4,<5"' in text and '"ipykernel>=6"' in text
    assert "EXPOSE 8000 8888" in text
    assert "docker/jupyter/jupyter_server_config.json /etc/jupyter/" in text
    assert "docker/entrypoint.sh docker/together.py" in text
    assert 'CMD ["serve"]' in text and '"health"]' in text
    lowered = text.lower()
    assert "token=" not in lowered and "password" not in lowered


# --- the real JupyterLab and the real MkDocs ------------------------------------------------

needs_jupyterlab = pytest.mark.skipif(
    importlib.util.find_spec("jupyterlab") is None, reason="JupyterLab is not installed"
)


def answers(url: str, headers: dict[str, str] | None = None) -> int | None:
    request = urllib.request.Request(url, headers=headers or {})
    try:
        with urllib.request.urlopen(request, timeout=2) as response:
            return int(response.status)
    except urllib.error.HTTPError as error:
        return error.code
    except OSError:
        return None


def listens_on_every_address(port: int) -> bool:
    """Whether a socket listens on 0.0.0.0:port (Linux: /proc/net/tcp, state 0A)."""
    rows = Path("/proc/net/tcp").read_text().splitlines()[1:]
    return any(row.split()[1] == f"00000000:{port:04X}" and row.split()[3] == "0A" for row in rows)


@needs_jupyterlab
@pytest.mark.site
def test_real_jupyterlab_next_to_real_mkdocs_serve(tmp_path: Path, project: Path) -> None:
    (project / "docs").mkdir()
    (project / "docs" / "index.md").write_text("# Home\n")
    serve_port, lab_port = free_port(), free_port()
    env = {
        **os.environ,
        "FORMULA_CHECK_DOCS": str(project),
        "FORMULA_CHECK_ADDR": f"0.0.0.0:{serve_port}",
        "TMPDIR": str(tmp_path),
        # the image's settings: its config folder, a port and a token from the environment
        "JUPYTER_CONFIG_PATH": str(JUPYTER_CONFIG),
        "JUPYTER_PORT": str(lab_port),
        "JUPYTER_TOKEN": "not-a-secret",
        # nothing of this machine's own Jupyter setup, nothing written outside tmp_path
        "JUPYTER_CONFIG_DIR": str(tmp_path / "jupyter-config"),
        "JUPYTER_DATA_DIR": str(tmp_path / "jupyter-data"),
        "JUPYTER_RUNTIME_DIR": str(tmp_path / "jupyter-runtime"),
        "JUPYTERLAB_SETTINGS_DIR": str(tmp_path / "lab-settings"),
        "JUPYTERLAB_WORKSPACES_DIR": str(tmp_path / "lab-workspaces"),
        "IPYTHONDIR": str(tmp_path / "ipython"),
    }
    lab_args = ["--allow-root"] if os.geteuid() == 0 else []  # the image runs as uid 1000
    output = tmp_path / "output.txt"
    with output.open("w") as sink:
        process = subprocess.Popen(
            ["sh", str(ENTRYPOINT), "serve+lab", "--", *lab_args],
            env=env,
            stdout=sink,
            stderr=subprocess.STDOUT,
        )
    try:
        until(lambda: answers(f"http://127.0.0.1:{lab_port}/api") == 200, seconds=60)
        until(lambda: answers(f"http://127.0.0.1:{serve_port}/") == 200, seconds=60)
        status = f"http://127.0.0.1:{lab_port}/api/status"
        assert answers(status) == 403  # the token is asked for...
        assert answers(status, {"Authorization": "token not-a-secret"}) == 200  # ...and taken
        specs = urllib.request.Request(
            f"http://127.0.0.1:{lab_port}/api/kernelspecs",
            headers={"Authorization": "token not-a-secret"},
        )
        with urllib.request.urlopen(specs, timeout=5) as response:
            assert "python3" in json.load(response)["kernelspecs"]  # where %load_ext runs
        assert listens_on_every_address(lab_port) and listens_on_every_address(serve_port)
        assert run(["health"], env).returncode == 0
        process.send_signal(signal.SIGTERM)
        process.wait(timeout=20)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    logged = output.read_text()
    assert process.returncode == 128 + signal.SIGTERM, logged
    assert "INFO    -  Shutting down..." in logged  # MkDocs' own way out of a Ctrl-C
    assert "received signal 15, stopping" in logged  # Jupyter Server's
    assert answers(f"http://127.0.0.1:{lab_port}/api") is None
    assert answers(f"http://127.0.0.1:{serve_port}/") is None
