"""How the model hands over code, as two small strategies: tool calls or fenced blocks.

Each protocol says what to send with a request (:meth:`tools`), how to read a reply
(:meth:`parse`), what the model remembers of it (:meth:`remember`) and how a cell's
result goes back (:meth:`reply`, :meth:`reject`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..llm.protocol import RUN_CELL_TOOL, ProtocolName, split_code
from ..llm.stream import Completion
from .history import History, Message
from .state import Turn

__all__ = ["FencedProtocol", "Protocol", "ToolsProtocol", "make_protocol"]


class Protocol:
    """Fenced code blocks; the base of :class:`ToolsProtocol`, which falls back to it."""

    name: ProtocolName = "fenced"

    def __init__(self, language: str = "python") -> None:
        self.language = language

    def tools(self) -> list[dict[str, Any]] | None:
        return None

    def parse(self, completion: Completion) -> Turn:
        """The code blocks of a reply and its prose (a block cut at the token limit is no code)."""
        text = completion.text or ""
        codes, prose = split_code(text, self.language, include_unclosed=not completion.truncated)
        return Turn(codes, prose if codes else text, fenced=bool(codes))

    def remember(self, history: History, completion: Completion, turn: Turn) -> None:
        """What the model remembers of its own reply.

        A reply that runs fenced code is remembered as that code only: prose written
        before seeing any output (often a guess) stays in the notebook but is not fed
        back, so the model does not anchor its final answer on it.
        """
        if turn.codes:
            blocks = (f"```{self.language}\n{c}\n```" for c in turn.codes)
            history.assistant({"role": "assistant", "content": "\n\n".join(blocks)})
        else:
            history.assistant(completion.assistant_message())

    def reply(
        self, history: History, call_id: str | None, text: str, images: Sequence[str] = ()
    ) -> None:
        """A cell's result (or why it did not run) for the model."""
        history.user(text, images)

    def reject(self, history: History, call_id: str | None, text: str) -> None:
        """A cell refused before it ran: the model's code is taken back, the reason given."""
        history.retract_last()
        history.user(text)

    def flush_errors(self, history: History) -> int:
        """Report malformed calls of the last reply; how many there were."""
        return 0


class FencedProtocol(Protocol):
    """The model writes a fenced ``python`` block (models and servers without tool calls)."""


class ToolsProtocol(Protocol):
    """The model calls ``run_cell(code)``; a server that ignores ``tools`` gets fenced parsing."""

    name: ProtocolName = "tools"

    def __init__(self, language: str = "python") -> None:
        super().__init__(language)
        self._errors: list[tuple[str, str]] = []
        self._seen_tool_call = False

    def tools(self) -> list[dict[str, Any]] | None:
        return [RUN_CELL_TOOL]

    def parse(self, completion: Completion) -> Turn:
        calls = completion.tool_calls
        self._seen_tool_call = self._seen_tool_call or bool(calls)
        if not (calls or self._errors or self._seen_tool_call):
            return super().parse(completion)  # a server that ignores `tools` sends fenced blocks
        codes, ids = [], []
        for call in calls:
            if call.name != "run_cell" or call.parse_error or call.code is None:
                why = (
                    f"there is no tool named {call.name!r}"
                    if call.name != "run_cell"
                    else call.parse_error or "missing the 'code' argument"
                )
                self._errors.append(
                    (
                        call.id,
                        f"Invalid run_cell call: {why}. "
                        'Call run_cell with a JSON object {"code": "..."}.',
                    )
                )
                continue
            codes.append(call.code)
            ids.append(call.id)
        return Turn(codes, completion.text or "", ids)

    def remember(self, history: History, completion: Completion, turn: Turn) -> None:
        if completion.tool_calls:
            history.assistant(_tool_history_message(completion))
        else:
            super().remember(history, completion, turn)

    def reply(
        self, history: History, call_id: str | None, text: str, images: Sequence[str] = ()
    ) -> None:
        if call_id is None:
            return super().reply(history, call_id, text, images)
        self.flush_errors(history)
        history.tool_result(call_id, text)
        if images:
            history.user("Images from the cell above:", images)

    def reject(self, history: History, call_id: str | None, text: str) -> None:
        self.reply(history, call_id, text)

    def flush_errors(self, history: History) -> int:
        errors, self._errors = self._errors, []
        for call_id, why in errors:
            history.tool_result(call_id, why)
        return len(errors)


def _tool_history_message(completion: Completion) -> Message:
    """The assistant message, with unparseable tool arguments replaced by {}."""
    message = completion.assistant_message()
    for part, call in zip(message.get("tool_calls", []), completion.tool_calls, strict=True):
        if call.parse_error:
            part["function"]["arguments"] = "{}"
    return message


def make_protocol(name: ProtocolName, language: str = "python") -> Protocol:
    return ToolsProtocol(language) if name == "tools" else FencedProtocol(language)
