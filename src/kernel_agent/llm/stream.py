"""Streamed chat-completion chunks -> events and one :class:`Completion`. Pure, no I/O.

:class:`StreamAccumulator` is fed chunks (``openai`` ``ChatCompletionChunk`` objects or
plain dicts of the same shape) and returns the deltas each one carries; ``result()``
gives the assembled :class:`Completion`.

Tolerated server quirks: tool-call deltas without ``index`` (their position is used),
``id``/``name`` repeated on every chunk, missing tool-call ids (one is made up), usage
sent on several chunks (the last wins), ``reasoning_content``/``reasoning`` deltas.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "Completion",
    "ReasoningDelta",
    "StreamAccumulator",
    "TextDelta",
    "ToolCall",
    "ToolCallDelta",
    "USAGE_SOURCES",
    "Usage",
    "least_exact",
    "tokens_text",
    "parse_tool_arguments",
]


@dataclass(frozen=True)
class TextDelta:
    """Some reply text, as it arrives."""

    text: str


@dataclass(frozen=True)
class ReasoningDelta:
    """Some "thinking" text from a reasoning model (not part of the answer)."""

    text: str


@dataclass(frozen=True)
class ToolCallDelta:
    """A piece of a tool call as it arrives: ``name`` on the first piece, then argument text."""

    index: int
    name: str
    arguments: str


Delta = TextDelta | ReasoningDelta | ToolCallDelta


#: Where token counts come from, most to least exact: the endpoint said so, the model's own
#: tokenizer counted them, or they were estimated from the text's length.
USAGE_SOURCES = ("reported", "counted", "estimated")


def least_exact(a: str, b: str) -> str:
    """The less exact of two usage sources (``""`` means none yet)."""
    if not a or not b:
        return a or b
    return max(a, b, key=USAGE_SOURCES.index)


@dataclass(frozen=True)
class Usage:
    """Token counts of one reply or of a whole run; ``a + b`` sums them.

    ``source`` says where they come from (:data:`USAGE_SOURCES`); a sum keeps the least
    exact. ``""`` means no model call has finished yet: a run starts from ``Usage(source="")``.
    """

    prompt_tokens: int = 0
    completion_tokens: int = 0
    total_tokens: int = 0
    source: str = "reported"

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            self.prompt_tokens + other.prompt_tokens,
            self.completion_tokens + other.completion_tokens,
            self.total_tokens + other.total_tokens,
            least_exact(self.source, other.source),
        )

    @property
    def reported(self) -> bool:
        """True when every count came from the endpoint itself."""
        return self.source == "reported"

    def counts(self) -> dict[str, int]:
        """The three counts, for a cell's metadata."""
        return {
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "total_tokens": self.total_tokens,
        }

    def as_dict(self) -> dict[str, Any]:
        """The counts, ``source`` and ``reported``, for the run's metadata."""
        return {**self.counts(), "source": self.source, "reported": self.reported}

    def text(self) -> str:
        """The counts for people (see :func:`tokens_text`)."""
        return tokens_text(self.as_dict())

    @classmethod
    def from_obj(cls, obj: Any) -> Usage | None:
        if obj is None:
            return None
        prompt = int(_get(obj, "prompt_tokens") or 0)
        completion = int(_get(obj, "completion_tokens") or 0)
        return cls(prompt, completion, int(_get(obj, "total_tokens") or prompt + completion))


def tokens_text(usage: dict[str, Any]) -> str:
    """Token counts for people: real counts plainly, counted or estimated ones labelled.

    ``usage`` is :meth:`Usage.as_dict` as a notebook stores it (older notebooks have only
    ``reported``).
    """
    source = usage.get("source")
    if source is None and usage.get("reported") is False:  # a notebook from before counting
        return "tokens not reported by the endpoint"
    if source == "":
        return "no tokens (no model call finished)"
    total = usage.get("total_tokens")
    if total is None:
        total = (usage.get("prompt_tokens") or 0) + (usage.get("completion_tokens") or 0)
    given, taken = usage.get("prompt_tokens") or 0, usage.get("completion_tokens") or 0
    split = f"{given:,} prompt + {taken:,} completion"
    if source == "estimated":
        return f"~{total:,} tokens ({split}; estimated from the text length)"
    if source == "counted":
        return f"{total:,} tokens ({split}; counted with the model's tokenizer)"
    return f"{total:,} tokens ({split})"


@dataclass(frozen=True)
class ToolCall:
    """One function call. ``args`` is None and ``parse_error`` says why when the JSON is bad."""

    id: str
    name: str
    arguments: str
    args: dict[str, Any] | None
    parse_error: str | None = None

    @property
    def code(self) -> str | None:
        """``args["code"]`` when it is a string (the ``run_cell`` case), else None."""
        code = (self.args or {}).get("code")
        return code if isinstance(code, str) else None

    def to_message_part(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "type": "function",
            "function": {"name": self.name, "arguments": self.arguments},
        }


