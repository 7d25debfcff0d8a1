"""LLMClient through the real openai client against the scripted server in fake_openai.py."""

from __future__ import annotations

import asyncio
import json
import socket
import time
from collections.abc import Sequence
from contextlib import aclosing
from typing import Any

import pytest
from fake_openai import (
    FakeLLM,
    RecordedRequest,
    call,
    drop,
    error,
    error_event,
    fenced,
    malformed_tool_call,
    model_not_found,
    rate_limited,
    run_cell,
    server_error,
    text,
    tool_reply,
    unauthorized,
)

from kernel_agent.errors import (
    ContextLengthExceeded,
    LLMAuthError,
    LLMConnectionError,
    LLMError,
    LLMModelNotFound,
    LLMResponseError,
    ToolsRejected,
)
from kernel_agent.llm.client import (
    RUN_CELL_TOOL,
    Completion,
    LLMClient,
    Retrying,
    TextDelta,
    ToolCallDelta,
    Usage,
    should_fall_back_to_fenced,
)
from kernel_agent.llm.protocol import image_part, split_code, user_message
from kernel_agent.settings import Settings

pytestmark = pytest.mark.timeout(30)

HI = [{"role": "system", "content": "You analyse data."}, user_message("hi")]


def client_for(fake: FakeLLM, **settings: Any) -> LLMClient:
    settings.setdefault("model", "fake-model")
    settings.setdefault("api_key", "sk-test")
    return LLMClient(Settings(base_url=fake.base_url, **settings), max_retries=3, backoff=0.01)


def collect(
    client: LLMClient,
    messages: Sequence[dict[str, Any]] = HI,
    tools: Sequence[dict[str, Any]] | None = None,
) -> list[Any]:
    async def go() -> list[Any]:
        async with client:
            return [event async for event in client.stream_chat(messages, tools)]

    return asyncio.run(go())


def run(client: LLMClient, coro_fn: Any) -> Any:
    async def go() -> Any:
        async with client:
            return await coro_fn(client)

    return asyncio.run(go())


async def complete(
    client: LLMClient,
    messages: Sequence[dict[str, Any]],
    tools: Sequence[dict[str, Any]] | None = None,
) -> Completion:
    """The whole reply: :meth:`LLMClient.stream_chat` drained, retries included."""
    async with aclosing(client.stream_chat(messages, tools)) as events:
        async for event in events:
            if isinstance(event, Completion):
                return event
    raise AssertionError("the stream ended without a Completion")


def final(events: list[Any]) -> Completion:
    assert isinstance(events[-1], Completion)
    assert sum(isinstance(e, Completion) for e in events) == 1
    return events[-1]


# -- replies ---------------------------------------------------------------------------


def test_streamed_text_arrives_in_pieces(fake_llm: FakeLLM) -> None:
    fake_llm.enqueue(text("The mean of the column is 4.5, computed over ten rows."))
    events = collect(client_for(fake_llm))
    deltas = [e.text for e in events if isinstance(e, TextDelta)]
    assert len(deltas) >= 3
    done = final(events)
    assert "".join(deltas) == done.text == "The mean of the column is 4.5, computed over ten rows."
    assert done.finish_reason == "stop" and done.tool_calls == ()
    assert (
        done.usage is not None
        and done.usage.total_tokens == done.usage.prompt_tokens + done.usage.completion_tokens
    )
    req = fake_llm.requests[0]
    assert req["stream"] is True and req["stream_options"] == {"include_usage": True}
    assert req["model"] == "fake-model" and req["messages"] == HI
    assert req.headers["authorization"] == "Bearer sk-test"
    assert "tools" not in req


def test_fenced_code_reply(fake_llm: FakeLLM) -> None:
    fake_llm.enqueue(fenced("import pandas as pd\nprint(pd.__version__)"))
    done = run(client_for(fake_llm, protocol="fenced"), lambda c: complete(c, HI))
    assert split_code(done.text)[0] == ["import pandas as pd\nprint(pd.__version__)"]


