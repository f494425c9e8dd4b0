"""Session fixtures for the live JupyterLab tests: one Lab server, one headless Chromium.

The server runs on a free loopback port with token and password off, in an isolated
set of Jupyter/JupyterLab/IPython directories under pytest's tmp path, and serves a
temporary COPY of the notebooks folder, so running cells never rewrites the stored
outputs in the repository. Both the server and the browser are stopped however the
session ends.
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from playwright.sync_api import Browser

REPO_ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS_ENV = "SPARSE_OPT_E2E_NOTEBOOKS"
CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-quic",
]
WIDGETS_LAB_EXTENSION = "@jupyter-widgets/jupyterlab-manager"
SERVER_START_TIMEOUT_S = 90.0
SERVER_STOP_TIMEOUT_S = 15.0
# User settings for the test Lab only: no news/update toast covering the page.
LAB_USER_SETTINGS = {
    "@jupyterlab/apputils-extension/notification.jupyterlab-settings": {
        "fetchNews": "false",
        "checkForUpdates": False,
    },
}


def notebooks_dir() -> Path:
    """Folder whose ``*.ipynb`` are tested: the repo's ``notebooks/`` unless overridden.

    The ``SPARSE_OPT_E2E_NOTEBOOKS`` override exists only to develop the test against
    scratch notebooks kept outside the repository.
    """
    override = os.environ.get(NOTEBOOKS_ENV)
    return Path(override).resolve() if override else REPO_ROOT / "notebooks"


def _missing_prerequisites() -> list[str]:
    """Human-readable list of what is missing to run the live tests."""
    missing = []
    if not CHROMIUM.is_file():
        missing.append(f"{CHROMIUM} (install it: apt-get update && apt-get install -y chromium)")
    if importlib.util.find_spec("playwright") is None:
        missing.append(
            f"the Python 'playwright' package (install it: {sys.executable} -m pip install playwright;"
            " no 'playwright install' needed, the tests use Debian's chromium)"
        )
    return missing


@pytest.fixture(scope="session")
def e2e_prerequisites() -> None:
    """Skip (locally) or fail (under ``CI=true``) when Chromium or Playwright is missing."""
    missing = _missing_prerequisites()
    if not missing:
        return
    message = "live JupyterLab tests need " + " and ".join(missing)
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(message + " -- CI must install them", pytrace=False)
    pytest.skip(message)


def _free_loopback_port() -> int:
    """A TCP port on 127.0.0.1 that is free right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _get_json(url: str, timeout: float = 5.0) -> object:
    """GET ``url`` and decode its JSON body."""
    with urllib.request.urlopen(url, timeout=timeout) as response:
        return json.load(response)


def _write_lab_user_settings(settings_dir: Path) -> None:
    """Write the test-only JupyterLab user settings into ``settings_dir``."""
    for relative, content in LAB_USER_SETTINGS.items():
        target = settings_dir / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(json.dumps(content), encoding="utf-8")


@dataclass(frozen=True)
class LabServer:
    """A running JupyterLab server that serves a copy of the notebooks."""

    base_url: str
    log_path: Path

    def log_tail(self, chars: int = 4000) -> str:
        """The end of the server's log, for failure messages."""
        return self.log_path.read_text(encoding="utf-8", errors="replace")[-chars:]

    def shutdown_sessions(self) -> None:
        """Shut down every kernel session, so the next notebook starts from a fresh kernel."""
        sessions = _get_json(f"{self.base_url}/api/sessions")
        assert isinstance(sessions, list)
        for session in sessions:
            request = urllib.request.Request(
                f"{self.base_url}/api/sessions/{session['id']}", method="DELETE"
            )
            with urllib.request.urlopen(request, timeout=30):
                pass


