"""``push_after_error``: giving up right after a failing cell gets one push to fix it."""

from __future__ import annotations

from ...prompts import prompt
from ..state import Ask, TaskState
from .base import AskBudget, Lever

__all__ = ["PushAfterError"]


class PushAfterError(Lever):
    """Giving up right after a failing cell gets one push to fix it, with the last hint.

    It says so on ``TaskState.error_pushed``: ``unbacked_answer`` does not push again.
    """

    name = "push_after_error"
    budget = AskBudget(asks=1, then="accept")

    def check_answer(self, state: TaskState, answer: str) -> Ask | None:
        if not state.cells or state.cells[-1].ok:
            return None
        state.error_pushed = True
        push = prompt("nudge_after_error")
        return Ask(push + "\n" + state.last_hint if state.last_hint else push)
