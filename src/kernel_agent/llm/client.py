"""The LLM adapter: one async client for any OpenAI-compatible chat-completions endpoint.

:class:`LLMClient` wraps ``openai.AsyncOpenAI`` (with the library's own retries off) and
adds one retry loop of its own, in :meth:`LLMClient.stream_chat`, with exponential backoff
on 429, 408/409, 5xx, dropped connections and empty replies. Failures become the one-line errors of
:mod:`kernel_agent.errors`::

    LLMError                       429 that outlasted the retries, quota exhausted
    ├── LLMConnectionError         unreachable, timed out, 5xx after retries, no API at the URL
    ├── LLMAuthError               401/403
    ├── LLMModelNotFound           404 naming the model
    └── LLMResponseError           400/422 rejections, error events, unusable replies
        ├── ToolsRejected          400 about ``tools``: fall back to the fenced protocol
        └── ContextLengthExceeded  the prompt no longer fits the model's context

:meth:`LLMClient.stream_chat` yields :class:`TextDelta` (and :class:`ReasoningDelta`,
:class:`ToolCallDelta`, :class:`Retrying`) as they come, then one :class:`Completion`.
The pure pieces live in :mod:`kernel_agent.llm.stream` and :mod:`kernel_agent.llm.protocol`
and are re-exported here.
"""

from __future__ import annotations

import asyncio
import dataclasses
import re
from collections.abc import AsyncGenerator, Sequence
from dataclasses import dataclass
from typing import Any

import openai
from openai.types.chat import ChatCompletion, ChatCompletionChunk

from ..errors import (
    ConfigError,
    ContextLengthExceeded,
    EmptyReply,
    LLMAuthError,
    LLMConnectionError,
    LLMError,
    LLMModelNotFound,
    LLMResponseError,
    ToolsRejected,
    one_line,
)
from ..settings import Settings
from .protocol import (
    RUN_CELL_TOOL,
    ProtocolName,
    choose_protocol,
    parse_model_spec,
)
from .stream import (
    Completion,
    ReasoningDelta,
    StreamAccumulator,
    TextDelta,
    ToolCall,
    ToolCallDelta,
    Usage,
)
from .tokens import TokenCounter

__all__ = [
    "DEFAULT_BASE_URL",
    "RUN_CELL_TOOL",
    "Completion",
    "LLMClient",
    "ProtocolName",
    "ReasoningDelta",
    "Retrying",
    "StreamEvent",
    "TextDelta",
    "ToolCall",
    "ToolCallDelta",
    "Usage",
    "choose_protocol",
    "parse_model_spec",
    "should_fall_back_to_fenced",
]

DEFAULT_BASE_URL = "https://api.openai.com/v1"
_MAX_DELAY = 60.0


def should_fall_back_to_fenced(err: BaseException) -> bool:
    """True when ``err`` says the server cannot do tool calls (switch to ``"fenced"``)."""
    return isinstance(err, ToolsRejected)


@dataclass(frozen=True)
class Retrying:
    """A failed attempt is about to be retried after ``delay`` seconds.

    ``discard`` is True when deltas of the failed attempt were already yielded: drop
    the partial text, the retry streams the reply again from the start.
    """

    attempt: int
    max_retries: int
    delay: float
    reason: str
    discard: bool


StreamEvent = TextDelta | ReasoningDelta | ToolCallDelta | Retrying | Completion


@dataclass(frozen=True)
class _Failure:
    kind: type[LLMError]
    message: str
    retryable: bool = False
    retry_after: float | None = None

    def error(self, attempts: int) -> LLMError:
        suffix = f" (gave up after {attempts} attempts)" if attempts > 1 else ""
        return self.kind(self.message + suffix)


