"""A real JupyterLab (with real-time collaboration) on 127.0.0.1 for tests, and a browser on it.

:class:`LabServer` runs ``jupyter lab`` from its own venv (``make lab-venv``, ``$LAB_VENV``,
default ``.venv-lab``: jupyterlab, jupyter-collaboration, ipykernel, pandas) on a free
loopback port with a token, its root and Jupyter dirs under the test's tmp dir, stopped
by pid. :class:`LabBrowser` is headless Chromium driven over the DevTools pipe (JavaScript
on: this is our own test server, not a kernel's HTML), so a test can open the notebook
in JupyterLab, wait until some text shows, and take a screenshot.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import fcntl
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import nbformat
from gateway_server import free_port

from kernel_agent.notebook.cdp import Pipe
from kernel_agent.notebook.chromium import CHROMIUM_FLAGS, find_chromium

__all__ = ["LabBrowser", "LabServer", "as_the_user", "lab_python", "write_notebook"]

ROOT = Path(__file__).resolve().parent.parent
_TRAMPOLINE = (
    "import os,sys;os.dup2(int(sys.argv[1]),3);os.dup2(int(sys.argv[2]),4);"
    "os.execvp(sys.argv[3],sys.argv[3:])"
)


def lab_python() -> Path:
    """The lab venv's bin dir; a skip if ``make lab-venv`` never ran (a failure under CI)."""
    import pytest

    venv = Path(os.environ.get("LAB_VENV") or ROOT / ".venv-lab")
    venv = venv if venv.is_absolute() else ROOT / venv
    if not (venv / ".installed").exists():
        why = f"JupyterLab is not installed in {venv}: run `make lab-venv`"
        if os.environ.get("CI"):
            pytest.fail(why + " (CI is set: the JupyterLab tests must run)")
        pytest.skip(why)
    return venv / "bin"


def write_notebook(path: Path, *sources: str) -> Path:
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(s) for s in sources]
    nb.metadata["kernelspec"] = {
        "name": "python3",
        "display_name": "Python 3",
        "language": "python",
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, path)
    return path


@dataclass
class LabServer:
    """``jupyter lab`` with collaboration on a free loopback port; ``root`` is its root dir."""

    workdir: Path
    token: str = "lab-test-token-0123456789"
    proc: subprocess.Popen[bytes] | None = None
    url: str = ""
    port: int = 0
    #: more environment for the server (and so for what it starts: kernels, personas)
    env: dict[str, str] = field(default_factory=dict)

    @property
    def root(self) -> Path:
        return self.workdir / "root"

    def start(self, timeout: float = 60.0) -> LabServer:
        bin_dir = lab_python()
        self.root.mkdir(parents=True, exist_ok=True)
        self.port = self.port or free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        env = {
            k: v for k, v in os.environ.items() if not k.startswith(("KERNEL_AGENT_", "JUPYTER"))
        }
        env.update(
            JUPYTER_TOKEN=self.token,
            JUPYTER_CONFIG_DIR=str(self.workdir / "config"),
            JUPYTER_RUNTIME_DIR=str(self.workdir / "runtime"),
            JUPYTER_DATA_DIR=str(self.workdir / "data"),
            PATH=f"{bin_dir}:{env.get('PATH', '')}",
        )
        env.update(self.env)
        log = open(self.workdir / "lab.log", "ab")
        self.proc = subprocess.Popen(
            [
                str(bin_dir / "jupyter"), "lab", "--no-browser", "--allow-root",
                "--ServerApp.ip=127.0.0.1", f"--ServerApp.port={self.port}",
                "--ServerApp.port_retries=0", f"--ServerApp.root_dir={self.root}",
                # the document is saved to disk a moment after each change
                "--YDocExtension.document_save_delay=0.5",
            ],
            cwd=self.root, stdout=log, stderr=log, env=env,
        )  # fmt: skip
        log.close()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"jupyter lab exited early:\n{self.log_tail()}")
            try:
                self.api("GET", "/api/status")
                return self
            except OSError:
                time.sleep(0.1)
        self.stop()
        raise RuntimeError(f"jupyter lab did not answer within {timeout} s:\n{self.log_tail()}")

    def stop(self, sig: int = signal.SIGTERM) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        os.kill(self.proc.pid, sig)
        try:
            self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.kill(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=5)

    def kill(self) -> None:
        """The server gone at once (its kernels are left orphaned, then killed)."""
        if self.proc is not None and self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=5)

    def log_tail(self, lines: int = 40) -> str:
        path = self.workdir / "lab.log"
        text = path.read_text(errors="replace") if path.exists() else ""
        return "\n".join(text.splitlines()[-lines:])

    def api(self, method: str, path: str, body: Any = None) -> Any:
        request = urllib.request.Request(
            self.url + path,
            data=None if body is None else json.dumps(body).encode(),
            method=method,
            headers={"Authorization": f"token {self.token}", "Content-Type": "application/json"},
        )
        with urllib.request.urlopen(request, timeout=10) as resp:
            payload = resp.read()
        return json.loads(payload) if payload else None

    def session_kernel(self, path: str) -> str | None:
        for session in self.api("GET", "/api/sessions"):
            if session["path"] == path:
                return str(session["kernel"]["id"])
        return None

    def open_session(self, path: str) -> str:
        """What JupyterLab does when it opens a notebook: a session with a kernel."""
        made = self.api(
            "POST",
            "/api/sessions",
            {"path": path, "type": "notebook", "name": "", "kernel": {"name": "python3"}},
        )
        return str(made["kernel"]["id"])


