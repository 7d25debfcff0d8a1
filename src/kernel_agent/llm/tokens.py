"""Token counts for a reply the endpoint sent no usage for.

The client asks for usage while streaming (``stream_options: {"include_usage": true}``);
llama.cpp's servers and some proxies still send none. Then the tokens are counted:

1. **counted**: by the server's own tokenizer, if it has one (llama-cpp-python's server,
   which runs the bundled model, answers ``POST /extras/tokenize/count``). The prompt
   is rendered as ChatML, the template of the bundled Qwen model, so the count is that
   of the prompt the model saw, give or take a few tokens for other templates;
2. **estimated**: otherwise, from the length of the text (:data:`CHARS_PER_TOKEN`), and
   labelled as an estimate wherever it is shown.

The tokenizer is asked once; if it does not answer, the rest of the run estimates.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from .stream import Completion, Usage

__all__ = ["CHARS_PER_TOKEN", "TokenCounter", "chat_text", "estimate"]

#: English text and code average about four characters per token in GPT-style tokenizers.
CHARS_PER_TOKEN = 4
#: what an image part is counted as (a low-detail image in OpenAI's accounting)
IMAGE_TOKENS = 85


def _content_text(content: Any) -> tuple[str, int]:
    """(the text of a message's content, how many images it holds)."""
    if isinstance(content, str):
        return content, 0
    if not isinstance(content, list):
        return "", 0
    texts = [p.get("text", "") for p in content if isinstance(p, dict) and p.get("type") == "text"]
    images = sum(1 for p in content if isinstance(p, dict) and p.get("type") == "image_url")
    return "".join(texts), images


def chat_text(
    messages: Sequence[dict[str, Any]], tools: Sequence[dict[str, Any]] | None = None
) -> tuple[str, int]:
    """The prompt as the model reads it (ChatML), and how many images it holds."""
    parts: list[str] = []
    images = 0
    if tools:
        parts.append(json.dumps(list(tools)))
    for msg in messages:
        text, n = _content_text(msg.get("content"))
        images += n
        calls = msg.get("tool_calls") or []
        text += "".join(json.dumps(c.get("function", {})) for c in calls)
        parts.append(f"<|im_start|>{msg.get('role', 'user')}\n{text}<|im_end|>\n")
    parts.append("<|im_start|>assistant\n")
    return "".join(parts), images


def _reply_text(completion: Completion) -> str:
    return completion.text + "".join(c.arguments for c in completion.tool_calls)


def estimate(
    messages: Sequence[dict[str, Any]],
    completion: Completion,
    tools: Sequence[dict[str, Any]] | None = None,
) -> Usage:
    """Counts from the length of the text: a labelled estimate (``source="estimated"``)."""
    prompt, images = chat_text(messages, tools)
    p = _by_length(prompt) + images * IMAGE_TOKENS
    c = _by_length(_reply_text(completion))
    return Usage(p, c, p + c, source="estimated")


def _by_length(text: str) -> int:
    return (len(text) + CHARS_PER_TOKEN - 1) // CHARS_PER_TOKEN


class TokenCounter:
    """Counts a reply's tokens with the endpoint's tokenizer, or estimates them.

    ``post(url, body) -> dict`` sends one JSON request (the LLM client's own HTTP
    client, so the same auth and proxies apply); ``root`` is the server's address
    without ``/v1``.
    """

    def __init__(self, root: str, model: str, post: Any) -> None:
        self.root = root.rstrip("/")
        self.model = model
        self._post = post
        #: None until tried; then whether the endpoint has a tokenizer
        self.has_tokenizer: bool | None = None

    async def usage(
        self,
        messages: Sequence[dict[str, Any]],
        completion: Completion,
        tools: Sequence[dict[str, Any]] | None = None,
    ) -> Usage:
        if self.has_tokenizer is not False:
            prompt, images = chat_text(messages, tools)
            try:
                p = await self._count(prompt) + images * IMAGE_TOKENS
                c = await self._count(_reply_text(completion))
            except Exception:  # noqa: BLE001 - no tokenizer there: estimate from now on
                self.has_tokenizer = False
            else:
                self.has_tokenizer = True
                return Usage(p, c, p + c, source="counted")
        return estimate(messages, completion, tools)

    async def _count(self, text: str) -> int:
        if not text:
            return 0
        answer = await self._post(
            f"{self.root}/extras/tokenize/count", {"input": text, "model": self.model}
        )
        count = answer.get("count") if isinstance(answer, dict) else None
        if not isinstance(count, int) or isinstance(count, bool) or count < 0:
            raise ValueError(f"not a token count: {answer!r}")
        return count
