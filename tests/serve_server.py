"""A real ``kernel-agent serve`` subprocess on 127.0.0.1, for the service and client tests."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from crossing import host_pythonpath

TOKEN = "serve-test-token-0123456789abcdef"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Server:
    def __init__(
        self, proc: subprocess.Popen[str], url: str, lines: list[str], state: Path
    ) -> None:
        self.proc, self.url, self.lines, self.state = proc, url, lines, state

    def stop(self, timeout: float = 60) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        return self.proc.returncode

    @property
    def log(self) -> str:
        return "".join(self.lines)


@contextmanager
def serve(
    state: Path, *extra: str, token: str | None = TOKEN, env: dict[str, str] | None = None
) -> Iterator[Server]:
    port = free_port()
    full_env = {
        **os.environ,
        "PYTHONPATH": host_pythonpath(),
        "OPENAI_API_KEY": "sk-fake",
        **(env or {}),
    }
    full_env.pop("KERNEL_AGENT_SERVE_TOKEN", None)
    if token:
        full_env["KERNEL_AGENT_SERVE_TOKEN"] = token
    args = [
        sys.executable,
        "-m",
        "kernel_agent",
        "serve",
        "--port",
        str(port),
        "--state-dir",
        str(state),
        *extra,
    ]
    proc = subprocess.Popen(
        args, env=full_env, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True
    )
    lines: list[str] = []

    def pump() -> None:
        assert proc.stderr is not None
        for line in proc.stderr:
            lines.append(line)

    threading.Thread(target=pump, daemon=True).start()
    server = Server(proc, f"http://127.0.0.1:{port}", lines, state)
    try:
        deadline = time.monotonic() + 60
        while True:
            assert proc.poll() is None, f"server exited: {server.log}"
            assert time.monotonic() < deadline, f"server did not start: {server.log}"
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", port)) == 0:
                    break
            time.sleep(0.05)
        yield server
    finally:
        server.stop()
