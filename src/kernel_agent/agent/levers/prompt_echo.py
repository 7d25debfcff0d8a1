"""``prompt_echo``: an answer that repeats our own instructions is sent back, twice at most.

What counts as an echo is :func:`~..echo.echo_share`'s (the fixed words of our prompt
files, in verbatim runs, that the model was sent in this task).
"""

from __future__ import annotations

from ...llm.view import render_cell
from ...prompts import prompt
from ..echo import echo_share
from ..state import Ask, Stop, TaskState
from .base import AskBudget, Lever

__all__ = ["ECHO_ASKS", "PromptEcho"]

#: asks per task for an answer that is not an echo; the next echo ends the run
ECHO_ASKS = 2


class PromptEcho(Lever):
    """An answer that mostly repeats an instruction we sent in the task is sent back.

    At most :data:`ECHO_ASKS` times a task; the next echo ends the run with status
    ``no_answer`` (our own words are not the run's answer).
    """

    name = "prompt_echo"
    budget = AskBudget(asks=ECHO_ASKS, then="stop")

    def __init__(self, share: float = 0.5) -> None:
        super().__init__()
        self.share = share

    def check_answer(self, state: TaskState, answer: str) -> Ask | None:
        if not state.told:
            return None
        given = [state.task]
        for cell in state.cells:
            given += [cell.code, render_cell(cell, budget=4000).text]
        if echo_share(answer, state.told, given, state.briefing) < self.share:
            return None
        return Ask(
            prompt("prompt_echo", task=state.task[:2000]),
            notice="the answer repeats our own instructions; asking the model again",
        )

    def stop(self, state: TaskState, answer: str) -> Stop:
        last = next((c for c in reversed(state.cells) if c.ok), None)
        shown = render_cell(last, budget=1500).text.strip() if last is not None else ""
        return Stop(
            "no_answer",
            "No final answer: the model repeated the instructions it was sent instead "
            "of answering." + (f" The last output was:\n\n```\n{shown}\n```" if shown else ""),
            notice="the model kept repeating our instructions as its answer; stopping",
        )