class LLMClient:
    """An OpenAI-compatible endpoint, configured from :class:`Settings`.

    ``settings.model`` may be a spec such as ``openai:gpt-4o-mini``; the client sends
    the bare name. Without an API key a dummy one is sent (local servers ignore it);
    whether a real endpoint needs one is the caller's decision. Use ``async with`` or
    :meth:`aclose`.
    """

    def __init__(
        self,
        settings: Settings,
        *,
        max_retries: int = 3,
        backoff: float = 0.5,
        timeout: float = 600.0,
        connect_timeout: float = 10.0,
    ) -> None:
        if not settings.model:
            raise ConfigError("no model given: pass --model or set KERNEL_AGENT_MODEL")
        _provider, name = parse_model_spec(settings.model)
        self.model: str = name or settings.model
        self.base_url: str = (settings.base_url or DEFAULT_BASE_URL).rstrip("/")
        self.max_retries = max_retries
        self.backoff = backoff
        self.timeout = timeout
        self._has_key = bool(settings.api_key)
        sampling = ("temperature", "top_p", "presence_penalty", "frequency_penalty", "max_tokens")
        self._sampling = {
            k: getattr(settings, k) for k in sampling if getattr(settings, k) is not None
        }
        self._stream_options = True  # off once the server has rejected stream_options
        self._client = openai.AsyncOpenAI(
            base_url=self.base_url,
            api_key=settings.api_key or "not-needed",
            max_retries=0,
            timeout=openai.Timeout(timeout, connect=connect_timeout),
        )
        root = self.base_url[: -len("/v1")] if self.base_url.endswith("/v1") else self.base_url
        #: counts the tokens of replies streamed without usage (see :mod:`kernel_agent.llm.tokens`)
        self.counter = TokenCounter(root, self.model, self._post_json)

    @property
    def sampling(self) -> dict[str, Any]:
        """The sampling options every request carries (temperature, max_tokens, ...)."""
        return dict(self._sampling)

    async def __aenter__(self) -> LLMClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        await self._client.close()

    # -- requests --------------------------------------------------------------------

    async def stream_chat(
        self,
        messages: Sequence[dict[str, Any]],
        tools: Sequence[dict[str, Any]] | None = None,
        **sampling: Any,
    ) -> AsyncGenerator[StreamEvent, None]:
        """Stream one reply: deltas as they arrive, then exactly one :class:`Completion`.

        ``sampling`` overrides the settings' sampling options for this call (e.g.
        ``temperature``, ``seed``). Retried failures yield :class:`Retrying` first;
        the last failure raises an :class:`~kernel_agent.errors.LLMError`.
        """
        params = self._params(messages, tools)
        params.update({k: v for k, v in sampling.items() if v is not None})
        attempt = 0
        while True:
            acc = StreamAccumulator()
            yielded = False
            try:
                stream = await self._open_stream(params)
                async with stream:
                    async for chunk in stream:
                        for delta in acc.feed(chunk):
                            yielded = True
                            yield delta
                if not acc.saw_choice:
                    raise EmptyReply()
                completion = acc.result()
                if completion.usage is None:  # asked for, not sent: count it ourselves
                    usage = await self.counter.usage(params["messages"], completion, tools)
                    completion = dataclasses.replace(completion, usage=usage)
                yield completion
                return
            except Exception as err:
                failure = self._failure(err, tools=bool(tools))
                if not failure.retryable or attempt >= self.max_retries:
                    raise failure.error(attempt + 1) from err
                delay = self._delay(attempt, failure)
                attempt += 1
                yield Retrying(attempt, self.max_retries, delay, failure.message, yielded)
                await asyncio.sleep(delay)

    # -- internals -------------------------------------------------------------------

    def _params(
        self, messages: Sequence[dict[str, Any]], tools: Sequence[dict[str, Any]] | None
    ) -> dict[str, Any]:
        """The body of a streamed request."""
        params: dict[str, Any] = {"model": self.model, "messages": list(messages), **self._sampling}
        if tools:
            params["tools"] = list(tools)
        params["stream"] = True
        if self._stream_options:
            params["stream_options"] = {"include_usage": True}
        return params

    async def _open_stream(self, params: dict[str, Any]) -> Any:
        """Start a streamed request; if it is refused while asking for usage, ask once without."""
        try:
            return await self._post_stream(params)
        except (openai.BadRequestError, openai.UnprocessableEntityError):
            if "stream_options" not in params:
                raise
        del params["stream_options"]
        stream = await self._post_stream(params)
        self._stream_options = False
        return stream

    async def _post_stream(self, params: dict[str, Any]) -> Any:
        """``chat.completions.create(stream=True)`` without its walk over the request body.

        ``create`` converts every message through the TypedDict schema on each call: 1-2 ms
        per message, so 100+ ms per reply late in a long run. Our messages are plain JSON
        dicts already; ``post`` sends them as they are, with the same errors and stream.
        """
        return await self._client.post(
            "/chat/completions",
            body=params,
            cast_to=ChatCompletion,
            stream=True,
            stream_cls=openai.AsyncStream[ChatCompletionChunk],
        )

    async def _post_json(self, url: str, body: dict[str, Any]) -> Any:
        """POST ``body`` to ``url`` (absolute) with this client's auth; the JSON answer."""
        return await self._client.post(url, body=body, cast_to=object, options={"timeout": 10.0})

    def _delay(self, attempt: int, failure: _Failure) -> float:
        delay: float = min(self.backoff * 2.0**attempt, _MAX_DELAY)
        if failure.retry_after:
            delay = max(delay, min(failure.retry_after, _MAX_DELAY))
        return delay

    def _failure(self, err: Exception, *, tools: bool) -> _Failure:
        """What an exception means, as a one-line message; re-raises anything unknown."""
        url = self.base_url
        if isinstance(err, EmptyReply):  # before LLMError: this one is retried
            return _Failure(LLMResponseError, f"the endpoint at {url} sent an empty reply", True)
        if isinstance(err, LLMError):
            return _Failure(type(err), str(err))
        if isinstance(err, openai.APITimeoutError):
            return _Failure(
                LLMConnectionError, f"the endpoint at {url} did not answer in time", True
            )
        if isinstance(err, openai.APIConnectionError):
            if type(err.__cause__).__name__ in ("ConnectError", "ConnectTimeout"):
                return _Failure(
                    LLMConnectionError, f"cannot reach the endpoint at {url}: {_cause(err)}", True
                )
            return _Failure(
                LLMConnectionError, f"lost the connection to {url}: {_cause(err)}", True
            )
        if isinstance(err, openai.APIStatusError):
            return self._status_failure(err, tools=tools)
        if isinstance(err, openai.APIError):  # an error event inside a stream, a bad body
            return _Failure(
                LLMResponseError, f"the endpoint at {url} sent an error: {_detail(err)}"
            )
        if isinstance(err, ValueError):  # a chunk that is not JSON
            return _Failure(
                LLMResponseError,
                f"the endpoint at {url} sent an unreadable reply: {one_line(str(err), 300)}",
            )
        raise err

    def _status_failure(self, err: openai.APIStatusError, *, tools: bool) -> _Failure:
        url, status, detail = self.base_url, err.status_code, _detail(err)
        code = (err.code or "").lower()
        said = f": {detail}" if detail else ""
        if status in (401, 403):
            hint = "" if self._has_key else "; no API key is set (OPENAI_API_KEY)"
            return _Failure(
                LLMAuthError, f"the endpoint at {url} rejected the API key ({status}){hint}{said}"
            )
        if status == 404:
            if code == "model_not_found" or "model" in detail.lower():
                msg = f"the endpoint at {url} does not know the model {self.model!r} (404){said}"
                return _Failure(LLMModelNotFound, msg)
            msg = f"no chat-completions API at {url} (404); does the base URL need a /v1 suffix?"
            return _Failure(LLMConnectionError, msg)
        if status == 429:
            if code == "insufficient_quota":
                return _Failure(
                    LLMError, f"the endpoint at {url} refused: quota exhausted (429){said}"
                )
            msg = f"the endpoint at {url} is rate limiting requests (429){said}"
            return _Failure(LLMError, msg, True, _retry_after(err))
        if status >= 500 or status in (408, 409):
            msg = f"the endpoint at {url} failed ({status}){said}"
            return _Failure(LLMConnectionError, msg, True, _retry_after(err))
        if code == "context_length_exceeded" or _CONTEXT.search(detail):
            return _Failure(
                ContextLengthExceeded, f"the conversation is too long for {self.model!r}{said}"
            )
        if tools and _TOOLS.search(detail):
            return _Failure(
                ToolsRejected, f"the endpoint at {url} cannot use tools ({status}){said}"
            )
        return _Failure(
            LLMResponseError, f"the endpoint at {url} rejected the request ({status}){said}"
        )


