"""``fenced_rules``: fenced code runs one block per reply."""

from __future__ import annotations

from ..state import TaskState, Turn
from .base import Lever

__all__ = ["FencedRules"]


class FencedRules(Lever):
    """Fenced code runs one block per reply: the model sees each block's output before the next.

    (So a failing block also ends the reply's batch: the model fixes it first.)
    """

    name = "fenced_rules"

    def after_reply(self, state: TaskState, turn: Turn) -> None:
        if turn.fenced:
            del turn.codes[1:]
