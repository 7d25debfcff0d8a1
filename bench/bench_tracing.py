"""What tracing costs per cell: off, and on, against a run without OpenTelemetry at all.

    python bench/bench_tracing.py [--cells 30] [--rounds 3]

An agent on a real kernel and the scripted server (tests/fake_openai.py) runs tasks of
``--cells`` ``run_cell("x += 1")`` replies each. Measured in the same run:

- in fresh processes, in turn, ``--rounds`` times: ``no-otel`` (``opentelemetry`` cannot be
  imported at all, as without the extra) and ``off`` (installed, not asked for: the default);
- in one process, three agents side by side, a task of each in turn (``--paired-rounds``):
  ``off``, ``memory`` (spans to the SDK's in-memory exporter) and ``otlp`` (OTLP/HTTP,
  batched, to a receiver on 127.0.0.1); the ratio to ``off`` of the neighbouring task, so
  the load of a shared machine mostly cancels;
- the tracer's own cost per cell, timed alone (one model call and one cell).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
PROCESS_MODES = ("no-otel", "off")


def _receiver() -> ThreadingHTTPServer:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:
            pass

        def do_POST(self) -> None:
            self.rfile.read(int(self.headers["content-length"]))
            self.send_response(200)
            self.send_header("content-length", "0")
            self.end_headers()

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def _agent(mode: str, fake: Any, workdir: Path, cells: int) -> Any:
    """An agent on a real kernel whose tracing is ``mode`` (off, memory or otlp)."""
    from kernel_agent.agent import Agent
    from kernel_agent.settings import Settings

    extra: dict[str, Any] = {}
    if mode == "memory":
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import SimpleSpanProcessor
        from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

        provider = TracerProvider()
        provider.add_span_processor(SimpleSpanProcessor(InMemorySpanExporter()))
        extra["tracer_provider"] = provider
    settings = Settings.from_env(
        env={}, base_url=fake.base_url, model="bench", api_key="k", sandbox="none",
        cwd=workdir, notebook_dir=workdir, clean_notebook=False, levers="none",
        max_steps=cells + 1, trace="otlp" if mode == "otlp" else None,
    )  # fmt: skip
    return Agent(settings, **extra)


def _per_cell(agent: Any, fake: Any, cells: int) -> float:
    """Seconds per cell of one task of ``cells`` ``x += 1`` cells."""
    from fake_openai import run_cell, text

    fake.enqueue(*[run_cell("x = 0" if i == 0 else "x += 1") for i in range(cells)], text("done"))
    started = time.perf_counter()
    result = agent.run_to_end("count")
    elapsed = time.perf_counter() - started
    assert result.status == "ok" and len(result.cells) == cells, result.answer
    return elapsed / cells


def child(mode: str, cells: int, tasks: int) -> None:
    """``no-otel`` or ``off`` in a process of its own: the seconds per cell of each task."""
    import tempfile

    if mode == "no-otel":
        sys.modules["opentelemetry"] = None  # type: ignore[assignment]  # import fails
    from fake_openai import FakeLLM

    with FakeLLM() as fake, tempfile.TemporaryDirectory() as tmp:
        with _agent("off", fake, Path(tmp), cells) as agent:
            _per_cell(agent, fake, cells)  # warm-up
            per_cell = [_per_cell(agent, fake, cells) for _ in range(tasks)]
    loaded = any(m.startswith("opentelemetry") for m in sys.modules if sys.modules[m] is not None)
    print(json.dumps({"mode": mode, "per_cell": per_cell, "otel_loaded": loaded}))


def paired(cells: int, rounds: int) -> dict[str, list[float]]:
    """off, memory and otlp agents side by side, a task each in turn: per round, each mode's
    time per cell divided by off's (neighbours in time, so the machine's load cancels)."""
    import os
    import tempfile

    from fake_openai import FakeLLM

    receiver = _receiver()
    os.environ["OTEL_EXPORTER_OTLP_ENDPOINT"] = f"http://127.0.0.1:{receiver.server_port}"
    ratios: dict[str, list[float]] = {"memory": [], "otlp": []}
    with FakeLLM() as fake, tempfile.TemporaryDirectory() as tmp:
        agents = {m: _agent(m, fake, Path(tmp), cells) for m in ("off", "memory", "otlp")}
        try:
            for agent in agents.values():
                _per_cell(agent, fake, cells)  # warm-up
            for r in range(rounds):
                order = list(agents)[r % 3 :] + list(agents)[: r % 3]
                seconds = {m: _per_cell(agents[m], fake, cells) for m in order}
                for mode in ratios:
                    ratios[mode].append(seconds[mode] / seconds["off"])
        finally:
            for agent in agents.values():
                agent.close()
    receiver.shutdown()
    return ratios


def tracer_alone(n: int = 2000) -> float:
    """Microseconds per cell the RunTracer itself takes (one ModelCalled, one CellFinished)."""
    from datetime import datetime, timedelta, timezone

    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from kernel_agent.agent.tracing import make_tracer
    from kernel_agent.events import CellFinished, ModelCalled, RunStarted
    from kernel_agent.llm.stream import Completion, Usage
    from kernel_agent.results import CellResult
    from kernel_agent.settings import Settings

    provider = TracerProvider()
    exporter = InMemorySpanExporter()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = make_tracer(Settings.from_env(env={}), provider)
    assert tracer is not None
    tracer.on(RunStarted("t", "custom:m", "tools", None, "none", "python3", "http://127.0.0.1:1"))
    now = datetime.now(timezone.utc)
    cell = CellResult("x += 1", "ok", 1, [], None, now, now + timedelta(milliseconds=5))
    called = ModelCalled(1, "custom:m", Completion("", usage=Usage(10, 2, 12)), 0.01, 0.005)
    finished = CellFinished(1, cell)
    started = time.perf_counter()
    for i in range(n):
        tracer.on(called)
        tracer.on(finished)
        if i % 200 == 0:
            exporter.clear()
    return (time.perf_counter() - started) / n * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cells", type=int, default=30)
    parser.add_argument("--tasks", type=int, default=3, help="timed tasks per process")
    parser.add_argument("--rounds", type=int, default=3, help="process rounds")
    parser.add_argument("--paired-rounds", type=int, default=15)
    parser.add_argument("--child", choices=PROCESS_MODES, help=argparse.SUPPRESS)
    args = parser.parse_args()
    import logging
    import warnings

    warnings.simplefilter("ignore")  # "the kernel runs unsandboxed": --sandbox none on purpose
    logging.disable(logging.WARNING)
    if args.child:
        return child(args.child, args.cells, args.tasks)
    times: dict[str, list[float]] = {m: [] for m in PROCESS_MODES}
    loaded: dict[str, bool] = {}
    for _ in range(args.rounds):
        for mode in PROCESS_MODES:
            out = subprocess.run(
                [sys.executable, __file__, "--child", mode, "--cells", str(args.cells),
                 "--tasks", str(args.tasks)],
                capture_output=True, text=True, check=True, cwd=ROOT,
            )  # fmt: skip
            data = json.loads(out.stdout.strip().splitlines()[-1])
            times[mode] += data["per_cell"]
            loaded[mode] = data["otel_loaded"]
    print(f"tracing cost per cell of x += 1 ({args.cells} cells a task)")
    base = statistics.median(times["no-otel"])
    print(f"processes, {args.rounds} rounds x {args.tasks} tasks, alternating:")
    for mode in PROCESS_MODES:
        median = statistics.median(times[mode])
        print(
            f"  {mode:<8} {median * 1e3:7.2f} ms/cell  ratio {median / base:5.3f}  "
            f"opentelemetry imported: {loaded[mode]}"
        )
    ratios = paired(args.cells, args.paired_rounds)
    print(f"one process, {args.paired_rounds} rounds, a task of each in turn (ratio to off):")
    for mode, values in ratios.items():
        q = statistics.quantiles(values, n=4)
        print(
            f"  {mode:<8} median {statistics.median(values):5.3f}  "
            f"(quartiles {q[0]:.3f}-{q[2]:.3f})"
        )
    print(f"the tracer alone, in-memory exporter: {tracer_alone():.0f} us per cell")


if __name__ == "__main__":
    main()
