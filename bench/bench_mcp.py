"""``run_cell`` through MCP (stdio and streamable HTTP) against a direct ``execute``.

    python bench/bench_mcp.py [--n 200] [--sandbox none|auto]

The floor is ``AsyncKernelSession.execute`` on its own kernel, in this process. The
MCP paths are ``kernel-agent mcp`` subprocesses driven by the official SDK client:
one over stdio, one over HTTP on 127.0.0.1 (with a bearer token). Each call is a
whole ``run_cell``: the server records the cell in its notebook (an atomic rewrite),
asks the kernel for its namespace summary and renders the model's view, so the ratio
is what an outside agent pays per cell on top of the kernel, transport included.
``Session.run_cell``
in this process separates the session's own work from the transport's. The paths
alternate call by call so machine noise falls on all of them.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from mcp import Client
from mcp.client.stdio import StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

from kernel_agent.executors.kernel import AsyncKernelSession
from kernel_agent.session import Session
from kernel_agent.settings import Settings

WARMUP = 10
TOKEN = "bench-token-0123456789abcdef"
SRC = str(Path(__file__).resolve().parents[1] / "src")


def _env() -> dict[str, str]:
    path = os.pathsep.join(p for p in (SRC, os.environ.get("PYTHONPATH", "")) if p)
    return {**os.environ, "PYTHONPATH": path, "KERNEL_AGENT_MCP_TOKEN": TOKEN}


def _args(tmp: Path, name: str, sandbox: str) -> list[str]:
    work = tmp / name
    work.mkdir()
    return [
        "-m",
        "kernel_agent",
        "mcp",
        "--cwd",
        str(work),
        "--notebook",
        str(tmp / f"{name}.ipynb"),
        "--sandbox",
        sandbox,
    ]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def _wait_port(port: int, proc: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit("the HTTP server exited")
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        await asyncio.sleep(0.05)
    raise SystemExit("the HTTP server did not start")


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--n", type=int, default=200)
    parser.add_argument("--sandbox", default="none", choices=("none", "auto", "bwrap"))
    opts = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        direct = AsyncKernelSession("python3", cwd=tmp)
        await direct.start()
        (tmp / "session").mkdir()
        settings = Settings.from_env(cwd=tmp / "session", sandbox=opts.sandbox)
        session = Session(settings, notebook=tmp / "session.ipynb", front_end="bench")
        await session.start()
        port = _free_port()
        http_proc = subprocess.Popen(
            [sys.executable, *_args(tmp, "http", opts.sandbox), "--http", "--port", str(port)],
            env=_env(),
            stderr=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
        )
        try:
            await _wait_port(port, http_proc)
            stdio = Client(
                StdioServerParameters(
                    command=sys.executable, args=_args(tmp, "stdio", opts.sandbox), env=_env()
                )
            )
            http_client = create_mcp_http_client(headers={"Authorization": f"Bearer {TOKEN}"})
            http = Client(
                streamable_http_client(f"http://127.0.0.1:{port}/mcp", http_client=http_client)
            )
            async with stdio, http:

                async def run_direct() -> None:
                    result = await direct.execute("x = 1")
                    assert result.ok

                async def run_session() -> None:
                    run = await session.run_cell("x = 1", provenance={"source": "bench"})
                    assert run.result.ok

                async def run_stdio() -> None:
                    result = await stdio.call_tool("run_cell", {"code": "x = 1"})
                    assert not result.is_error

                async def run_http() -> None:
                    result = await http.call_tool("run_cell", {"code": "x = 1"})
                    assert not result.is_error

                paths = {
                    "direct execute": run_direct,
                    "Session.run_cell": run_session,
                    "MCP stdio": run_stdio,
                    "MCP HTTP": run_http,
                }
                times: dict[str, list[float]] = {name: [] for name in paths}
                for i in range(WARMUP + opts.n):
                    for name, fn in paths.items():
                        t0 = time.perf_counter()
                        await fn()
                        if i >= WARMUP:
                            times[name].append(time.perf_counter() - t0)
        finally:
            http_proc.terminate()
            http_proc.wait(30)
            await direct.shutdown()
            await session.close()
    floor = statistics.median(times["direct execute"])
    print(f"run_cell round trip, median of {opts.n} cells ('x = 1'), sandbox {opts.sandbox}")
    print(f"{'path':<16} {'ms':>8} {'p90 ms':>8} {'ratio':>7}")
    for name, values in times.items():
        med = statistics.median(values)
        p90 = statistics.quantiles(values, n=10)[-1]
        print(f"{name:<16} {med * 1000:8.2f} {p90 * 1000:8.2f} {med / floor:6.2f}x")


if __name__ == "__main__":
    asyncio.run(main())
