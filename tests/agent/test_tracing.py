"""OpenTelemetry traces of real runs: the SDK's in-memory exporter, JSON lines, and OTLP/HTTP
to a receiver on 127.0.0.1 that the test starts (the real console script exporting)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from fake_openai import FakeLLM, run_cell, scripted_settings, text
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

from kernel_agent.agent import Agent
from kernel_agent.agent.tracing import make_tracer
from kernel_agent.settings import Settings

pytestmark = pytest.mark.timeout(120)


def settings_for(fake: FakeLLM, tmp_path: Path, **kw: Any) -> Settings:
    return scripted_settings(fake, tmp_path, **(dict(clean_notebook=False, temperature=0.25) | kw))


def traced_run(fake: FakeLLM, tmp_path: Path, **kw: Any) -> tuple[Any, list[Any]]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    with Agent(settings_for(fake, tmp_path, **kw), tracer_provider=provider) as agent:
        result = agent.run_to_end("compute x")
    return result, list(exporter.get_finished_spans())


def by_name(spans: list[Any], name: str) -> list[Any]:
    return sorted((s for s in spans if s.name == name), key=lambda s: s.start_time)


def test_spans_of_a_run_its_model_calls_and_cells(fake_llm: FakeLLM, tmp_path: Path) -> None:
    fake_llm.enqueue(
        run_cell("x = 6 * 7"), run_cell("1 / 0"), run_cell("print(x)"), text("x is 42")
    )
    result, spans = traced_run(fake_llm, tmp_path)
    assert result.status == "ok"
    (run,) = by_name(spans, "invoke_agent kernel-agent")
    chats = by_name(spans, "chat test-model")
    cells = by_name(spans, "execute_tool run_cell")
    assert len(chats) == 4 and len(cells) == 3 and len(spans) == 8
    # one trace; every other span is a child of the run
    assert {s.context.trace_id for s in spans} == {run.context.trace_id}
    assert all(s.parent.span_id == run.context.span_id for s in chats + cells)
    assert run.parent is None
    assert (
        run.attributes["kernel_agent.status"] == "ok" and run.attributes["kernel_agent.cells"] == 3
    )
    assert run.attributes["gen_ai.usage.input_tokens"] == result.usage.prompt_tokens
    assert run.attributes["jupyter.kernel.name"] == "python3"
    assert run.status.status_code is StatusCode.OK
    # model calls: GenAI semantic conventions
    first = chats[0]
    assert first.kind is SpanKind.CLIENT
    assert first.attributes["gen_ai.operation.name"] == "chat"
    assert first.attributes["gen_ai.provider.name"] == "custom"
    assert first.attributes["gen_ai.request.model"] == "test-model"
    assert first.attributes["gen_ai.request.temperature"] == 0.25
    assert first.attributes["gen_ai.response.finish_reasons"] == ("tool_calls",)
    assert chats[-1].attributes["gen_ai.response.finish_reasons"] == ("stop",)
    request = fake_llm.requests[0]
    assert (
        first.attributes["gen_ai.usage.input_tokens"] == len(json.dumps(request["messages"])) // 4
    )
    assert first.attributes["kernel_agent.usage.source"] == "reported"
    assert first.attributes["server.address"] == "127.0.0.1"
    assert first.attributes["server.port"] == fake_llm.port
    ttft = first.attributes["gen_ai.response.time_to_first_chunk"]
    assert 0 < ttft * 1e9 <= first.end_time - first.start_time
    # cells: status, execution count, duration, kernel; the failing one is an error
    assert [c.attributes["kernel_agent.cell.status"] for c in cells] == ["ok", "error", "ok"]
    counts = [c.attributes["kernel_agent.cell.execution_count"] for c in cells]
    assert counts == [counts[0], counts[0] + 1, counts[0] + 2]
    assert cells[1].status.status_code is StatusCode.ERROR
    assert cells[1].attributes["error.type"] == "ZeroDivisionError"
    for chat, cell, cell_result in zip(chats[:3], cells, result.cells, strict=True):
        assert chat.end_time <= cell.start_time  # the model wrote the cell before it ran
        assert cell.attributes["jupyter.kernel.name"] == "python3"
        assert abs((cell.end_time - cell.start_time) / 1e9 - cell_result.duration) < 1e-3
    # nothing the model or the user wrote is in the spans without --trace-content
    every = json.dumps([dict(s.attributes) for s in spans])
    assert "6 * 7" not in every and "compute x" not in every and "x is 42" not in every


def test_trace_content_puts_prompts_replies_and_code_in(fake_llm: FakeLLM, tmp_path: Path) -> None:
    fake_llm.enqueue(run_cell("x = 6 * 7\nprint(x)"), text("x is 42"))
    _, spans = traced_run(fake_llm, tmp_path, trace_content=True)
    chat = by_name(spans, "chat test-model")[0]
    sent = json.loads(chat.attributes["gen_ai.input.messages"])
    assert sent == fake_llm.requests[0]["messages"]
    said = json.loads(chat.attributes["gen_ai.output.messages"])
    assert said[0]["tool_calls"][0]["function"]["name"] == "run_cell"
    assert by_name(spans, "execute_tool run_cell")[0].attributes["kernel_agent.cell.code"] == (
        "x = 6 * 7\nprint(x)"
    )
    (run,) = by_name(spans, "invoke_agent kernel-agent")
    assert run.attributes["kernel_agent.task"] == "compute x"
    assert run.attributes["kernel_agent.answer"] == "x is 42"


def test_a_restart_and_the_rebuild_are_in_the_trace(fake_llm: FakeLLM, tmp_path: Path) -> None:
    fake_llm.enqueue(
        run_cell("x = 1"), run_cell("import os; os._exit(1)"), run_cell("print(x)"), text("1")
    )
    result, spans = traced_run(fake_llm, tmp_path)
    assert [c.status for c in result.cells] == ["ok", "died", "ok"]
    died = by_name(spans, "execute_tool run_cell")[1]
    assert [e.name for e in died.events] == ["kernel.restart"]
    (rebuild,) = by_name(spans, "rebuild_state")
    assert rebuild.attributes["kernel_agent.rebuild.replayed"] == 1
    assert died.end_time <= rebuild.start_time
    (run,) = by_name(spans, "invoke_agent kernel-agent")
    notices = [e.attributes["kernel_agent.notice.text"] for e in run.events]
    assert any("replaying 1 cells" in n for n in notices)


def test_jsonl_exporter_writes_one_span_a_line(fake_llm: FakeLLM, tmp_path: Path) -> None:
    fake_llm.enqueue(run_cell("print(1)"), text("one"))
    path = tmp_path / "spans.jsonl"
    with Agent(settings_for(fake_llm, tmp_path, trace=f"jsonl:{path}")) as agent:
        agent.run_to_end("print one")
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    assert [x["name"] for x in lines] == [
        "chat test-model",
        "execute_tool run_cell",
        "chat test-model",
        "invoke_agent kernel-agent",
    ]
    assert lines[-1]["resource"]["attributes"]["service.name"] == "kernel-agent"


def test_tracing_is_off_and_not_imported_by_default() -> None:
    assert make_tracer(Settings.from_env(env={})) is None
    code = (
        "import sys; from kernel_agent.settings import Settings; "
        "from kernel_agent.agent import AsyncAgent; "
        "AsyncAgent(Settings.from_env(env={}, model='m', api_key='k')); "
        "print(sorted(m for m in sys.modules if m.startswith('opentelemetry')))"
    )
    from crossing import SRC

    env = {**os.environ, "PYTHONPATH": str(SRC)}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert out.stdout.strip() == "[]", out.stderr


def test_settings_take_the_exporter_from_the_standard_environment() -> None:
    assert Settings.from_env(env={"OTEL_EXPORTER_OTLP_ENDPOINT": "http://x:4318"}).trace == "otlp"
    assert Settings.from_env(env={"OTEL_TRACES_EXPORTER": "console"}).trace == "console"
    off = {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://x:4318", "OTEL_SDK_DISABLED": "true"}
    assert Settings.from_env(env=off).trace is None
    assert Settings.from_env(env={"OTEL_TRACES_EXPORTER": "none",
                                  "OTEL_EXPORTER_OTLP_ENDPOINT": "http://x"}).trace is None  # fmt: skip


# -- OTLP/HTTP to a receiver on loopback --------------------------------------------------


class Receiver:
    """A tiny OTLP/HTTP trace receiver: POST /v1/traces, protobuf bodies, decoded."""

    def __init__(self) -> None:
        self.requests: list[ExportTraceServiceRequest] = []
        self.paths: list[str] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["content-length"]))
                outer.paths.append(self.path)
                message = ExportTraceServiceRequest()
                message.ParseFromString(body)
                outer.requests.append(message)
                self.send_response(200)
                self.send_header("content-type", "application/x-protobuf")
                self.send_header("content-length", "0")
                self.end_headers()

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def spans(self) -> list[Any]:
        return [
            span
            for request in self.requests
            for resource in request.resource_spans
            for scope in resource.scope_spans
            for span in scope.spans
        ]


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    r = Receiver()
    yield r
    r.server.shutdown()
    r.server.server_close()


def cli(args: list[str], env_extra: dict[str, str]) -> subprocess.CompletedProcess[str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("OPENAI_", "KERNEL_AGENT_", "OTEL_"))
    }
    env.update(env_extra)
    return subprocess.run([sys.executable, "-m", "kernel_agent", *args], capture_output=True,
                          text=True, env=env, timeout=90)  # fmt: skip


@pytest.mark.parametrize("how", ["--trace otlp", "OTEL_EXPORTER_OTLP_ENDPOINT only"])
def test_otlp_export_to_a_loopback_receiver(
    fake_llm: FakeLLM, tmp_path: Path, receiver: Receiver, how: str
) -> None:
    fake_llm.enqueue(run_cell("print(6 * 7)"), text("42"))
    flags = ["--trace", "otlp"] if how.startswith("--trace") else []
    proc = cli(
        [
            "run",
            *flags,
            "--base-url",
            fake_llm.base_url,
            "--model",
            "test-model",
            "--api-key",
            "sk-test",
            "--sandbox",
            "none",
            "--cwd",
            str(tmp_path),
            "--notebook",
            str(tmp_path / "run.ipynb"),
            "what is 6 * 7?",
        ],  # fmt: skip
        {"OTEL_EXPORTER_OTLP_ENDPOINT": receiver.url, "OTEL_SERVICE_NAME": "otlp-test"},
    )
    assert proc.returncode == 0, proc.stderr
    assert set(receiver.paths) == {"/v1/traces"}
    spans = receiver.spans()
    names = sorted(s.name for s in spans)
    assert names == sorted(
        ["invoke_agent kernel-agent", "chat test-model", "chat test-model", "execute_tool run_cell"]
    )
    run = next(s for s in spans if s.name == "invoke_agent kernel-agent")
    assert all(s.trace_id == run.trace_id for s in spans)
    chat = next(s for s in spans if s.name == "chat test-model")
    attrs = {a.key: a.value for a in chat.attributes}
    assert attrs["gen_ai.request.model"].string_value == "test-model"
    assert attrs["gen_ai.usage.output_tokens"].int_value > 0
    resource = receiver.requests[0].resource_spans[0].resource
    service = {a.key: a.value.string_value for a in resource.attributes}["service.name"]
    assert service == "otlp-test"


def test_console_spans_go_to_stderr_and_stdout_keeps_the_result(
    fake_llm: FakeLLM, tmp_path: Path
) -> None:
    fake_llm.enqueue(run_cell("print(6 * 7)"), text("42"))
    proc = cli(
        [
            "run",
            "--trace",
            "console",
            "--format",
            "plain",
            "--base-url",
            fake_llm.base_url,
            "--model",
            "test-model",
            "--api-key",
            "sk-test",
            "--sandbox",
            "none",
            "--cwd",
            str(tmp_path),
            "--notebook",
            str(tmp_path / "run.ipynb"),
            "what is 6 * 7?",
        ],  # fmt: skip
        {},
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "42"
    assert '"name": "invoke_agent kernel-agent"' in proc.stderr
    assert proc.stderr.count('"name": "chat test-model"') == 2
