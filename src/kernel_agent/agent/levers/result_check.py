"""``result_check``: a run that asked for ``set_result`` got an answer without one."""

from __future__ import annotations

from collections.abc import Callable

from ...prompts import prompt
from ..state import Ask, TaskState
from .base import AskBudget, Lever

__all__ = ["ResultCheck"]


class ResultCheck(Lever):
    """A run that asked for ``set_result`` and got an answer without one: told once.

    Not a small-model lever (not in ``SMALL_MODEL_LEVERS``, not named by ``--levers``):
    ``levers_for`` adds it, last, when the settings ask for a result.
    """

    name = "result_check"
    budget = AskBudget(asks=1, then="accept")

    def __init__(self, missing: Callable[[], bool]) -> None:
        super().__init__()
        self.missing = missing

    def check_answer(self, state: TaskState, answer: str) -> Ask | None:
        if not self.missing():
            return None
        return Ask(prompt("result_missing"), notice="no result was set; asking for set_result")
