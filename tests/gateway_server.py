"""Run a real Jupyter Kernel Gateway or Enterprise Gateway on 127.0.0.1 for tests.

Each is a subprocess on a free loopback port with a token, run in a dir of its own
and stopped by pid. Enterprise Gateway pins jupyter_server < 2 and jupyter_client < 7,
so it lives in a venv of its own (``make eg-venv``, ``$EG_VENV``, default ``.venv-eg``);
its one kernelspec runs an ipykernel from our own venv through its local process proxy.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

__all__ = ["GATEWAYS", "EnterpriseGateway", "KernelGateway", "eg_python", "free_port", "running"]

ROOT = Path(__file__).resolve().parent.parent


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def eg_python() -> str:
    """The EG venv's python; a skip if ``make eg-venv`` never ran, a failure if it broke.

    ``make test`` runs ``make eg-venv`` first, so there a missing gateway fails; under
    ``CI`` a missing one fails too.
    """
    import pytest

    venv = Path(os.environ.get("EG_VENV") or ROOT / ".venv-eg")
    venv = venv if venv.is_absolute() else ROOT / venv
    python = venv / "bin" / "python"
    if not (venv / ".installed").exists():
        why = f"Enterprise Gateway is not installed in {venv}: run `make eg-venv`"
        if os.environ.get("CI"):  # as the local-model tests: CI must run them
            pytest.fail(why + " (CI is set: the Enterprise Gateway tests must run)")
        pytest.skip(why)
    assert python.exists(), f"{venv}/.installed is there but {python} is not: `make eg-venv`"
    return str(python)


@dataclass
class _Gateway:
    """A gateway subprocess: start on a free port, wait for ``/api``, stop by pid."""

    workdir: Path
    token: str
    extra_args: tuple[str, ...] = ()
    proc: subprocess.Popen[bytes] | None = None
    url: str = ""
    #: seconds from spawn to the first answer of ``/api``
    startup_s: float = 0.0

    name = "gateway"
    log_name = "gateway.log"

    def command(self, port: int) -> list[str]:
        raise NotImplementedError

    def environment(self) -> dict[str, str]:
        return {k: v for k, v in os.environ.items() if not k.startswith("KERNEL_AGENT_")}

    def start(self, timeout: float = 30.0) -> _Gateway:
        port = free_port()
        self.url = f"http://127.0.0.1:{port}"
        log = open(self.workdir / self.log_name, "wb")  # the child keeps its own copy
        started = time.monotonic()
        self.proc = subprocess.Popen(
            self.command(port), cwd=self.workdir, stdout=log, stderr=log, env=self.environment()
        )
        log.close()
        request = urllib.request.Request(
            self.url + "/api", headers={"Authorization": f"token {self.token}"}
        )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"{self.name} exited early:\n{self.log_tail()}")
            try:
                urllib.request.urlopen(request, timeout=1).close()
                self.startup_s = time.monotonic() - started
                return self
            except OSError:
                time.sleep(0.05)
        self.stop()
        raise RuntimeError(f"{self.name} did not answer within {timeout} s:\n{self.log_tail()}")

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
        path = self.workdir / self.log_name
        text = path.read_text(errors="replace") if path.exists() else ""
        return "\n".join(text.splitlines()[-lines:])


@dataclass
class KernelGateway(_Gateway):
    """``jupyter kernelgateway`` (from our own venv) on a free loopback port with a token."""

    name = "kernel gateway"
    log_name = "kernelgateway.log"

    def command(self, port: int) -> list[str]:
        return [
            sys.executable, "-m", "jupyter", "kernelgateway",
            "--KernelGatewayApp.ip=127.0.0.1",
            f"--KernelGatewayApp.port={port}",
            f"--KernelGatewayApp.auth_token={self.token}",
            *self.extra_args,
        ]  # fmt: skip

    def start(self, timeout: float = 30.0) -> KernelGateway:
        super().start(timeout)
        return self


@dataclass
class EnterpriseGateway(_Gateway):
    """``jupyter enterprisegateway`` from its own venv, with its local process proxy.

    Its only kernelspec, ``python3``, lives under ``workdir/share`` and runs
    ``kernel_python`` (default: our interpreter, which has ipykernel and pandas) as
    ``-m ipykernel_launcher``. Jupyter's data and runtime dirs are under ``workdir``
    too, so nothing of the user's own Jupyter set-up is seen. EG refuses to start
    kernels for ``root`` (its ``unauthorized_users``); tests may run as root, so that
    set is emptied of it here.
    """

    kernel_python: str = sys.executable
    #: EG restarts a kernel that died when its restarter notices (every time_to_dead s)
    time_to_dead: float = 1.0

    name = "enterprise gateway"
    log_name = "enterprisegateway.log"

    def kernelspec_dir(self) -> Path:
        return self.workdir / "share" / "kernels" / "python3"

    def write_kernelspec(self) -> None:
        spec = {
            "argv": [self.kernel_python, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
            "display_name": "Python 3 (Enterprise Gateway, local)",
            "language": "python",
            "interrupt_mode": "signal",
            "metadata": {
                "process_proxy": {
                    "class_name": (
                        "enterprise_gateway.services.processproxies.processproxy.LocalProcessProxy"
                    )
                }
            },
        }
        self.kernelspec_dir().mkdir(parents=True, exist_ok=True)
        (self.kernelspec_dir() / "kernel.json").write_text(json.dumps(spec, indent=1))

    def command(self, port: int) -> list[str]:
        return [
            eg_python(), "-m", "jupyter", "enterprisegateway",
            "--EnterpriseGatewayApp.ip=127.0.0.1",
            f"--EnterpriseGatewayApp.port={port}",
            f"--EnterpriseGatewayApp.auth_token={self.token}",
            "--EnterpriseGatewayApp.unauthorized_users=nobody",
            "--EnterpriseGatewayApp.default_kernel_name=python3",
            f"--KernelRestarter.time_to_dead={self.time_to_dead}",
            *self.extra_args,
        ]  # fmt: skip

    def environment(self) -> dict[str, str]:
        env = super().environment()
        env.update(
            JUPYTER_PATH=str(self.workdir / "share"),
            JUPYTER_DATA_DIR=str(self.workdir / "data"),
            JUPYTER_RUNTIME_DIR=str(self.workdir / "runtime"),
            JUPYTER_CONFIG_DIR=str(self.workdir / "config"),
        )
        return env

    def start(self, timeout: float = 60.0) -> EnterpriseGateway:
        self.write_kernelspec()
        super().start(timeout)
        return self


#: the two gateways the remote tests run against (``params=GATEWAYS``)
GATEWAYS = ("kernel-gateway", "enterprise-gateway")


@contextmanager
def running(
    kind: str,
    root: Path,
    token: str,
    *,
    kg_args: tuple[str, ...] = (),
    eg_args: tuple[str, ...] = (),
) -> Iterator[_Gateway]:
    """Gateway ``kind`` (one of :data:`GATEWAYS`) started in ``root``, stopped after.

    Enterprise Gateway comes from its own venv: a skip saying why when ``make eg-venv``
    never ran (a failure under ``make test`` and CI, see :func:`eg_python`).
    """
    gw: _Gateway
    if kind == "enterprise-gateway":
        eg_python()
        gw = EnterpriseGateway(root, token, eg_args)
    else:
        gw = KernelGateway(root, token, kg_args)
    gw.start()
    try:
        yield gw
    finally:
        gw.stop()
