"""The conversation the model sees. Only :class:`History` edits the message list.

What is sent is bounded: :attr:`History.messages` is at most
:data:`MAX_REQUEST_CHARS` characters of JSON in all, whatever the kernel's outputs,
variables or files put into the messages. Past it, the oldest messages after the task
are left out (their place kept, with a note), then the newest and the task are cut.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from ..llm.protocol import image_part, tool_result_message, user_message
from ..llm.view import budget_text

__all__ = ["History", "Message", "MAX_REQUEST_CHARS", "bounded_messages"]

Message = dict[str, Any]

#: the most characters (JSON, images included) of all the messages of one request
MAX_REQUEST_CHARS = 400_000
_LEFT_OUT = "[kernel-agent: an earlier message of {:,} characters is left out of this request]"


class History:
    """The chat messages, in order: a system prompt, then the task, replies and results."""

    def __init__(self, max_chars: int = MAX_REQUEST_CHARS) -> None:
        self._messages: list[Message] = []
        self.max_chars = max_chars

    @property
    def messages(self) -> Sequence[Message]:
        """What the next request sends: the messages, within ``max_chars`` (read it; edit
        through the methods)."""
        return bounded_messages(self._messages, self.max_chars)

    def __len__(self) -> int:
        return len(self._messages)

    def set_system(self, text: str) -> None:
        """Start with (or swap to) this system prompt; the rest stays."""
        system = {"role": "system", "content": text}
        if self._messages and self._messages[0]["role"] == "system":
            self._messages[0] = system
        else:
            self._messages.insert(0, system)

    def user(self, text: str, images: Sequence[str] = ()) -> None:
        """A user message; ``images`` are data URLs shown after the text."""
        self._messages.append(user_message(text, [image_part(url) for url in images]))

    def assistant(self, message: Message) -> None:
        self._messages.append(message)

    def tool_result(self, call_id: str, text: str) -> None:
        self._messages.append(tool_result_message(call_id, text))

    def rewind(self, length: int) -> None:
        """Forget every message after the first ``length`` (a failed attempt, to start over)."""
        del self._messages[length:]

    def retract_last(self) -> None:
        """Forget the last message (a repeated failing cell, so the model does not anchor on it)."""
        self._messages.pop()


def _size(message: Message) -> int:
    return len(json.dumps(message, ensure_ascii=False, default=str))


def _left_out(message: Message, size: int) -> Message:
    """``message`` in its place (role, tool call ids kept), its content a short note."""
    kept = {k: v for k, v in message.items() if k not in ("content", "tool_calls")}
    kept["content"] = _LEFT_OUT.format(size)
    calls = message.get("tool_calls")
    if isinstance(calls, list):  # each call keeps its id (its result refers to it)
        kept["tool_calls"] = [
            {**call, "function": {**call.get("function", {}), "arguments": "{}"}}
            for call in calls
            if isinstance(call, dict)
        ]
    return kept


def _cut(message: Message, room: int) -> Message:
    """``message`` with its text cut to its head and tail and its images dropped, to fit
    about ``room`` characters."""
    content = message.get("content")
    if isinstance(content, list):  # text and images: the text alone
        content = "\n".join(
            part.get("text", "") for part in content if isinstance(part, dict) and "text" in part
        )
    if not isinstance(content, str):
        return _left_out(message, _size(message))
    budget = max(200, room - 200)
    for _ in range(4):  # escapes make JSON longer than the text: shrink until it fits
        cut = {**message, "content": budget_text(content, budget)}
        size = _size(cut)
        if size <= room or budget <= 200:
            break
        budget = max(200, budget * room // size - 200)
    return cut


def bounded_messages(messages: list[Message], limit: int) -> list[Message]:
    """``messages`` if they fit in ``limit`` characters, else a copy that does: the
    oldest after the system prompt and the task are left out first, then the newest
    and the first two are cut."""
    sizes = [_size(m) for m in messages]
    total = sum(sizes) + 2 * len(messages)  # and the list's brackets and separators
    if total <= limit:
        return messages
    out = list(messages)
    keep = 2 if len(out) > 2 else 0  # the system prompt and the task
    for index in range(keep, len(out) - 1):
        if total <= limit:
            break
        out[index] = _left_out(out[index], sizes[index])
        total += _size(out[index]) - sizes[index]
        sizes[index] = _size(out[index])
    for index in [len(out) - 1, *range(min(keep, len(out)))]:
        if total <= limit:
            break
        room = max(0, limit - (total - sizes[index]))
        out[index] = _cut(out[index], room)
        total += _size(out[index]) - sizes[index]
        sizes[index] = _size(out[index])
    for index in [len(out) - 1, *range(min(keep, len(out)) - 1, -1, -1)]:  # still over
        if total <= limit:
            break
        out[index] = _left_out(out[index], sizes[index])
        total += _size(out[index]) - sizes[index]
        sizes[index] = _size(out[index])
    return out