def test_tool_call_split_across_chunks(fake_llm: FakeLLM) -> None:
    code = "import numpy as np\nprint(np.arange(10).mean())"
    fake_llm.enqueue(run_cell(code))
    events = collect(client_for(fake_llm), tools=[RUN_CELL_TOOL])
    pieces = [e for e in events if isinstance(e, ToolCallDelta)]
    assert len(pieces) > 5 and pieces[0].name == "run_cell"
    done = final(events)
    (tc,) = done.tool_calls
    assert tc.name == "run_cell" and tc.code == code and tc.parse_error is None
    assert tc.id.startswith("call_") and done.finish_reason == "tool_calls"
    assert done.assistant_message() == {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": tc.id,
                "type": "function",
                "function": {"name": "run_cell", "arguments": tc.arguments},
            }
        ],
    }
    assert fake_llm.requests[0]["tools"] == [RUN_CELL_TOOL]


def test_multiple_tool_calls_with_text(fake_llm: FakeLLM) -> None:
    fake_llm.enqueue(run_cell("a = 1", "print(a + 1)", content="Two steps."))
    done = final(collect(client_for(fake_llm), tools=[RUN_CELL_TOOL]))
    assert done.text == "Two steps."
    assert [c.code for c in done.tool_calls] == ["a = 1", "print(a + 1)"]
    assert len({c.id for c in done.tool_calls}) == 2
    assert done.assistant_message()["content"] == "Two steps."


def test_malformed_tool_arguments_reported(fake_llm: FakeLLM) -> None:
    fake_llm.enqueue(
        malformed_tool_call('{"code": "print(1)'), tool_reply(call("run_cell", "[1, 2]"))
    )
    client = client_for(fake_llm)

    async def twice(c: LLMClient) -> list[Completion]:
        return [await complete(c, HI, [RUN_CELL_TOOL]), await complete(c, HI, [RUN_CELL_TOOL])]

    bad_json, not_object = run(client, twice)
    (tc,) = bad_json.tool_calls
    assert (
        tc.args is None
        and tc.arguments == '{"code": "print(1)'
        and "JSON" in (tc.parse_error or "")
    )
    assert not_object.tool_calls[0].parse_error is not None


def test_usage_collected_and_summed(fake_llm: FakeLLM) -> None:
    fake_llm.enqueue(text("one", usage=(10, 1)), text("two", usage=(20, 2)))

    async def both(c: LLMClient) -> list[Completion]:
        return [await complete(c, HI), await complete(c, HI)]

    first, second = run(client_for(fake_llm), both)
    assert first.usage == Usage(10, 1, 11) and second.usage == Usage(20, 2, 22)
    assert first.usage + second.usage == Usage(30, 3, 33)


def test_sampling_params_forwarded_only_when_set(fake_llm: FakeLLM) -> None:
    fake_llm.enqueue("a", "b")
    run(
        client_for(fake_llm, temperature=0.0, top_p=0.9, max_tokens=256, presence_penalty=0.5),
        lambda c: complete(c, HI),
    )
    run(client_for(fake_llm, frequency_penalty=0.1), lambda c: complete(c, HI))
    first, second = fake_llm.requests
    assert (
        first["temperature"],
        first["top_p"],
        first["max_tokens"],
        first["presence_penalty"],
    ) == (0.0, 0.9, 256, 0.5)
    assert "frequency_penalty" not in first
    assert second["frequency_penalty"] == 0.1
    assert not {"temperature", "top_p", "max_tokens", "presence_penalty"} & set(second.body)


def test_model_spec_prefix_stripped_and_dummy_key(fake_llm: FakeLLM) -> None:
    fake_llm.enqueue("ok")
    run(client_for(fake_llm, model="openai:gpt-4o-mini", api_key=None), lambda c: complete(c, HI))
    req = fake_llm.requests[0]
    assert req["model"] == "gpt-4o-mini"
    assert req.headers["authorization"].startswith("Bearer ")


