"""The agent loop's own cost per cell, against the floor of its two round trips.

    python bench/bench_agent_loop.py [--cells 60] [--rounds 5] [--profile]

A scripted OpenAI-compatible server (tests/fake_openai.py) answers at once with one
``run_cell("x = <n> + 1; x")`` call per reply (numbered: the levers, all on, stop a run
that repeats a cell or an output). Measured in the same run:

- the raw kernel round trip: ``BlockingKernelClient.execute`` until idle and reply;
- one streamed model reply through the ``openai`` client (drained);
- their sum, the floor of one agent step;
- the agent's time per cell (``Agent.run`` over ``--cells`` cells), and its ratio to the floor.

A round measures the three one after another, seconds apart, and gives a ratio; the
median round's is reported (on a shared machine one round can measure the neighbours).
Target: at most 1.3x the floor. ``--profile`` prints where the agent's time goes (its
event loop's thread, the last round).
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import os
import pstats
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import openai
from jupyter_client.manager import KernelManager

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from fake_openai import FakeLLM, run_cell, text  # noqa: E402

from kernel_agent.agent import Agent  # noqa: E402
from kernel_agent.settings import Settings  # noqa: E402

TARGET = 1.3
CODE = "x = <n> + 1; x"


def code(n: int) -> str:
    """The ``n``-th cell: the same work, a different text each time."""
    return CODE.replace("<n>", str(n))


def kernel_floor(cells: int) -> float:
    """Seconds per ``x += 1`` through the raw jupyter_client, after a warm-up."""
    km = KernelManager(kernel_name="python3")
    km.start_kernel()
    kc = km.blocking_client()
    kc.start_channels()
    kc.wait_for_ready(timeout=60)
    try:

        def once(n: int) -> None:
            msg_id = kc.execute(code(n))
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

        once(0)
        kc.execute("x = 0")
        for n in range(10):
            once(n)
        started = time.perf_counter()
        for n in range(cells):
            once(n)
        return (time.perf_counter() - started) / cells
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)


def model_floor(fake: FakeLLM, replies: int) -> float:
    """Seconds per streamed ``run_cell`` reply through the ``openai`` async client."""

    async def go() -> float:
        client = openai.AsyncOpenAI(base_url=fake.base_url, api_key="k", max_retries=0)
        messages = [{"role": "user", "content": "go"}]
        times = []
        for i in range(replies + 5):
            started = time.perf_counter()
            stream = await client.chat.completions.create(
                model="m", messages=messages, stream=True, stream_options={"include_usage": True}
            )
            async for _ in stream:
                pass
            if i >= 5:
                times.append(time.perf_counter() - started)
        await client.close()
        return statistics.fmean(times)

    fake.enqueue(*[run_cell(code(n)) for n in range(replies + 5)])
    return asyncio.run(go())


def agent_per_cell(fake: FakeLLM, cells: int, workdir: Path, profile: bool) -> float:
    settings = Settings.from_env(
        env={},
        base_url=fake.base_url,
        model="bench-model",
        api_key="k",
        notebook_dir=workdir / "nbs",
        cwd=workdir,
        sandbox="none",
        max_steps=cells + 10,
        clean_notebook=False,
    )
    fake.enqueue(run_cell("x = 0"), text("warm"))
    with Agent(settings) as agent:
        agent.run_to_end("warm up")  # the kernel and the endpoint start here, not timed
        # an answer the levers accept: it states the value the last cell printed
        answer = text(f"x is {cells}.")
        fake.enqueue(*[run_cell(code(n)) for n in range(cells)], answer)
        profiler = cProfile.Profile() if profile else None
        started = time.perf_counter()
        if profiler:  # the loop runs in the agent's own thread: profile that one
            agent._bg.run(_call(profiler.enable))
        result = agent.run_to_end("count")
        if profiler:
            agent._bg.run(_call(profiler.disable))
        elapsed = time.perf_counter() - started
    assert result.status == "ok" and len(result.cells) == cells, (result.status, result.answer)
    if profiler:
        order = os.environ.get("BENCH_SORT", "cumulative")  # or tottime
        pstats.Stats(profiler).sort_stats(order).print_stats(30)
    return elapsed / (cells + 1)  # cells + the final answer's reply


async def _call(fn: Callable[[], None]) -> None:
    fn()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cells", type=int, default=60)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--profile", action="store_true")
    args = parser.parse_args()
    rounds: list[tuple[float, float, float]] = []
    with FakeLLM() as fake, tempfile.TemporaryDirectory() as tmp:
        for round_ in range(1, args.rounds + 1):
            kernel = kernel_floor(args.cells)
            model = model_floor(fake, args.cells)
            profile = args.profile and round_ == args.rounds
            work = Path(tmp) / str(round_)
            work.mkdir()
            rounds.append((kernel, model, agent_per_cell(fake, args.cells, work, profile)))
    for kernel, model, agent in rounds:
        print(
            f"round: kernel {kernel * 1e3:6.2f} ms + model {model * 1e3:6.2f} ms, "
            f"agent {agent * 1e3:6.2f} ms: {agent / (kernel + model):5.2f}x"
        )
    # each round's ratio pairs measurements taken seconds apart; the median round counts
    kernel, model, agent = sorted(rounds, key=lambda r: r[2] / (r[0] + r[1]))[len(rounds) // 2]
    floor = kernel + model
    ratio = agent / floor
    print(f"raw kernel round trip      {kernel * 1e3:7.2f} ms")
    print(f"one streamed model reply   {model * 1e3:7.2f} ms")
    print(f"floor (their sum)          {floor * 1e3:7.2f} ms")
    print(f"agent per cell             {agent * 1e3:7.2f} ms  ({args.cells} cells of {CODE!r})")
    median = f"median of {args.rounds} rounds"
    print(f"ratio                      {ratio:7.2f}x  (target <= {TARGET}x; {median})")


if __name__ == "__main__":
    main()
