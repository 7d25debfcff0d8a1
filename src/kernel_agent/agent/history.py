"""The conversation the model sees. Only :class:`History` edits the message list."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..llm.protocol import image_part, tool_result_message, user_message

__all__ = ["History", "Message"]

Message = dict[str, Any]


class History:
    """The chat messages, in order: a system prompt, then the task, replies and results."""

    def __init__(self) -> None:
        self._messages: list[Message] = []

    @property
    def messages(self) -> Sequence[Message]:
        """What the next request sends (read it; edit through the methods)."""
        return self._messages

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
