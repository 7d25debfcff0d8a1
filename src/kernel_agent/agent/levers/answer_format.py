"""``answer_format``: an answer that ignores the form the task asks for is sent back once.

What can be checked of the form is :class:`~..answers.FormatSpec`'s: the ``@name[value]``
slots the task names, a number of decimal places, a yes/no answer.
"""

from __future__ import annotations

from ...prompts import prompt
from ..answers import FormatSpec, format_problems
from ..state import Ask, TaskState
from .base import AskBudget, Lever

__all__ = ["AnswerFormat"]


class AnswerFormat(Lever):
    """An answer that ignores the format the task asks for goes back once, saying what is off."""

    name = "answer_format"
    budget = AskBudget(asks=1, then="accept")

    def check_answer(self, state: TaskState, answer: str) -> Ask | None:
        spec = FormatSpec.of(state.task)
        if spec.empty:
            return None
        problems = format_problems(spec, answer)
        if not problems:
            return None
        template = f" Use exactly this form: {spec.template()}" if spec.slots else ""
        return Ask(
            prompt("answer_format", problems="; ".join(problems), template=template),
            notice="the answer does not follow the requested format; asking again",
        )
