"""An ACP client for tests (the official SDK's client side): it records what the agent sends."""

from __future__ import annotations

from typing import Any

from acp.schema import AllowedOutcome, DeniedOutcome, RequestPermissionResponse

__all__ = ["RecordingClient"]


class RecordingClient:
    """An ACP client that records every update and answers permission requests in turn."""

    def __init__(self, answers: list[str | None] | None = None) -> None:
        self.updates: list[Any] = []
        self.asked: list[Any] = []
        self.answers = list(answers or [])

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        self.updates.append(update)

    async def request_permission(
        self, session_id: str, tool_call: Any, options: list[Any], **kwargs: Any
    ) -> RequestPermissionResponse:
        self.asked.append((tool_call, [o.option_id for o in options]))
        answer = self.answers.pop(0) if self.answers else None
        if answer is None:
            return RequestPermissionResponse(outcome=DeniedOutcome(outcome="cancelled"))
        return RequestPermissionResponse(
            outcome=AllowedOutcome(outcome="selected", option_id=answer)
        )

    def kinds(self) -> list[str]:
        return [u.session_update for u in self.updates]

    def message(self) -> str:
        return "".join(
            u.content.text for u in self.updates if u.session_update == "agent_message_chunk"
        )

    def calls(self) -> dict[str, list[Any]]:
        seen: dict[str, list[Any]] = {}
        for u in self.updates:
            if u.session_update in ("tool_call", "tool_call_update"):
                seen.setdefault(u.tool_call_id, []).append(u)
        return seen
