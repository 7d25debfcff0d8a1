"""What does the sandbox cost? The same measurements on three kernels, in one run:

- plain: no launcher at all (jupyter_client's own launch);
- limits: ``--sandbox none`` (the rlimit exec wrapper only);
- bwrap: the default sandbox (limits + bubblewrap, and the uid drop as root).

Kernel start (to kernel_info reply) and the per-cell round trip of ``pass``, each
with its ratio to plain (the floor, measured in the same run), the interrupt latency
of a Python loop (from the interrupt to the reply), and restart time. Medians; a few
seconds of work per kernel. Run it with ``PYTHONPATH`` at two checkouts to compare
two versions of the sandbox (the ratios, not the seconds, carry across runs).

    PYTHONPATH=src python bench/bench_sandbox.py
"""

from __future__ import annotations

import logging
import statistics
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path

from kernel_agent.errors import UnsandboxedKernelWarning
from kernel_agent.executors.kernel import KernelSession
from kernel_agent.sandbox import make_launcher
from kernel_agent.settings import Settings

# the "limits" row is unsandboxed on purpose
warnings.filterwarnings("ignore", category=UnsandboxedKernelWarning)
logging.getLogger("kernel_agent.sandbox").setLevel(logging.ERROR)

STARTS = 5
CELLS = 200
INTERRUPTS = 3
LOOP_TIMEOUT = 0.5


def measure(work: Path, launcher: object) -> dict[str, float]:
    starts = []
    for _ in range(STARTS):
        k = KernelSession(cwd=work, launcher=launcher)
        t = time.perf_counter()
        k.start()
        starts.append(time.perf_counter() - t)
        k.shutdown()
    with KernelSession(cwd=work, launcher=launcher, interrupt_grace=5) as k:
        for _ in range(20):
            k.execute("pass")
        cells = []
        for _ in range(CELLS):
            t = time.perf_counter()
            k.execute("pass")
            cells.append(time.perf_counter() - t)
        interrupts = []
        for _ in range(INTERRUPTS):
            t = time.perf_counter()
            r = k.execute("while True:\n    pass", timeout=LOOP_TIMEOUT)
            assert r.status == "timeout" and not r.restarted, r.error
            interrupts.append(time.perf_counter() - t - LOOP_TIMEOUT)
        restarts = []
        for _ in range(STARTS):
            t = time.perf_counter()
            k.restart()
            restarts.append(time.perf_counter() - t)
    return {
        "start_s": statistics.median(starts),
        "cell_ms": statistics.median(cells) * 1000,
        "interrupt_ms": statistics.median(interrupts) * 1000,
        "restart_s": statistics.median(restarts),
    }


def mount_cost(work: Path, runs: int = 30) -> tuple[float, float]:
    """Medians (ms) of ``bwrap ... true`` with a plain read-only ``/`` (the floor) and with
    the kernel's filesystem (the system, this Python and ``work`` bound in), alternating."""
    from kernel_agent.sandbox.bwrap import filesystem, find_bwrap

    bwrap = find_bwrap() or "bwrap"
    ns = ["--unshare-all", "--die-with-parent", "--"]
    floor = [bwrap, "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", *ns, "true"]
    bound = [bwrap, *filesystem([work], [], 64), *ns, "true"]
    times: dict[int, list[float]] = {0: [], 1: []}
    for _ in range(runs):
        for i, argv in enumerate((floor, bound)):
            t = time.perf_counter()
            subprocess.run(argv, check=True)
            times[i].append((time.perf_counter() - t) * 1000)
    return statistics.median(times[0]), statistics.median(times[1])


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        kernels = {
            "plain": None,
            "limits": make_launcher(Settings(cwd=work, sandbox="none"), work),
            "bwrap": make_launcher(Settings(cwd=work, sandbox="auto"), work),
        }
        print(kernels["bwrap"].status.describe())  # type: ignore[union-attr]
        results = {name: measure(work, launcher) for name, launcher in kernels.items()}
        if sys.platform.startswith("linux"):
            ro, bound = mount_cost(work)
            print(
                f"bwrap true: read-only / {ro:.1f} ms (floor), the kernel's bound "
                f"filesystem {bound:.1f} ms, ratio {bound / ro:.2f}"
            )
    floor = results["plain"]
    print(
        f"{'kernel':8} {'start s':>8} {'ratio':>6} {'cell ms':>8} {'ratio':>6} "
        f"{'interrupt ms':>13} {'restart s':>10}"
    )
    for name, r in results.items():
        print(
            f"{name:8} {r['start_s']:8.2f} {r['start_s'] / floor['start_s']:6.2f} "
            f"{r['cell_ms']:8.2f} {r['cell_ms'] / floor['cell_ms']:6.2f} "
            f"{r['interrupt_ms']:13.0f} {r['restart_s']:10.2f}"
        )


if __name__ == "__main__":
    main()