def as_the_user(lab: LabServer, path: str, code: str) -> str:
    """The user opens ``path`` (a session and its kernel) and runs ``code`` in that kernel."""
    kernel_id = lab.open_session(path)

    async def run() -> None:
        from kernel_agent.executors.gateway import AsyncGatewaySession

        kernel = AsyncGatewaySession(lab.url, lab.token, kernel_id=kernel_id)
        await kernel.start()
        try:
            result = await kernel.execute(code, timeout=60)
            assert result.status == "ok", result.error
        finally:
            await kernel.shutdown()

    asyncio.run(run())
    return kernel_id


@dataclass
class LabBrowser:
    """Headless Chromium on one page, driven over ``--remote-debugging-pipe``."""

    proc: subprocess.Popen[bytes] | None = None
    pipe: Pipe | None = None
    session: str = ""
    _fds: list[int] = field(default_factory=list)
    _profile: str = ""

    def start(self, url: str, timeout: float = 120.0) -> LabBrowser:
        binary = find_chromium()
        if binary is None:
            import pytest

            pytest.skip("no Chromium: apt-get install chromium")
        self._profile = tempfile.mkdtemp(prefix="lab-browser-")
        cmd_r, cmd_w = os.pipe()
        out_r, out_w = os.pipe()
        # the child's ends above fd 9, then on fds 3 and 4 (where Chromium reads the pipe)
        child_r, child_w = (fcntl.fcntl(fd, fcntl.F_DUPFD, 10) for fd in (cmd_r, out_w))
        os.close(cmd_r)
        os.close(out_w)
        self._fds = [cmd_w, out_r]
        flags = [f for f in CHROMIUM_FLAGS if f != "--headless"]
        self.proc = subprocess.Popen(
            [sys.executable, "-c", _TRAMPOLINE, str(child_r), str(child_w),
             binary, "--headless", "--remote-debugging-pipe", *flags,
             f"--user-data-dir={self._profile}", "--window-size=1400,1000", "about:blank"],
            pass_fds=(child_r, child_w),
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        os.close(child_r)
        os.close(child_w)
        self.pipe = Pipe(cmd_w, out_r, deadline=time.monotonic() + timeout)
        targets = self.pipe.call("Target.getTargets").get("targetInfos", [])
        tab = next((t["targetId"] for t in targets if t.get("type") == "page"), None)
        if tab is None:
            tab = self.pipe.call("Target.createTarget", {"url": "about:blank"})["targetId"]
        attached = self.pipe.call("Target.attachToTarget", {"targetId": tab, "flatten": True})
        self.session = str(attached["sessionId"])
        self.pipe.call("Page.enable", {}, self.session)
        self.pipe.call(
            "Emulation.setDeviceMetricsOverride",
            {"width": 1400, "height": 1000, "deviceScaleFactor": 1, "mobile": False},
            self.session,
        )
        self.pipe.call("Page.navigate", {"url": url}, self.session)
        return self

    def call(self, method: str, params: dict[str, Any], within: float = 60.0) -> dict[str, Any]:
        """One command to the page, bounded on its own: the pipe's deadline is per command
        once the browser is up, so a test's waits add up without running out the pipe's."""
        assert self.pipe is not None
        self.pipe.deadline = time.monotonic() + within
        return self.pipe.call(method, params, self.session)

    def text(self) -> str:
        result = self.call(
            "Runtime.evaluate",
            {"expression": "document.body ? document.body.innerText : ''", "returnByValue": True},
        )
        return str(result.get("result", {}).get("value") or "")

    def wait_for(self, *texts: str, timeout: float = 60.0) -> str:
        """Wait until the page's text holds every one of ``texts``; return the text."""
        deadline = time.monotonic() + timeout
        seen = ""
        while time.monotonic() < deadline:
            seen = self.text()
            if all(t in seen for t in texts):
                return seen
            time.sleep(0.3)
        raise AssertionError(f"the page never showed {texts!r}; it showed:\n{seen[-3000:]}")

    def screenshot(self, path: Path) -> Path:
        data = self.call("Page.captureScreenshot", {"format": "png"})["data"]
        path.write_bytes(base64.b64decode(data))
        return path

    def stop(self) -> None:
        if self.pipe is not None:
            with contextlib.suppress(Exception):
                self.pipe.send("Browser.close")
        if self.proc is not None and self.proc.poll() is None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(timeout=5)
            if self.proc.poll() is None:
                self.proc.kill()
                self.proc.wait(timeout=5)
        for fd in self._fds:
            with contextlib.suppress(OSError):
                os.close(fd)
        import shutil

        shutil.rmtree(self._profile, ignore_errors=True)
