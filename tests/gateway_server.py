"""Run a real Jupyter Kernel Gateway on 127.0.0.1 for tests (a subprocess, stopped by pid)."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path

__all__ = ["KernelGateway", "free_port"]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class KernelGateway:
    """``jupyter kernelgateway`` on a free loopback port with a token."""

    workdir: Path
    token: str
    extra_args: tuple[str, ...] = ()
    proc: subprocess.Popen[bytes] | None = None
    url: str = ""

    def start(self, timeout: float = 30.0) -> KernelGateway:
        port = free_port()
        self.url = f"http://127.0.0.1:{port}"
        log = open(self.workdir / "kernelgateway.log", "wb")  # the child keeps its own copy
        cmd = [
            sys.executable, "-m", "jupyter", "kernelgateway",
            "--KernelGatewayApp.ip=127.0.0.1",
            f"--KernelGatewayApp.port={port}",
            f"--KernelGatewayApp.auth_token={self.token}",
            *self.extra_args,
        ]  # fmt: skip
        env = {k: v for k, v in os.environ.items() if not k.startswith("KERNEL_AGENT_")}
        self.proc = subprocess.Popen(cmd, cwd=self.workdir, stdout=log, stderr=log, env=env)
        log.close()
        request = urllib.request.Request(
            self.url + "/api", headers={"Authorization": f"token {self.token}"}
        )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"kernel gateway exited early:\n{self.log_tail()}")
            try:
                urllib.request.urlopen(request, timeout=1).close()
                return self
            except OSError:
                time.sleep(0.05)
        self.stop()
        raise RuntimeError(f"kernel gateway did not answer within {timeout} s:\n{self.log_tail()}")

    def stop(self, sig: int = signal.SIGTERM) -> None:
        """Stop the gateway by pid (SIGTERM lets it shut its kernels down)."""
        if self.proc is None or self.proc.poll() is not None:
            return
        os.kill(self.proc.pid, sig)
        try:
            self.proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            os.kill(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=5)

    def log_tail(self, lines: int = 30) -> str:
        path = self.workdir / "kernelgateway.log"
        text = path.read_text(errors="replace") if path.exists() else ""
        return "\n".join(text.splitlines()[-lines:])
