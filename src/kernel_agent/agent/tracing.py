"""OpenTelemetry traces of agent runs (the extra ``kernel-agent[otel]``).

Off by default, and then nothing here is imported: :func:`make_tracer` returns None and
the loop skips one ``is None`` test per event. When on, a :class:`RunTracer` reads the
run's events (it never reaches into the loop) and makes, per run::

    invoke_agent kernel-agent              the run: status, cells, tokens, cost, time split
    ├── chat MODEL                         each model call, GenAI semantic conventions:
    │                                      model, token counts, finish reason, time to first
    │                                      chunk, server address
    ├── execute_tool run_cell              each cell: status, execution count, duration,
    │                                      kernel; a ``kernel.restart`` event if it restarted
    └── rebuild_state                      the replay after a restart

Spans carry the times the events report (a cell's own start and end), so the timeline is
that of the work, not of whoever consumes the events. Prompts, replies, the task and code
go into spans only with ``trace_content`` (``--trace-content``).

Exporters: ``otlp`` (OTLP/HTTP, configured by the standard ``OTEL_EXPORTER_OTLP_*``
variables), ``console``, or ``jsonl:PATH`` (one span per line, appended). A
``TracerProvider`` passed in (tests, an application that has its own) is used as is.
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any
from urllib.parse import urlsplit

from ..errors import ConfigError
from ..events import (
    CellFinished,
    Event,
    ModelCalled,
    Notice,
    RunFinished,
    RunStarted,
    StateRebuilt,
)
from ..settings import Settings

__all__ = ["RunTracer", "make_tracer"]

_NS = 1_000_000_000


def make_tracer(
    settings: Settings,
    provider: Any = None,
    messages: Callable[[], Sequence[dict[str, Any]]] | None = None,
) -> RunTracer | None:
    """The tracer ``settings.trace`` (or ``provider``) asks for; None when tracing is off.

    ``messages()`` gives the prompt of the model call being traced (for ``trace_content``).
    """
    if provider is None and settings.trace is None:
        return None
    try:
        from opentelemetry.sdk.trace import TracerProvider
    except ImportError:
        raise ConfigError("traces need OpenTelemetry: pip install 'kernel-agent[otel]'") from None
    owned = None
    if provider is None:
        from opentelemetry.sdk.resources import Resource

        attributes = {} if os.environ.get("OTEL_SERVICE_NAME") else {"service.name": "kernel-agent"}
        provider = owned = TracerProvider(resource=Resource.create(attributes))
        owned.add_span_processor(_processor(str(settings.trace)))
    from ..version import __version__

    tracer = provider.get_tracer("kernel_agent", __version__)
    return RunTracer(tracer, content=settings.trace_content, messages=messages, owned=owned)


def _processor(kind: str) -> Any:
    from opentelemetry.sdk.trace.export import (
        BatchSpanProcessor,
        ConsoleSpanExporter,
        SimpleSpanProcessor,
    )

    if kind == "otlp":
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

        return BatchSpanProcessor(OTLPSpanExporter())
    if kind == "console":  # on stderr: stdout carries only the run's result
        return SimpleSpanProcessor(ConsoleSpanExporter(out=sys.stderr))
    return SimpleSpanProcessor(_jsonl_exporter(kind.removeprefix("jsonl:")))


def _jsonl_exporter(path: str) -> Any:
    from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

    class JsonLinesExporter(SpanExporter):
        """Each finished span as one line of JSON, appended to ``path``."""

        def export(self, spans: Sequence[Any]) -> SpanExportResult:
            lines = "".join(json.dumps(json.loads(s.to_json())) + "\n" for s in spans)
            with open(path, "a", encoding="utf-8") as fh:
                fh.write(lines)
            return SpanExportResult.SUCCESS

    return JsonLinesExporter()


def _ns(when: datetime) -> int:
    return int(when.timestamp() * _NS)


class RunTracer:
    """Turns one agent's events into spans; :meth:`on` is fed every event of every run."""

    def __init__(
        self,
        tracer: Any,
        *,
        content: bool = False,
        messages: Callable[[], Sequence[dict[str, Any]]] | None = None,
        owned: Any = None,
    ) -> None:
        from opentelemetry import trace

        self._trace = trace
        self._tracer = tracer
        self.content = content
        self._messages = messages
        self._owned = owned  # a provider we made: flushed and shut down by close()
        self._run: Any = None
        self._context: Any = None
        self._kernel = ""
        self._server: tuple[str, int | None] = ("", None)

    def on(self, event: Event) -> None:
        handler = _HANDLERS.get(type(event))
        if handler is not None:
            handler(self, event)

    # ---------------------------------------------------------------- the run
    def _run_started(self, event: RunStarted) -> None:
        provider, _, model = event.model.partition(":")
        self._kernel = event.kernel
        url = urlsplit(event.base_url) if event.base_url else None
        self._server = (url.hostname or "", url.port) if url else ("", None)
        attributes: dict[str, Any] = {
            "gen_ai.operation.name": "invoke_agent",
            "gen_ai.agent.name": "kernel-agent",
            "gen_ai.provider.name": provider,
            "gen_ai.request.model": model,
            "kernel_agent.protocol": event.protocol,
            "kernel_agent.notebook": str(event.notebook or ""),
            "kernel_agent.sandbox": event.sandbox,
            "jupyter.kernel.name": event.kernel,
        }
        if self.content:
            attributes["kernel_agent.task"] = event.task
        self._run = self._tracer.start_span(
            "invoke_agent kernel-agent", attributes=attributes, context=self._trace.Context()
        )
        self._context = self._trace.set_span_in_context(self._run)

    def _run_finished(self, event: RunFinished) -> None:
        if self._run is None:
            return
        result, span = event.result, self._run
        usage = result.usage
        span.set_attributes(
            {
                "kernel_agent.status": result.status,
                "kernel_agent.cells": len(result.cells),
                "gen_ai.usage.input_tokens": usage.prompt_tokens,
                "gen_ai.usage.output_tokens": usage.completion_tokens,
                "kernel_agent.usage.source": usage.source,
                "kernel_agent.duration_s": round(result.duration_s, 6),
                "kernel_agent.model_time_s": round(result.model_time_s, 6),
                "kernel_agent.kernel_time_s": round(result.kernel_time_s, 6),
            }
        )
        if result.cost is not None:
            span.set_attribute("kernel_agent.cost_usd", result.cost)
        if result.budget and result.budget.get("stopped_by"):
            span.set_attribute("kernel_agent.budget.stopped_by", result.budget["stopped_by"])
        if self.content:
            span.set_attribute("kernel_agent.answer", result.answer)
        if result.status in ("failed", "error"):
            span.set_status(self._trace.StatusCode.ERROR, result.answer[:200])
        elif result.status == "ok":
            span.set_status(self._trace.StatusCode.OK)
        span.end()
        self._run = self._context = None

    def fail(self, exc: BaseException) -> None:
        """The run raised: the run span records the exception and ends."""
        if self._run is None:
            return
        self._run.record_exception(exc)
        self._run.set_status(self._trace.StatusCode.ERROR, f"{type(exc).__name__}: {exc}"[:200])
        self._run.end()
        self._run = self._context = None

    # --------------------------------------------------------- its children
    def _model_called(self, event: ModelCalled) -> None:
        provider, _, model = event.model.partition(":")
        completion = event.completion
        end = self._now()
        attributes: dict[str, Any] = {
            "gen_ai.operation.name": "chat",
            "gen_ai.provider.name": provider,
            "gen_ai.request.model": model,
            "gen_ai.response.model": completion.model or model,
            "gen_ai.response.finish_reasons": [completion.finish_reason or "unknown"],
            "kernel_agent.step": event.step,
        }
        for name in ("temperature", "top_p", "max_tokens", "seed"):
            if event.request.get(name) is not None:
                attributes[f"gen_ai.request.{name}"] = event.request[name]
        if completion.usage is not None:
            attributes["gen_ai.usage.input_tokens"] = completion.usage.prompt_tokens
            attributes["gen_ai.usage.output_tokens"] = completion.usage.completion_tokens
            attributes["kernel_agent.usage.source"] = completion.usage.source
        if event.first_token_s is not None:
            attributes["gen_ai.response.time_to_first_chunk"] = round(event.first_token_s, 6)
        host, port = self._server
        if host:
            attributes["server.address"] = host
        if port:
            attributes["server.port"] = port
        if self.content:
            if self._messages is not None:
                attributes["gen_ai.input.messages"] = json.dumps(list(self._messages()))
            attributes["gen_ai.output.messages"] = json.dumps(
                [completion.assistant_message() | {"finish_reason": completion.finish_reason}]
            )
        span = self._tracer.start_span(
            f"chat {model}",
            context=self._context,
            kind=self._trace.SpanKind.CLIENT,
            attributes=attributes,
            start_time=end - int(event.duration_s * _NS),
        )
        span.end(end_time=end)

    def _cell_finished(self, event: CellFinished) -> None:
        cell = event.result
        attributes: dict[str, Any] = {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": "run_cell",
            "kernel_agent.step": event.step,
            "kernel_agent.cell.status": cell.status,
            "kernel_agent.cell.duration_s": round(cell.duration, 6),
            "kernel_agent.cell.restarted": cell.restarted,
        }
        if cell.execution_count is not None:
            attributes["kernel_agent.cell.execution_count"] = cell.execution_count
        if self._kernel:
            attributes["jupyter.kernel.name"] = self._kernel
        if self.content:
            attributes["kernel_agent.cell.code"] = cell.code
        span = self._tracer.start_span(
            "execute_tool run_cell",
            context=self._context,
            attributes=attributes,
            start_time=_ns(cell.started),
        )
        if cell.error is not None:
            span.set_attribute("error.type", cell.error.ename)
            span.set_status(self._trace.StatusCode.ERROR, str(cell.error)[:200])
        if cell.restarted:
            span.add_event("kernel.restart", {"kernel_agent.cell.status": cell.status})
        span.end(end_time=_ns(cell.ended))

    def _state_rebuilt(self, event: StateRebuilt) -> None:
        end = self._now()
        span = self._tracer.start_span(
            "rebuild_state",
            context=self._context,
            attributes={
                "kernel_agent.rebuild.replayed": event.replayed,
                "kernel_agent.rebuild.skipped": event.skipped,
            },
            start_time=end - int(event.duration_s * _NS),
        )
        span.end(end_time=end)

    def _notice(self, event: Notice) -> None:
        if self._run is not None:
            self._run.add_event(
                "kernel_agent.notice",
                {"kernel_agent.notice.level": event.level, "kernel_agent.notice.text": event.text},
            )

    @staticmethod
    def _now() -> int:
        return time.time_ns()

    def close(self) -> None:
        """End a run left open, and flush and shut down a provider made here."""
        if self._run is not None:
            self._run.end()
            self._run = None
        if self._owned is not None:
            self._owned.shutdown()
            self._owned = None


_HANDLERS: dict[type, Callable[[RunTracer, Any], None]] = {
    RunStarted: RunTracer._run_started,
    RunFinished: RunTracer._run_finished,
    ModelCalled: RunTracer._model_called,
    CellFinished: RunTracer._cell_finished,
    StateRebuilt: RunTracer._state_rebuilt,
    Notice: RunTracer._notice,
}
