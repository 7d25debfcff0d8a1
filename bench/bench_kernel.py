"""Per-cell round trip of KernelSession against the raw jupyter_client floor.

    python bench/bench_kernel.py [--n 300]

The floor is a ``BlockingKernelClient``: execute, read iopub until *our* ``idle``,
then read the shell reply. ``KernelSession.execute`` does the same work plus output
collection and a liveness check. Each runs on its own kernel; the two alternate run
by run so machine noise falls on both. Also printed: kernel start time (start ->
kernel_info reply) and the client's RSS.
"""

from __future__ import annotations

import argparse
import os
import random
import resource
import statistics
import tempfile
import time
from collections.abc import Callable

import psutil
from jupyter_client.manager import KernelManager

from kernel_agent.executors.kernel import KernelSession

PRINTS = "print x100"
CELLS = {"pass": "pass", "x += 1": "x += 1", PRINTS: "for _ in range(100): print('.', flush=True)"}
WARMUP = 20
STARTS = 3
TARGET = 1.10


def raw_client(cwd: str) -> tuple[KernelManager, object, float]:
    start = time.perf_counter()
    km = KernelManager(kernel_name="python3")
    km.start_kernel(cwd=cwd)
    kc = km.blocking_client()
    kc.start_channels()
    kc.wait_for_ready(timeout=60)  # sends kernel_info and waits for the reply
    return km, kc, time.perf_counter() - start


def raw_execute(kc: object) -> Callable[[str], None]:
    def run(code: str) -> None:
        msg_id = kc.execute(code)
        while True:
            msg = kc.get_iopub_msg(timeout=30)
            if (
                msg["parent_header"].get("msg_id") == msg_id
                and msg["msg_type"] == "status"
                and msg["content"]["execution_state"] == "idle"
            ):
                break
        while kc.get_shell_msg(timeout=30)["parent_header"].get("msg_id") != msg_id:
            pass

    return run


def session_execute(session: object) -> Callable[[str], None]:
    def run(code: str) -> None:
        result = session.execute(code)
        assert result.ok, result.error

    return run


def interleaved(
    clients: dict[str, Callable[[str], None]], code: str, n: int
) -> dict[str, tuple[list[float], list[float]]]:
    """Wall and client-CPU seconds of ``n`` runs of ``code`` on each client.

    The clients alternate every run, in random order, so a burst of load from
    elsewhere on the machine falls on both.
    """
    samples: dict[str, tuple[list[float], list[float]]] = {name: ([], []) for name in clients}
    order = list(clients)
    for _ in range(n):
        random.shuffle(order)
        for name in order:
            wall, cpu = time.perf_counter(), time.process_time()
            clients[name](code)
            samples[name][0].append(time.perf_counter() - wall)
            samples[name][1].append(time.process_time() - cpu)
    return samples


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=300, help="timed runs per cell and client")
    args = parser.parse_args()
    cwd = tempfile.mkdtemp(prefix="bench-kernel-")

    # start times: alternate the two, three each, after the disk cache is warm
    raw_starts, session_starts = [], []
    for _ in range(STARTS):
        km, kc, seconds = raw_client(cwd)
        raw_starts.append(seconds)
        t = time.perf_counter()
        session = KernelSession("python3", cwd=cwd)
        session.start()
        session_starts.append(time.perf_counter() - t)
        if len(raw_starts) < STARTS:
            kc.stop_channels()
            km.shutdown_kernel(now=True)
            session.shutdown()
    raw_start, session_start = statistics.median(raw_starts), statistics.median(session_starts)
    clients = {
        "raw BlockingKernelClient": raw_execute(kc),
        "KernelSession": session_execute(session),
    }
    try:
        for run in clients.values():
            run("x = 0")
        interleaved(clients, "pass", WARMUP)
        rows = []
        for label, code in CELLS.items():
            n = args.n if label != PRINTS else max(args.n // 10, 1)
            samples = interleaved(clients, code, n)
            raw, ours = (statistics.median(samples[name][0]) * 1000 for name in clients)
            raw_cpu, our_cpu = (statistics.mean(samples[name][1]) * 1000 for name in clients)
            rows.append((label, n, raw, ours, ours / raw, raw_cpu, our_cpu))
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)
        session.shutdown()

    rss = psutil.Process(os.getpid()).memory_info().rss / 2**20
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print("median wall ms per cell; mean client CPU ms per cell in brackets")
    print(f"{'cell':<12} {'n':>5} {'raw':>15} {'KernelSession':>15} {'ratio':>7}")
    for label, n, raw, ours, ratio, raw_cpu, our_cpu in rows:
        flag = "" if ratio <= TARGET or label == PRINTS else f"  (target <= {TARGET:.2f}x)"
        print(
            f"{label:<12} {n:>5} {raw:>7.2f} ({raw_cpu:>5.2f}) {ours:>7.2f} ({our_cpu:>5.2f})"
            f" {ratio:>6.2f}x{flag}"
        )
    print(
        f"kernel start -> kernel_info reply (median of {STARTS}): raw client {raw_start:.2f} s,"
        f" KernelSession {session_start:.2f} s"
    )
    print(f"client RSS: {rss:.0f} MiB now, {peak:.0f} MiB peak (both clients in one process)")


if __name__ == "__main__":
    main()
