"""A scripted OpenAI-compatible chat-completions server for tests.

A real HTTP server on 127.0.0.1 (stdlib ``ThreadingHTTPServer`` in a thread), so the
real ``openai`` client is exercised end to end. Each test enqueues the replies the
"model" gives, in order, and can then assert on what the model was shown::

    fake_llm.enqueue(text("hello"), run_cell("print(1)"), error(429, "slow down"))
    ...
    assert fake_llm.requests[0]["messages"][-1]["content"] == "hi"
    assert fake_llm.requests[0].headers["authorization"] == "Bearer sk-test"

Reply builders: :func:`text`, :func:`fenced`, :func:`run_cell`, :func:`tool_reply`
(with :func:`call`), :func:`malformed_tool_call`, :func:`error` (and the presets
:func:`rate_limited`, :func:`server_error`, :func:`unauthorized`,
:func:`model_not_found`), :func:`error_event` (an error inside a 200 stream),
:func:`drop` (before the response, or mid-stream). A plain ``str`` is a text reply; a callable
receives the :class:`RecordedRequest` and returns a reply. With the queue empty the
server answers 500 ``"fake_llm: no reply queued ..."`` so a test fails visibly.

Served: ``POST /v1/chat/completions`` (streamed as SSE, or not), ``GET /v1/models``, and
with ``FakeLLM(tokenizer=fn)`` llama-cpp-python's ``POST /extras/tokenize/count`` (``fn(text)``
is the count). ``FakeLLM(stream_usage=False)`` streams no usage even when asked, as llama.cpp.
Streams look like OpenAI's: a role chunk, text split over several chunks, tool-call
arguments split over several chunks (``index`` on each, ``id``/``name`` only on the
first), a finish chunk, a usage chunk when ``stream_options.include_usage`` is set,
then ``data: [DONE]``.
"""

from __future__ import annotations

import itertools
import json
import re
import socket
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

__all__ = [
    "FakeLLM",
    "RecordedRequest",
    "Reply",
    "ToolCallSpec",
    "call",
    "drop",
    "error",
    "error_event",
    "fenced",
    "malformed_tool_call",
    "model_not_found",
    "rate_limited",
    "run_cell",
    "server_error",
    "text",
    "tool_reply",
    "unauthorized",
]

_ids = itertools.count(1)
_WORDS = re.compile(r"\s*\S+|\s+")


# -- replies ---------------------------------------------------------------------------


@dataclass(frozen=True)
class ToolCallSpec:
    name: str
    arguments: str  # raw, possibly invalid, JSON
    id: str


@dataclass(frozen=True)
class Reply:
    """One scripted answer. Build it with the functions below."""

    content: str | None = None
    tool_calls: tuple[ToolCallSpec, ...] = ()
    finish_reason: str = "stop"
    usage: tuple[int, int] | None = None  # (prompt, completion); estimated when None
    status: int = 200
    error_body: dict[str, Any] | None = None
    headers: dict[str, str] = field(default_factory=dict)
    drop_after: int | None = None  # drop the connection after this many stream chunks
    error_after: int | None = None  # stream an error event (error_body) after this many chunks
    chunk_size: int = 4  # words per streamed text piece, characters per argument piece


Responder = Callable[["RecordedRequest"], Reply | str]
Scripted = Reply | str | Responder


def text(
    content: str, *, finish_reason: str = "stop", usage: tuple[int, int] | None = None
) -> Reply:
    """A plain text reply."""
    return Reply(content=content, finish_reason=finish_reason, usage=usage)


def fenced(
    code: str, *, before: str = "Let me run this.", after: str = "", lang: str = "python"
) -> Reply:
    """A text reply holding one fenced code block."""
    parts = [before, f"```{lang}\n{code.rstrip()}\n```", after]
    return text("\n".join(p for p in parts if p))


def call(
    name: str = "run_cell", arguments: dict[str, Any] | str = "{}", *, id: str | None = None
) -> ToolCallSpec:
    """One tool call; ``arguments`` is JSON-encoded unless it is already a string."""
    raw = arguments if isinstance(arguments, str) else json.dumps(arguments)
    return ToolCallSpec(name=name, arguments=raw, id=id or f"call_{next(_ids):06d}")


