"""What does ``call_tool`` cost? One run, one sandboxed kernel (bwrap where the host allows):

- a plain cell round trip (``pass``), host side: the floor;
- a cell holding one ``call_tool`` of a no-op tool, host side, and its ratio to the floor;
- one ``call_tool`` alone, timed inside the kernel over a loop of calls;
- 20 parallel calls of a 100 ms tool with ``call_tools_parallel`` (serial would be 2 s).

Medians.

    PYTHONPATH=src python bench/bench_tools.py
"""

from __future__ import annotations

import asyncio
import logging
import statistics
import tempfile
import time
import warnings
from pathlib import Path

from kernel_agent.errors import UnsandboxedKernelWarning
from kernel_agent.executors.kernel import AsyncKernelSession
from kernel_agent.sandbox import bwrap_problem, make_launcher
from kernel_agent.settings import Settings
from kernel_agent.tools.bridge import BridgeLimits, HostBridge
from kernel_agent.tools.registry import make_tools

warnings.filterwarnings("ignore", category=UnsandboxedKernelWarning)
logging.getLogger("kernel_agent.sandbox").setLevel(logging.ERROR)

CELLS = 200
CALLS = 500
PARALLEL_RUNS = 5


def noop() -> None:
    return None


def sleep_100ms() -> None:
    time.sleep(0.1)


async def main() -> None:
    sandbox = "none" if bwrap_problem()[0] else "bwrap"
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        work.chmod(0o755)
        launcher = make_launcher(Settings(sandbox=sandbox), work)
        k = AsyncKernelSession(cwd=work, launcher=launcher)
        await k.start()
        bridge = HostBridge(make_tools([noop, sleep_100ms]), BridgeLimits(timeout_s=10))
        await bridge.attach(k)
        try:
            for _ in range(20):
                await k.execute("pass")
                await k.execute("call_tool('noop')")

            async def cell(code: str) -> float:
                t = time.perf_counter()
                r = await k.execute(code, timeout=60)
                assert r.ok, r.error
                return time.perf_counter() - t

            plain = statistics.median([await cell("pass") for _ in range(CELLS)])
            tool = statistics.median([await cell("call_tool('noop')") for _ in range(CELLS)])
            r = await k.execute(
                "import time\nts = []\n"
                f"for _ in range({CALLS}):\n"
                "    t = time.perf_counter()\n"
                "    call_tool('noop')\n"
                "    ts.append(time.perf_counter() - t)\n"
                "print(sorted(ts)[len(ts) // 2])",
                timeout=120,
            )
            in_kernel = float(r.outputs[0]["text"])
            parallel = statistics.median(
                [
                    await cell("call_tools_parallel([('sleep_100ms', {})] * 20)")
                    for _ in range(PARALLEL_RUNS)
                ]
            )
            bridge.take_records()
        finally:
            await k.shutdown()
    print(f"kernel: {sandbox}")
    print(f"plain cell round trip (pass)          {plain * 1000:7.2f} ms")
    print(
        f"cell with one call_tool (no-op)       {tool * 1000:7.2f} ms   "
        f"{tool / plain:.2f}x the plain cell, +{(tool - plain) * 1000:.2f} ms"
    )
    print(f"one call_tool, timed in the kernel    {in_kernel * 1000:7.2f} ms")
    print(f"20 parallel calls of a 100 ms tool    {parallel * 1000:7.0f} ms   (serial: 2000 ms)")


if __name__ == "__main__":
    asyncio.run(main())
