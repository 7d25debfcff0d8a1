"""Pure helpers that shape what goes into the model's message history."""

from __future__ import annotations

import re
from typing import Any

__all__ = ["FENCE", "normalize_code", "tool_history_message", "image_message", "usage_dict"]

#: a fenced code block (closed, or running to the end of a truncated reply)
FENCE = re.compile(r"```[^\n`]*\n.*?(?:```|\Z)", re.S)


def normalize_code(code: str) -> str:
    return "\n".join(line.rstrip() for line in code.strip().splitlines() if line.strip())


def tool_history_message(completion: Any) -> dict[str, Any]:
    """The assistant message for the history, with unparseable tool arguments replaced by {}."""
    message = completion.assistant_message()
    for part, call in zip(message.get("tool_calls", []), completion.tool_calls, strict=True):
        if call.parse_error:
            part["function"]["arguments"] = "{}"
    return message


def image_message(text: str, images: list[str]) -> dict[str, Any]:
    parts: list[dict[str, Any]] = [{"type": "text", "text": text}]
    parts += [{"type": "image_url", "image_url": {"url": url}} for url in images]
    return {"role": "user", "content": parts}


def usage_dict(usage: Any) -> dict[str, int]:
    if usage is None:
        return {}
    return {k: int(getattr(usage, k, 0) or 0) for k in ("prompt_tokens", "completion_tokens", "total_tokens")}