def tool_reply(*calls: ToolCallSpec, content: str | None = None) -> Reply:
    """A reply made of tool calls (and optional text before them)."""
    return Reply(content=content, tool_calls=tuple(calls), finish_reason="tool_calls")


def run_cell(*codes: str, content: str | None = None) -> Reply:
    """One ``run_cell`` tool call per code string."""
    return tool_reply(*(call("run_cell", {"code": c}) for c in codes), content=content)


def malformed_tool_call(arguments: str = '{"code": "print(1)', name: str = "run_cell") -> Reply:
    """A tool call whose arguments are not valid JSON."""
    return tool_reply(call(name, arguments))


def error(
    status: int,
    message: str,
    *,
    type: str | None = None,
    code: str | None = None,
    param: str | None = None,
    headers: dict[str, str] | None = None,
) -> Reply:
    """An HTTP error with an OpenAI-style ``{"error": {...}}`` body."""
    body = {"message": message, "type": type or _default_type(status), "param": param, "code": code}
    return Reply(status=status, error_body={"error": body}, headers=dict(headers or {}))


def rate_limited(message: str = "Rate limit reached. Please try again later.") -> Reply:
    return error(
        429, message, type="requests", code="rate_limit_exceeded", headers={"retry-after": "0"}
    )


def server_error(message: str = "The server had an error while processing your request.") -> Reply:
    return error(500, message, type="server_error")


def unauthorized(message: str = "Incorrect API key provided: sk-wr***ng.") -> Reply:
    return error(401, message, type="invalid_request_error", code="invalid_api_key")


def model_not_found(model: str) -> Reply:
    msg = f"The model `{model}` does not exist or you do not have access to it."
    return error(404, msg, type="invalid_request_error", code="model_not_found")


def drop(
    after_chunks: int | None = None,
    content: str = "this reply is cut short by a dropped connection",
) -> Reply:
    """Close the connection: before any response (None) or after ``after_chunks`` SSE chunks."""
    return Reply(content=content, drop_after=-1 if after_chunks is None else after_chunks)


def error_event(message: str, *, after_chunks: int = 1, type: str = "server_error") -> Reply:
    """A 200 stream that turns into ``data: {"error": {...}}`` after ``after_chunks`` chunks."""
    body = {"error": {"message": message, "type": type, "param": None, "code": None}}
    return Reply(content="partial text before the error", error_body=body, error_after=after_chunks)


def _default_type(status: int) -> str:
    if status == 429:
        return "requests"
    return "server_error" if status >= 500 else "invalid_request_error"


# -- what was asked --------------------------------------------------------------------


@dataclass
class RecordedRequest:
    """A chat-completion request as the server saw it; ``req["messages"]`` reads the body."""

    method: str
    path: str
    headers: dict[str, str]  # lower-cased names
    body: dict[str, Any]

    def __getitem__(self, key: str) -> Any:
        return self.body[key]

    def get(self, key: str, default: Any = None) -> Any:
        return self.body.get(key, default)

    def __contains__(self, key: object) -> bool:
        return key in self.body

    @property
    def messages(self) -> list[dict[str, Any]]:
        return list(self.body.get("messages", []))

    @property
    def last_user_text(self) -> str:
        """The text of the last user (or tool) message, for callable replies."""
        for msg in reversed(self.messages):
            if msg.get("role") in ("user", "tool"):
                content = msg.get("content")
                if isinstance(content, list):
                    return "".join(p.get("text", "") for p in content if p.get("type") == "text")
                return content or ""
        return ""


# -- the server ------------------------------------------------------------------------