def _stop_process_group(process: subprocess.Popen[bytes]) -> None:
    """SIGTERM the process group (Jupyter then shuts its kernels down), SIGKILL if it hangs."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGTERM)
    try:
        process.wait(timeout=SERVER_STOP_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=SERVER_STOP_TIMEOUT_S)


def _check_widgets_extension(server: LabServer) -> None:
    """Fail unless ipywidgets' JupyterLab extension is among the Lab's active extensions."""
    with urllib.request.urlopen(f"{server.base_url}/lab", timeout=30) as response:
        html = response.read().decode("utf-8")
    start = html.index('id="jupyter-config-data"')
    start = html.index(">", start) + 1
    config = json.loads(html[start : html.index("</script>", start)])
    names = {extension["name"] for extension in config.get("federated_extensions", [])}
    disabled = set(config.get("disabledExtensions", []))
    if WIDGETS_LAB_EXTENSION not in names or WIDGETS_LAB_EXTENSION in disabled:
        pytest.fail(
            f"{WIDGETS_LAB_EXTENSION} (jupyterlab_widgets, ships with ipywidgets 8) is not active"
            f" in the test JupyterLab; active extensions: {sorted(names - disabled)}",
            pytrace=False,
        )


@pytest.fixture(scope="session")
def lab_server(
    e2e_prerequisites: None, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[LabServer]:
    """Start JupyterLab on a free loopback port over a copy of the notebooks; stop it at the end."""
    base = tmp_path_factory.mktemp("jupyterlab")
    root_dir = base / "notebooks"
    shutil.copytree(notebooks_dir(), root_dir, ignore=shutil.ignore_patterns(".ipynb_checkpoints"))
    dirs = {
        name: base / name
        for name in ("config", "data", "runtime", "ipython", "lab-settings", "lab-workspaces")
    }
    for path in dirs.values():
        path.mkdir()
    _write_lab_user_settings(dirs["lab-settings"])
    env = dict(os.environ)
    env.update(
        JUPYTER_CONFIG_DIR=str(dirs["config"]),
        JUPYTER_DATA_DIR=str(dirs["data"]),
        JUPYTER_RUNTIME_DIR=str(dirs["runtime"]),
        IPYTHONDIR=str(dirs["ipython"]),
        # The kernels run in the temporary copy: let them import the repo's package.
        PYTHONPATH=os.pathsep.join(filter(None, [str(REPO_ROOT), os.environ.get("PYTHONPATH")])),
    )
    port = _free_loopback_port()
    log_path = base / "server.log"
    command = [
        sys.executable, "-m", "jupyter", "lab",
        "--no-browser", "--allow-root",
        "--ServerApp.ip=127.0.0.1", f"--ServerApp.port={port}", "--ServerApp.port_retries=0",
        f"--ServerApp.root_dir={root_dir}",
        # Only this throw-away loopback server runs without token, password or XSRF check.
        "--IdentityProvider.token=", "--ServerApp.password=", "--ServerApp.disable_check_xsrf=True",
        f"--LabApp.workspaces_dir={dirs['lab-workspaces']}",
        f"--LabApp.user_settings_dir={dirs['lab-settings']}",
    ]  # fmt: skip
    with log_path.open("wb") as log:
        process = subprocess.Popen(
            command, cwd=root_dir, env=env, stdout=log, stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL, start_new_session=True,
        )  # fmt: skip
    server = LabServer(base_url=f"http://127.0.0.1:{port}", log_path=log_path)
    try:
        deadline = time.monotonic() + SERVER_START_TIMEOUT_S
        while True:
            if process.poll() is not None:
                pytest.fail(
                    f"JupyterLab exited with {process.returncode}:\n{server.log_tail()}", pytrace=False
                )
            try:
                _get_json(f"{server.base_url}/api/status", timeout=2.0)
                break
            except (urllib.error.URLError, ConnectionError, TimeoutError):
                if time.monotonic() > deadline:
                    pytest.fail(
                        f"JupyterLab did not answer /api/status within {SERVER_START_TIMEOUT_S:.0f} s:\n"
                        f"{server.log_tail()}",
                        pytrace=False,
                    )
                time.sleep(0.3)
        _check_widgets_extension(server)
        yield server
    finally:
        _stop_process_group(process)


@pytest.fixture(scope="session")
def browser(e2e_prerequisites: None) -> Iterator[Browser]:
    """One headless Debian Chromium driven by Playwright for the whole session."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(
            executable_path=str(CHROMIUM), args=CHROMIUM_ARGS, headless=True
        )
        try:
            yield chromium
        finally:
            chromium.close()