_CONTEXT = re.compile(
    r"context (length|window|size)|maximum context|too many tokens|exceeds? the context", re.I
)
_TOOLS = re.compile(r"tool|function", re.I)


def _detail(err: openai.APIError) -> str:
    """The server's own message, without openai's "Error code: 404 - {...}" wrapping."""
    body = err.body
    if isinstance(body, dict):
        message = body.get("message") or body.get("detail") or body.get("error")
        if isinstance(message, str):
            return one_line(message, 300)
    if isinstance(body, str) and body.strip() and not body.lstrip().startswith("<"):
        return one_line(body, 300)
    return "" if isinstance(err, openai.APIStatusError) else one_line(err.message, 300)


def _cause(err: BaseException) -> str:
    """The innermost cause of a connection error, e.g. "[Errno 111] Connection refused"."""
    inner: BaseException = err
    while inner.__cause__ is not None or inner.__context__ is not None:
        inner = inner.__cause__ or inner.__context__  # type: ignore[assignment]
    text = one_line(str(inner), 300) or type(inner).__name__
    return text if inner is not err else "connection failed"


def _retry_after(err: openai.APIStatusError) -> float | None:
    headers = err.response.headers
    for name, scale in (("retry-after-ms", 0.001), ("retry-after", 1.0)):
        try:
            return float(headers[name]) * scale
        except (KeyError, ValueError):
            continue
    return None
