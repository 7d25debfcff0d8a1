"""One streamed model reply as the loop's events: deltas, retries, then ModelCalled and
the :class:`~kernel_agent.llm.stream.Completion`."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Sequence
from typing import Any

from ..events import Event, ModelCalled, ModelDelta, ModelRetracted, Notice
from ..llm.client import LLMClient, Retrying
from ..llm.stream import Completion, TextDelta, ToolCallDelta

__all__ = ["stream_reply"]


async def stream_reply(
    llm: LLMClient,
    messages: Sequence[dict[str, Any]],
    tools: Any,
    sampling: dict[str, Any],
    step: int,
    label: str,
) -> AsyncIterator[Event | Completion]:
    """Stream one reply: ModelDelta per text piece (a Notice and ModelRetracted when the
    endpoint is retried), then ModelCalled (``step``: the number the next cell will have,
    its timing and sampling) and the Completion."""
    started, first = time.monotonic(), None
    async for item in llm.stream_chat(messages, tools=tools, **sampling):
        if first is None and isinstance(item, (TextDelta, ToolCallDelta)):
            first = time.monotonic() - started
        if isinstance(item, TextDelta):
            yield ModelDelta(item.text)
        elif isinstance(item, Retrying):
            yield Notice(
                f"model endpoint: {item.reason}; retrying in {item.delay:.1f}s "
                f"({item.attempt}/{item.max_retries})",
                "warning",
            )
            if item.discard:
                yield ModelRetracted()
            started, first = time.monotonic() + item.delay, None
        elif isinstance(item, Completion):
            request = {**llm.sampling, **sampling}
            yield ModelCalled(step, label, item, time.monotonic() - started, first, request)
            yield item
