"""``printed_answer``: the last cell printed every asked ``@name[value]`` slot: that is the answer.

What counts is :func:`~..composed.compose_answer`'s (nothing is guessed); this lever also
tells a task that asks for slots to print them so.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ...prompts import prompt
from ..answers import FormatSpec
from ..composed import compose_answer
from ..state import TaskState
from .base import Lever

if TYPE_CHECKING:
    from ...executors.base import AsyncExecutor

__all__ = ["PrintedAnswer"]


class PrintedAnswer(Lever):
    """The last cell printed every asked ``@name[value]`` slot: that is the final answer.

    A task that asks for slots is told, in a note, to print them so (Python kernels); a
    task that does not is told nothing (a small model otherwise prints slots, or writes
    them as code, where prose is asked).
    """

    name = "printed_answer"

    async def task_note(self, state: TaskState, executor: AsyncExecutor) -> str | None:
        slots = FormatSpec.of(state.task).slots
        if not slots or executor.language_info.get("name") != "python":
            return None
        return prompt("print_slots", slots=" ".join(f"@{s}[...]" for s in slots), first=slots[0])

    def compose(self, state: TaskState) -> str | None:
        if not state.cells:
            return None
        return compose_answer(state.task, state.cells[-1], state.cells)
