"""``unbacked_answer``: values stated when no cell succeeded cannot come from the data."""

from __future__ import annotations

import re

from ...prompts import prompt
from ..code_text import typed_values_only
from ..grounding import ungrounded_numbers
from ..slots import slot_values
from ..state import Ask, Stop, TaskState
from .base import AskBudget, Lever

__all__ = ["UnbackedAnswer"]

_NUMERIC = re.compile(r"^\s*[-+]?[\d.,eE+-]*\s*$")


class UnbackedAnswer(Lever):
    """No cell succeeded, yet the answer states values: they cannot come from the data.

    After a cell that failed, one that only prints values typed into its code
    (``print('@t[0.123]')``) computed nothing, so it does not count as one that succeeded.
    (``grounding_check`` has no output to compare them with.) The first such answer gets
    one request to fix the error and print the values, unless the model was already pushed
    to fix the error in this task (``TaskState.error_pushed``, set by ``push_after_error``);
    the next one ends the run with status ``no_answer``, and the values are not reported
    (the refused reply stays in the transcript's note).
    """

    name = "unbacked_answer"
    budget = AskBudget(asks=1, then="stop")

    def check_answer(self, state: TaskState, answer: str) -> Ask | Stop | None:
        cells = state.cells
        if all(c.ok for c in cells) or any(c.ok and not typed_values_only(c.code) for c in cells):
            return None
        # numbers the task, the code or an error message says are not the answer's own
        given = "\n".join([state.task, *(f"{c.code}\n{c.error}" for c in state.cells)])
        values = ungrounded_numbers(answer, [], given=given, ignore_below=0)
        values += [v.strip() for v in slot_values(answer) if not _NUMERIC.match(v)]
        if not values:
            return None
        if state.error_pushed:
            return self.stop(state, answer)
        return Ask(
            prompt("unbacked_answer", error=_last_error(state), hint=state.last_hint),
            notice="the answer states values, but no cell succeeded; asking for a fix",
        )

    def stop(self, state: TaskState, answer: str) -> Stop:
        return Stop(
            "no_answer",
            "No answer: no cell computed without an error, so the values the model stated "
            f"are not from the data and are not reported. The last error was: "
            f"{_last_error(state)}",
            notice="the answer states values, but no cell succeeded; stopping without it",
        )


def _last_error(state: TaskState) -> object:
    return next(c.error for c in reversed(state.cells) if not c.ok)
