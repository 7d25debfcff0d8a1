"""``kernel-agent serve``: time to first execute (warm pool and cold), per-request overhead,
and a load run.

    python bench/bench_serve.py [--sessions 5] [--cells 20] [--n 100]

Each server is a real ``kernel-agent serve`` subprocess on 127.0.0.1 with sandboxed
kernels (bwrap where the host allows it), driven through ``kernel_agent.client``.

- first execute: ``POST /v1/sessions`` then ``POST .../execute print(1)``, timed
  together; warm (``--pool 2``, the pool refilled between samples) and cold (no pool).
- overhead: ``POST .../execute pass`` against ``KernelSession.execute`` on a kernel
  of our own (same sandbox), alternating call by call; the ratio of the medians.
- load: S sessions x C cells at once (``--max-concurrent S``); each cell prints its
  session's own token and the reply must carry exactly that (no lost or misrouted
  output); p50/p99 latency; RSS of the server plus its kernels, per session.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import psutil

from kernel_agent.client import AsyncClient, Client
from kernel_agent.executors.factory import make_executor
from kernel_agent.executors.kernel import KernelSession
from kernel_agent.settings import Settings

TOKEN = "bench-token-0123456789abcdef"
SRC = str(Path(__file__).resolve().parents[1] / "src")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def server(state: Path, *extra: str) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    port = free_port()
    env = {**os.environ, "PYTHONPATH": SRC, "KERNEL_AGENT_SERVE_TOKEN": TOKEN}
    proc = subprocess.Popen([sys.executable, "-m", "kernel_agent", "serve", "--port", str(port),
                             "--state-dir", str(state), *extra], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
    try:
        deadline = time.monotonic() + 60
        while True:
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", port)) == 0:
                    break
            if time.monotonic() > deadline or proc.poll() is not None:
                raise SystemExit("the server did not start")
            time.sleep(0.05)
        yield f"http://127.0.0.1:{port}", proc
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(60)


def pct(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(round(q * (len(values) - 1))))]


def first_execute(url: str, n: int, warm: bool) -> list[float]:
    times = []
    with Client(url, token=TOKEN) as ka:
        for _ in range(n):
            if warm:
                deadline = time.monotonic() + 60
                while (
                    ka.http.get("/healthz").json()["pool_ready"] < 1 and time.monotonic() < deadline
                ):
                    time.sleep(0.05)
            began = time.perf_counter()
            s = ka.create_session()
            cell = ka.execute(s.id, "print(1)")
            times.append(time.perf_counter() - began)
            assert cell.stdout == "1\n"
            ka.delete_session(s.id)
    return times


def overhead(url: str, n: int) -> tuple[float, float]:
    executor = make_executor(Settings.from_env(cwd=Path(tempfile.mkdtemp())))
    kernel = KernelSession("python3", cwd=tempfile.mkdtemp(), launcher=executor.launcher)
    kernel.start()
    via, raw = [], []
    try:
        with Client(url, token=TOKEN) as ka:
            s = ka.create_session()
            for i in range(n + 10):
                t = time.perf_counter()
                ka.execute(s.id, "pass")
                a = time.perf_counter() - t
                t = time.perf_counter()
                kernel.execute("pass")
                b = time.perf_counter() - t
                if i >= 10:
                    via.append(a)
                    raw.append(b)
            ka.delete_session(s.id)
    finally:
        kernel.shutdown()
    return statistics.median(via), statistics.median(raw)


async def load(url: str, sessions: int, cells: int, pid: int) -> dict[str, float]:
    async with AsyncClient(url, token=TOKEN) as ka:
        made = await asyncio.gather(*(ka.create_session() for _ in range(sessions)))
        latencies: list[float] = []
        bad = 0

        async def drive(sid: str) -> None:
            nonlocal bad
            for i in range(cells):
                token = f"{sid}:{i}"
                t = time.perf_counter()
                cell = await ka.execute(sid, f"print({token!r})")
                latencies.append(time.perf_counter() - t)
                if cell.stdout != token + "\n":
                    bad += 1

        began = time.perf_counter()
        await asyncio.gather(*(drive(s.id) for s in made))
        wall = time.perf_counter() - began
        proc = psutil.Process(pid)
        rss = proc.memory_info().rss + sum(
            c.memory_info().rss for c in proc.children(recursive=True)
        )
        for s in made:
            await ka.delete_session(s.id)
    return {"p50": pct(latencies, 0.5), "p99": pct(latencies, 0.99), "bad": bad, "wall": wall,
            "rss_per_session_mib": rss / sessions / 2**20, "n": len(latencies)}  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sessions", type=int, default=5)
    ap.add_argument("--cells", type=int, default=20)
    ap.add_argument("--n", type=int, default=100)
    ap.add_argument("--samples", type=int, default=10)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        with server(Path(tmp) / "warm", "--pool", "2") as (url, _):
            warm = first_execute(url, args.samples, warm=True)
        with server(Path(tmp) / "cold") as (url, _):
            cold = first_execute(url, max(3, args.samples // 2), warm=False)
            via, raw = overhead(url, args.n)
        with server(Path(tmp) / "load", "--max-concurrent", str(args.sessions),
                    "--max-sessions", str(args.sessions)) as (url, proc):  # fmt: skip
            result = asyncio.run(load(url, args.sessions, args.cells, proc.pid))
    print(
        f"first execute, warm pool: p50 {statistics.median(warm) * 1000:.0f} ms "
        f"(min {min(warm) * 1000:.0f}, max {max(warm) * 1000:.0f}; target <= 50 ms)"
    )
    print(f"first execute, cold:      p50 {statistics.median(cold) * 1000:.0f} ms")
    print(
        f"execute 'pass': HTTP {via * 1000:.1f} ms vs KernelSession.execute {raw * 1000:.1f} ms "
        f"= {via / raw:.2f}x"
    )
    print(
        f"load {args.sessions} sessions x {args.cells} cells: p50 {result['p50'] * 1000:.1f} ms, "
        f"p99 {result['p99'] * 1000:.1f} ms, {result['n'] / result['wall']:.0f} cells/s, "
        f"RSS {result['rss_per_session_mib']:.0f} MiB/session (server + kernels), "
        f"lost or misrouted outputs: {result['bad']}"
    )


if __name__ == "__main__":
    main()
