"""Gateway kernel vs local KernelSession vs raw jupyter_client, in one run.

Per-cell round trip of ``pass`` (median of N) and one ~1 MB stdout output (best of 3).
Starts a Jupyter Kernel Gateway on 127.0.0.1 for the run and stops it.
``python bench/bench_gateway.py [N]``
"""

from __future__ import annotations

import os
import secrets
import socket
import statistics
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable

from jupyter_client.manager import start_new_kernel

from kernel_agent.executors.gateway import GatewaySession
from kernel_agent.executors.kernel import KernelSession

BIG = "print('x' * 999_000)"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_gateway(token: str) -> tuple[subprocess.Popen[bytes], str]:
    port = free_port()
    cmd = [
        sys.executable,
        "-m",
        "kernel_gateway",
        "--KernelGatewayApp.ip=127.0.0.1",
        f"--KernelGatewayApp.port={port}",
        f"--KernelGatewayApp.auth_token={token}",
    ]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    request = urllib.request.Request(url + "/api", headers={"Authorization": f"token {token}"})
    for _ in range(200):
        try:
            urllib.request.urlopen(request, timeout=1).close()
            return proc, url
        except OSError:
            time.sleep(0.05)
    proc.kill()
    raise SystemExit("the Kernel Gateway did not start")


def measure(runners: dict[str, Callable[[str], object]], n: int) -> dict[str, tuple[float, float]]:
    """Interleaved: each round times every runner once, so machine noise hits all alike."""
    laps: dict[str, list[float]] = {name: [] for name in runners}
    big: dict[str, list[float]] = {name: [] for name in runners}
    for run in runners.values():
        for _ in range(3):
            run("pass")
    for i in range(n + 3):
        for name, run in runners.items():
            code, into = (BIG, big) if i >= n else ("pass", laps)
            t = time.perf_counter()
            run(code)
            into[name].append(time.perf_counter() - t)
    return {name: (statistics.median(laps[name]) * 1e3, min(big[name]) * 1e3) for name in runners}


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 40
    token = secrets.token_hex(8)
    proc, url = start_gateway(token)
    km, kc = start_new_kernel(kernel_name="python3")
    try:
        with (
            KernelSession("python3", cwd=os.getcwd()) as local,
            GatewaySession(url, token, "python3") as gateway,
        ):
            rows = measure(
                {
                    "raw jupyter_client": lambda code: kc.execute_interactive(
                        code, output_hook=lambda m: None, timeout=60
                    ),
                    "KernelSession (local)": local.execute,
                    "GatewaySession": gateway.execute,
                },
                n,
            )
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)
        proc.terminate()
        proc.wait(timeout=10)
    base_pass, base_big = rows["raw jupyter_client"]
    print(f"{'':24s} {'pass (median)':>14s} {'ratio':>6s} {'1 MB output':>12s} {'ratio':>6s}")
    for name, (p, b) in rows.items():
        print(f"{name:24s} {p:11.2f} ms {p / base_pass:5.2f}x {b:9.1f} ms {b / base_big:5.2f}x")


if __name__ == "__main__":
    main()
