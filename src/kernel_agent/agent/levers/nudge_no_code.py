"""``nudge_no_code``: an answer before any cell ran (often from memory) is sent back once."""

from __future__ import annotations

from ...prompts import prompt
from ..state import Ask, TaskState
from .base import AskBudget, Lever

__all__ = ["NudgeNoCode"]


class NudgeNoCode(Lever):
    """An answer before any cell ran (often from memory) gets one request to compute it."""

    name = "nudge_no_code"
    budget = AskBudget(asks=1, then="accept")

    def check_answer(self, state: TaskState, answer: str) -> Ask | None:
        return None if state.ran_code else Ask(prompt("nudge_no_code"))