@dataclass(frozen=True)
class Completion:
    """A whole reply: text, tool calls, usage (None if the server sent none), finish reason."""

    text: str = ""
    tool_calls: tuple[ToolCall, ...] = ()
    usage: Usage | None = None
    finish_reason: str | None = None
    reasoning: str = ""
    model: str | None = None

    @property
    def truncated(self) -> bool:
        """The reply hit the token limit (``finish_reason == "length"``)."""
        return self.finish_reason == "length"

    def assistant_message(self) -> dict[str, Any]:
        """The message to append to the history (OpenAI chat format)."""
        msg: dict[str, Any] = {"role": "assistant", "content": self.text}
        if self.tool_calls:
            msg["content"] = self.text or None
            msg["tool_calls"] = [c.to_message_part() for c in self.tool_calls]
        return msg


def parse_tool_arguments(raw: str) -> tuple[dict[str, Any] | None, str | None]:
    """``(args, None)`` for a JSON object (``""`` counts as ``{}``), else ``(None, why)``."""
    if not raw.strip():
        return {}, None
    try:
        value = json.loads(raw)
    except ValueError as err:
        return None, f"arguments are not valid JSON ({err})"
    if not isinstance(value, dict):
        return None, f"arguments are JSON {type(value).__name__}, not an object"
    return value, None


def _made_up_id() -> str:
    return f"call_{uuid.uuid4().hex[:24]}"


def _get(obj: Any, key: str) -> Any:
    """Read ``key`` from a dict or an attribute (openai's pydantic models)."""
    if obj is None:
        return None
    if isinstance(obj, dict):
        return obj.get(key)
    value = getattr(obj, key, None)
    if value is None:
        extra = getattr(obj, "model_extra", None)  # fields a server added to the schema
        if isinstance(extra, dict):
            value = extra.get(key)
    return value


@dataclass
class _PartialCall:
    id: str = ""
    name: str = ""
    arguments: list[str] = field(default_factory=list)


class StreamAccumulator:
    """Feed chunks in order; each ``feed`` returns the deltas it carried."""

    def __init__(self) -> None:
        self._text: list[str] = []
        self._reasoning: list[str] = []
        self._calls: dict[int, _PartialCall] = {}
        self._usage: Usage | None = None
        self._finish: str | None = None
        self._model: str | None = None
        self.saw_choice = False

    def feed(self, chunk: Any) -> list[Delta]:
        self._model = _get(chunk, "model") or self._model
        usage = Usage.from_obj(_get(chunk, "usage"))
        if usage is not None:
            self._usage = usage
        out: list[Delta] = []
        for choice in _get(chunk, "choices") or []:
            if (_get(choice, "index") or 0) != 0:
                continue
            self.saw_choice = True
            self._finish = _get(choice, "finish_reason") or self._finish
            delta = _get(choice, "delta")
            if delta is None:
                continue
            thought = _get(delta, "reasoning_content") or _get(delta, "reasoning")
            if isinstance(thought, str) and thought:
                self._reasoning.append(thought)
                out.append(ReasoningDelta(thought))
            content = _get(delta, "content")
            if isinstance(content, str) and content:
                self._text.append(content)
                out.append(TextDelta(content))
            for position, tc in enumerate(_get(delta, "tool_calls") or []):
                out.extend(self._feed_call(position, tc))
        return out

    def _feed_call(self, position: int, tc: Any) -> list[Delta]:
        index = _get(tc, "index")
        index = position if index is None else int(index)
        call = self._calls.setdefault(index, _PartialCall())
        call.id = call.id or (_get(tc, "id") or "")
        fn = _get(tc, "function")
        name = _get(fn, "name") or ""
        new_name = ""
        if name and name != call.name:
            call.name += name
            new_name = name
        args = _get(fn, "arguments") or ""
        if args:
            call.arguments.append(args)
        return [ToolCallDelta(index, new_name, args)] if new_name or args else []

    def result(self) -> Completion:
        calls = []
        for index in sorted(self._calls):
            partial = self._calls[index]
            raw = "".join(partial.arguments)
            args, error = parse_tool_arguments(raw)
            partial.id = partial.id or _made_up_id()  # some local servers send none
            calls.append(ToolCall(partial.id, partial.name, raw, args, error))
        return Completion(
            text="".join(self._text),
            tool_calls=tuple(calls),
            usage=self._usage,
            finish_reason=self._finish,
            reasoning="".join(self._reasoning),
            model=self._model,
        )