class FakeLLM:
    """The server plus its script. Use as a context manager or call start()/stop()."""

    def __init__(
        self,
        *,
        models: tuple[str, ...] = ("fake-model",),
        api_key: str | None = None,
        stream_usage: bool = True,
        tokenizer: Callable[[str], int] | None = None,
        port: int = 0,
    ) -> None:
        self.models = list(models)
        self.bind_port = port  # 0: any free port
        self.api_key = api_key  # when set, other keys get a 401
        self.stream_usage = stream_usage
        self.tokenizer = tokenizer
        self.requests: list[RecordedRequest] = []
        #: the bodies of tokenize requests (kept apart from the chat ``requests``)
        self.tokenized: list[dict[str, Any]] = []
        self._queue: deque[Scripted] = deque()
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # lifecycle
    def start(self) -> FakeLLM:
        handler = type("Handler", (_Handler,), {"fake": self})
        server = ThreadingHTTPServer(("127.0.0.1", self.bind_port), handler)
        server.daemon_threads = True
        self._server = server
        self._thread = threading.Thread(
            target=server.serve_forever,
            kwargs={"poll_interval": 0.02},
            name="fake-llm",
            daemon=True,
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def __enter__(self) -> FakeLLM:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def port(self) -> int:
        assert self._server is not None, "FakeLLM is not started"
        return int(self._server.server_address[1])

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    # the script
    def enqueue(self, *replies: Scripted) -> None:
        with self._lock:
            self._queue.extend(replies)

    @property
    def pending(self) -> int:
        with self._lock:
            return len(self._queue)

    def assert_drained(self) -> None:
        assert self.pending == 0, f"fake_llm: {self.pending} queued replies were never requested"

    def _next_reply(self, request: RecordedRequest) -> Reply:
        with self._lock:
            self.requests.append(request)
            scripted = self._queue.popleft() if self._queue else None
            n = len(self.requests)
        if scripted is None:
            return error(
                500, f"fake_llm: no reply queued for request #{n}", type="fake_llm_empty_queue"
            )
        if callable(scripted) and not isinstance(scripted, Reply):
            scripted = scripted(request)
        return text(scripted) if isinstance(scripted, str) else scripted


class _Handler(BaseHTTPRequestHandler):
    fake: FakeLLM
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # small SSE chunks: no 40 ms wait for a delayed ACK

    def log_message(self, format: str, *args: Any) -> None:  # quiet
        pass

    def do_GET(self) -> None:
        if self.path.rstrip("/") != "/v1/models":
            return self._send_json(
                404,
                {"error": {"message": f"no route {self.path}", "type": "invalid_request_error"}},
            )
        data = [
            {"id": m, "object": "model", "created": 0, "owned_by": "fake"} for m in self.fake.models
        ]
        self._send_json(200, {"object": "list", "data": data})

    def do_POST(self) -> None:
        raw = self.rfile.read(int(self.headers.get("content-length") or 0))
        if self.path == "/extras/tokenize/count" and self.fake.tokenizer is not None:
            body = json.loads(raw or b"{}")
            self.fake.tokenized.append(body)
            return self._send_json(200, {"count": self.fake.tokenizer(body["input"])})
        if self.path.rstrip("/") != "/v1/chat/completions":
            return self._send_json(
                404,
                {"error": {"message": f"no route {self.path}", "type": "invalid_request_error"}},
            )
        try:
            body = json.loads(raw or b"{}")
        except ValueError:
            return self._send_json(
                400, {"error": {"message": "body is not JSON", "type": "invalid_request_error"}}
            )
        headers = {k.lower(): v for k, v in self.headers.items()}
        request = RecordedRequest("POST", self.path, headers, body)
        if (
            self.fake.api_key is not None
            and headers.get("authorization") != f"Bearer {self.fake.api_key}"
        ):
            with self.fake._lock:
                self.fake.requests.append(request)
            reply = unauthorized()
        else:
            reply = self.fake._next_reply(request)
        if reply.drop_after == -1:
            return self._drop()
        if reply.status != 200:
            return self._send_json(reply.status, reply.error_body or {}, reply.headers)
        model = str(body.get("model", "fake-model"))
        usage = _usage(body, reply)
        if body.get("stream"):
            include_usage = self.fake.stream_usage and bool(
                (body.get("stream_options") or {}).get("include_usage")
            )
            return self._stream(_chunks(reply, model, usage if include_usage else None), reply)
        self._send_json(200, _completion(reply, model, usage))

    # responses
    def _send_json(
        self, status: int, payload: dict[str, Any], headers: dict[str, str] | None = None
    ) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(data)

    def _stream(self, chunks: Iterator[dict[str, Any]], reply: Reply) -> None:
        self.send_response(200)
        self.send_header("content-type", "text/event-stream; charset=utf-8")
        self.send_header("transfer-encoding", "chunked")
        self.send_header("cache-control", "no-cache")
        self.end_headers()
        for i, chunk in enumerate(chunks):
            if reply.drop_after is not None and i >= reply.drop_after:
                return self._drop()
            if reply.error_after is not None and i >= reply.error_after:
                chunk = reply.error_body or {}
                self._write_chunk(f"data: {json.dumps(chunk)}\n\n".encode())
                break
            self._write_chunk(f"data: {json.dumps(chunk)}\n\n".encode())
        self._write_chunk(b"data: [DONE]\n\n")
        self._write_chunk(b"")  # end of the chunked body

    def _write_chunk(self, data: bytes) -> None:
        self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
        self.wfile.flush()

    def _drop(self) -> None:
        self.close_connection = True
        try:
            self.wfile.flush()
            self.connection.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass


# -- wire format -----------------------------------------------------------------------


def _usage(body: dict[str, Any], reply: Reply) -> dict[str, int]:
    if reply.usage is not None:
        prompt, completion = reply.usage
    else:
        prompt = max(1, len(json.dumps(body.get("messages", []))) // 4)
        produced = (reply.content or "") + "".join(c.arguments for c in reply.tool_calls)
        completion = max(1, len(produced) // 4)
    return {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
    }


def _envelope(model: str, obj: str) -> dict[str, Any]:
    return {
        "id": "chatcmpl-fake",
        "object": obj,
        "created": int(time.time()),
        "model": model,
        "system_fingerprint": None,
    }


def _completion(reply: Reply, model: str, usage: dict[str, int]) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": reply.content, "refusal": None}
    if reply.tool_calls:
        message["tool_calls"] = [
            {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
            for c in reply.tool_calls
        ]
    choice = {
        "index": 0,
        "message": message,
        "logprobs": None,
        "finish_reason": reply.finish_reason,
    }
    return {**_envelope(model, "chat.completion"), "choices": [choice], "usage": usage}


def _split_words(s: str, words: int) -> list[str]:
    """Split keeping whitespace, ``words`` words per piece (at least two pieces if possible)."""
    tokens = _WORDS.findall(s)
    step = max(1, min(words, len(tokens) // 2 or 1))
    return ["".join(tokens[i : i + step]) for i in range(0, len(tokens), step)]


def _chunks(reply: Reply, model: str, usage: dict[str, int] | None) -> Iterator[dict[str, Any]]:
    env = _envelope(model, "chat.completion.chunk")
    extra = {"usage": None} if usage is not None else {}

    def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}
        return {**env, "choices": [choice], **extra}

    first: dict[str, Any] = {"role": "assistant", "content": "", "refusal": None}
    if reply.tool_calls and not reply.content:
        first["content"] = None
    yield chunk(first)
    for piece in _split_words(reply.content or "", reply.chunk_size):
        yield chunk({"content": piece})
    for index, c in enumerate(reply.tool_calls):
        head = {
            "index": index,
            "id": c.id,
            "type": "function",
            "function": {"name": c.name, "arguments": ""},
        }
        yield chunk({"tool_calls": [head]})
        step = max(1, reply.chunk_size)
        for i in range(0, len(c.arguments), step):
            yield chunk(
                {
                    "tool_calls": [
                        {"index": index, "function": {"arguments": c.arguments[i : i + step]}}
                    ]
                }
            )
    yield chunk({}, reply.finish_reason)
    if usage is not None:
        yield {**env, "choices": [], "usage": usage}


def scripted_settings(fake: FakeLLM, tmp_path: Any, **overrides: Any) -> Any:
    """Settings for an agent talking to ``fake``: notebooks in ``tmp_path/nbs``, the kernel
    seeing ``tmp_path``, unsandboxed unless ``sandbox=`` says otherwise; ``overrides`` win."""
    from kernel_agent.settings import Settings

    values: dict[str, Any] = {
        "base_url": fake.base_url,
        "model": "test-model",
        "api_key": "sk-test",
        "notebook_dir": tmp_path / "nbs",
        "cwd": tmp_path,
        "sandbox": "none",
    }
    values.update(overrides)
    return Settings.from_env(env={}, **values)