def test_callable_reply_sees_the_request(fake_llm: FakeLLM) -> None:
    def answer(req: RecordedRequest) -> str:
        return f"you said {req.last_user_text!r} with {len(req.messages)} messages"

    fake_llm.enqueue(answer)
    done = run(client_for(fake_llm), lambda c: complete(c, HI))
    assert done.text == "you said 'hi' with 2 messages"


def test_images_reach_the_server(fake_llm: FakeLLM) -> None:
    fake_llm.enqueue("a bar chart")
    msg = user_message("what is this?", [image_part(b"PNGDATA")])
    run(client_for(fake_llm, vision=True), lambda c: complete(c, [msg]))
    content = fake_llm.requests[0]["messages"][0]["content"]
    assert content[1]["image_url"]["url"].startswith("data:image/png;base64,")


# -- retries ---------------------------------------------------------------------------


def test_retries_on_429_and_500_then_success(fake_llm: FakeLLM) -> None:
    fake_llm.enqueue(rate_limited(), server_error(), "finally")
    events = collect(client_for(fake_llm))
    retries = [e for e in events if isinstance(e, Retrying)]
    assert [r.attempt for r in retries] == [1, 2]
    assert "429" in retries[0].reason and "500" in retries[1].reason
    assert not any(r.discard for r in retries)
    assert final(events).text == "finally"
    assert len(fake_llm.requests) == 3


def test_retries_exhausted_on_5xx(fake_llm: FakeLLM) -> None:
    fake_llm.enqueue(*[server_error("upstream overloaded")] * 4)
    with pytest.raises(LLMConnectionError) as info:
        collect(client_for(fake_llm))
    msg = str(info.value)
    assert "\n" not in msg
    assert (
        fake_llm.base_url in msg
        and "500" in msg
        and "upstream overloaded" in msg
        and "4 attempts" in msg
    )
    assert len(fake_llm.requests) == 4


def test_retries_exhausted_on_429(fake_llm: FakeLLM) -> None:
    fake_llm.enqueue(*[rate_limited()] * 4)
    with pytest.raises(LLMError, match=r"rate limiting requests \(429\).*4 attempts"):
        collect(client_for(fake_llm))


def test_quota_exhausted_is_not_retried(fake_llm: FakeLLM) -> None:
    fake_llm.enqueue(error(429, "You exceeded your current quota.", code="insufficient_quota"))
    with pytest.raises(LLMError, match="quota"):
        collect(client_for(fake_llm))
    assert len(fake_llm.requests) == 1


def test_empty_queue_fails_visibly(fake_llm: FakeLLM) -> None:
    with pytest.raises(LLMConnectionError, match="no reply queued"):
        collect(client_for(fake_llm))


def test_dropped_connection_is_retried(fake_llm: FakeLLM) -> None:
    fake_llm.enqueue(drop(), "after the drop")
    events = collect(client_for(fake_llm))
    (retry,) = [e for e in events if isinstance(e, Retrying)]
    assert "lost the connection" in retry.reason and not retry.discard
    assert final(events).text == "after the drop"


def test_connection_dropped_mid_stream_is_retried_and_flagged(fake_llm: FakeLLM) -> None:
    fake_llm.enqueue(drop(after_chunks=3), "complete reply")
    events = collect(client_for(fake_llm))
    (retry,) = [e for e in events if isinstance(e, Retrying)]
    assert retry.discard  # partial text was already shown
    after = events[events.index(retry) + 1 :]
    assert "".join(e.text for e in after if isinstance(e, TextDelta)) == "complete reply"
    assert final(events).text == "complete reply"


def test_unreachable_port_fails_quickly() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed again: nothing listens there
    url = f"http://127.0.0.1:{port}/v1"
    client = LLMClient(Settings(model="m", base_url=url), max_retries=2, backoff=0.01)
    started = time.monotonic()
    with pytest.raises(LLMConnectionError) as info:
        run(client, lambda c: complete(c, HI))
    assert time.monotonic() - started < 5
    msg = str(info.value)
    assert url in msg and "3 attempts" in msg and "\n" not in msg


# -- errors that are not retried ---------------------------------------------------------


