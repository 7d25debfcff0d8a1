"""``grounding_check``: an answer stating numbers that no output shows is sent back once."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from ...llm.view import render_cell
from ...prompts import prompt
from ..grounding import ungrounded_numbers
from ..state import Ask, TaskState
from .base import AskBudget, Lever

if TYPE_CHECKING:
    from ...settings import Settings

__all__ = ["GroundingCheck"]

_VARIABLES_NOTE = re.compile(r"^\s*Variables (?:new|changed|removed|gone)\b")


class GroundingCheck(Lever):
    """An answer stating numbers that no output shows gets one request to check them."""

    name = "grounding_check"
    budget = AskBudget(asks=1, then="accept")

    def __init__(self, output_chars: int = 4000) -> None:
        super().__init__()
        self.output_chars = output_chars

    @classmethod
    def from_settings(cls, settings: Settings) -> GroundingCheck:
        return cls(settings.llm_output_chars)

    def check_answer(self, state: TaskState, answer: str) -> Ask | None:
        outputs = [render_cell(c, budget=self.output_chars).text for c in state.cells if c.ok]
        if not outputs:
            return None
        # what the model was shown of the kernel's variables under each cell grounds too:
        # the 212 of "malignant (DataFrame, shape (212, 31))" (sent back when right, twice)
        shown = [info.short() for info in list(state.namespace.values())[:200]]
        given = "\n".join([state.task, *(c.code for c in state.cells), *shown])
        # a line copied from a cell's "Variables new: ..." note is grounded in the namespace
        stated = "\n".join(ln for ln in answer.splitlines() if not _VARIABLES_NOTE.match(ln))
        missing = ungrounded_numbers(stated, outputs, given=given)
        if not missing:
            return None
        printed = "\n".join(outputs[-3:])[-1500:]
        return Ask(
            prompt("answer_check", numbers=", ".join(missing), printed=printed),
            notice="the answer states numbers no cell printed; asking the model to check",
        )
