"""``answer_check``: an answer the task's words and the printed values contradict goes back.

The check is :func:`~..checks.answer_problems` (one pure function of the task, the answer
and what the cells printed); this lever sends each kind of problem back once a task.
"""

from __future__ import annotations

from ...llm.view import render_cell
from ...prompts import prompt
from ...results import CellResult
from ..answers import FormatSpec
from ..checks import answer_problems, facts_of
from ..slots import FILLED
from ..state import Ask, TaskState
from .base import Lever

__all__ = ["AnswerCheck"]


class AnswerCheck(Lever):
    """An answer the task's words and the printed values contradict goes back, with why.

    Each kind of problem is sent back at most once a task; a cell that prints the answer's
    ``@name[value]`` lines with a problem gets it as a note under its output.
    """

    name = "answer_check"

    def forget(self) -> None:
        super().forget()
        #: the kinds of problem already sent back (or noted) in this task
        self.done: set[str] = set()

    def on_answer(self, state: TaskState, answer: str) -> Ask | None:
        problem = self._first(state, answer)
        if problem is None:
            return None
        return Ask(
            prompt("answer_doubt", problem=problem),
            notice=f"the answer does not hold against the task and the outputs ({problem[:60]}...)",
        )

    def after_cell(self, state: TaskState, cell: CellResult, hint: str) -> str | None:
        if not cell.ok:
            return None
        text = render_cell(cell, budget=4000).text
        slots = " ".join(m.group(0) for m in FILLED.finditer(text))
        if not slots or not FormatSpec.of(state.task).slots:
            return None
        problem = self._first(state, slots)
        return prompt("answer_doubt_note", problem=problem) if problem else None

    def _first(self, state: TaskState, answer: str) -> str | None:
        problems = answer_problems(facts_of(state, answer), skip=frozenset(self.done))
        if not problems:
            return None
        kind, line = problems[0]
        self.done.add(kind)
        return line