def test_401_is_an_auth_error(fake_llm: FakeLLM) -> None:
    fake_llm.enqueue(unauthorized())
    with pytest.raises(LLMAuthError) as info:
        collect(client_for(fake_llm))
    assert str(info.value).startswith(
        f"the endpoint at {fake_llm.base_url} rejected the API key (401)"
    )
    assert len(fake_llm.requests) == 1


def test_server_checking_the_key(fake_llm: FakeLLM) -> None:
    fake_llm.api_key = "sk-right"
    with pytest.raises(LLMAuthError, match="no API key is set"):
        collect(client_for(fake_llm, api_key=None))


def test_404_model_not_found(fake_llm: FakeLLM) -> None:
    fake_llm.enqueue(model_not_found("gpt-9"))
    with pytest.raises(LLMModelNotFound, match="'gpt-9'"):
        collect(client_for(fake_llm, model="gpt-9"))


def test_404_without_model_means_wrong_url(fake_llm: FakeLLM) -> None:
    client = LLMClient(Settings(model="m", base_url=fake_llm.base_url[: -len("/v1")]), backoff=0.01)
    with pytest.raises(LLMConnectionError, match="/v1"):
        run(client, lambda c: complete(c, HI))


def test_tools_rejected_means_fall_back(fake_llm: FakeLLM) -> None:
    rejection = error(400, "tools param requires --jinja flag")
    fake_llm.enqueue(rejection, rejection)  # the second is the retry without stream_options
    with pytest.raises(ToolsRejected) as info:
        collect(client_for(fake_llm), tools=[RUN_CELL_TOOL])
    assert should_fall_back_to_fenced(info.value)
    assert isinstance(info.value, LLMResponseError)
    assert not should_fall_back_to_fenced(LLMResponseError("x"))


def test_context_length_exceeded(fake_llm: FakeLLM) -> None:
    too_long = error(
        400, "This model's maximum context length is 8192 tokens.", code="context_length_exceeded"
    )
    fake_llm.enqueue(too_long, too_long)  # a 400 is asked again once, without stream_options
    with pytest.raises(ContextLengthExceeded, match="too long"):
        run(client_for(fake_llm), lambda c: complete(c, HI))
    assert ["stream_options" in r for r in fake_llm.requests] == [True, False]


def test_stream_options_rejected_once_then_dropped(fake_llm: FakeLLM) -> None:
    rejection = error(
        400, "Unrecognized request argument supplied: stream_options", param="stream_options"
    )
    fake_llm.enqueue(rejection, "no usage from me", "still fine")

    async def twice(c: LLMClient) -> list[Completion]:
        return [await complete(c, HI), await complete(c, HI)]

    first, second = run(client_for(fake_llm), twice)
    assert first.text == "no usage from me"
    assert first.usage is not None and first.usage.source == "estimated"  # not reported: estimated
    assert second.text == "still fine"
    assert ["stream_options" in r for r in fake_llm.requests] == [True, False, False]


def test_400_is_a_response_error(fake_llm: FakeLLM) -> None:
    fake_llm.enqueue(error(400, "bad request body"), error(400, "bad request body"))
    with pytest.raises(LLMResponseError, match=r"rejected the request \(400\): bad request body"):
        run(client_for(fake_llm), lambda c: complete(c, HI))
    assert len(fake_llm.requests) == 2  # once more without stream_options, never retried


def test_error_event_inside_stream(fake_llm: FakeLLM) -> None:
    fake_llm.enqueue(error_event("the model crashed", after_chunks=2))
    with pytest.raises(LLMResponseError, match="sent an error: the model crashed"):
        collect(client_for(fake_llm))
    assert len(fake_llm.requests) == 1


def test_request_bodies_are_json_round_trippable(fake_llm: FakeLLM) -> None:
    fake_llm.enqueue("x")
    run(client_for(fake_llm), lambda c: complete(c, HI, [RUN_CELL_TOOL]))
    assert (
        json.loads(json.dumps(fake_llm.requests[0].body))["tools"][0]["function"]["name"]
        == "run_cell"
    )
