"""What tracing costs per cell: off, and on, against a run without OpenTelemetry at all.

    python bench/bench_tracing.py [--cells 30] [--rounds 3]

Each configuration runs in a fresh process, in turn, ``--rounds`` times (the machine is
shared and noisy: alternating spreads the noise over all of them). A process starts one
agent on a real kernel and the scripted server (tests/fake_openai.py), warms up, then
times tasks of ``--cells`` ``run_cell("x += 1")`` replies each:

- ``no-otel``: ``opentelemetry`` cannot be imported at all (as without the extra);
- ``off``: the extra is installed, tracing is not asked for (the default);
- ``memory``: spans go to the SDK's in-memory exporter (the tracer's and the SDK's cost);
- ``otlp``: spans go by OTLP/HTTP (batched) to a receiver on 127.0.0.1.

Printed: the median time per cell of each, and its ratio to ``no-otel`` measured in the
same run; then the tracer's own cost per cell, timed alone (a model call and a cell).
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
MODES = ("no-otel", "off", "memory", "otlp")


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


def child(mode: str, cells: int, tasks: int) -> None:
    """One configuration: print the seconds per cell of each timed task as JSON."""
    import os
    import tempfile

    if mode == "no-otel":
        sys.modules["opentelemetry"] = None  # type: ignore[assignment]  # import fails
    from fake_openai import FakeLLM, run_cell, text

    from kernel_agent.agent import Agent
    from kernel_agent.settings import Settings

    extra: dict[str, Any] = {}
    receiver = None
    if mode == "memory":
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import SimpleSpanProcessor
        from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

        provider = TracerProvider()
        provider.add_span_processor(SimpleSpanProcessor(InMemorySpanExporter()))
        extra["tracer_provider"] = provider
    trace = None
    if mode == "otlp":
        receiver = _receiver()
        os.environ["OTEL_EXPORTER_OTLP_ENDPOINT"] = f"http://127.0.0.1:{receiver.server_port}"
        trace = "otlp"
    per_cell = []
    with FakeLLM() as fake, tempfile.TemporaryDirectory() as tmp:
        settings = Settings.from_env(
            env={}, base_url=fake.base_url, model="bench", api_key="k", sandbox="none",
            cwd=Path(tmp), notebook_dir=Path(tmp), clean_notebook=False, levers="none",
            max_steps=cells + 1, trace=trace,
        )  # fmt: skip
        with Agent(settings, **extra) as agent:
            for task in range(tasks + 1):  # the first one warms up
                fake.enqueue(*[run_cell("x = 0" if i == 0 else "x += 1") for i in range(cells)])
                fake.enqueue(text("done"))
                started = time.perf_counter()
                result = agent.run_to_end(f"count {task}")
                elapsed = time.perf_counter() - started
                assert result.status == "ok" and len(result.cells) == cells, result.answer
                if task:
                    per_cell.append(elapsed / cells)
    if receiver is not None:
        receiver.shutdown()
    loaded = any(m.startswith("opentelemetry") for m in sys.modules if sys.modules[m] is not None)
    print(json.dumps({"mode": mode, "per_cell": per_cell, "otel_loaded": loaded}))


def tracer_alone(n: int = 2000) -> float:
    """Microseconds per cell the RunTracer itself takes (one ModelCalled, one CellFinished)."""
    from datetime import datetime, timedelta, timezone

    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from kernel_agent.events import CellFinished, ModelCalled, RunStarted
    from kernel_agent.llm_stream import Completion, Usage
    from kernel_agent.results import CellResult
    from kernel_agent.settings import Settings
    from kernel_agent.tracing import make_tracer

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
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--child", choices=MODES, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        return child(args.child, args.cells, args.tasks)
    times: dict[str, list[float]] = {m: [] for m in MODES}
    loaded: dict[str, bool] = {}
    for _ in range(args.rounds):
        for mode in MODES:
            out = subprocess.run(
                [sys.executable, __file__, "--child", mode, "--cells", str(args.cells),
                 "--tasks", str(args.tasks)],
                capture_output=True, text=True, check=True, cwd=ROOT,
            )  # fmt: skip
            data = json.loads(out.stdout.strip().splitlines()[-1])
            times[mode] += data["per_cell"]
            loaded[mode] = data["otel_loaded"]
    base, floor = statistics.median(times["no-otel"]), min(times["no-otel"])
    print(f"tracing cost per cell ({args.cells} cells x {args.tasks} tasks x {args.rounds} rounds)")
    print(f"{'mode':<9} {'median ms':>9} {'ratio':>6} {'best ms':>8} {'ratio':>6}  otel imported")
    for mode in MODES:
        median, best = statistics.median(times[mode]), min(times[mode])
        print(
            f"{mode:<9} {median * 1e3:9.2f} {median / base:6.3f} {best * 1e3:8.2f} "
            f"{best / floor:6.3f}  {loaded[mode]}"
        )
    print(f"the tracer alone, in-memory exporter: {tracer_alone():.0f} us per cell")


if __name__ == "__main__":
    main()
