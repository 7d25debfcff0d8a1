"""``printed_answer``: the last cell printed every asked ``@name[value]`` slot: that is the answer.

What counts is :func:`~..composed.compose_answer`'s (nothing is guessed); this lever also
tells a task that asks for slots to print them so.
"""

from __future__ import annotations

import builtins
from keyword import iskeyword
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
        return prompt("print_slots", prints="\n".join(_print_line(s) for s in slots))

    def compose(self, state: TaskState) -> str | None:
        if not state.cells:
            return None
        return compose_answer(state.task, state.cells[-1], state.cells)


def _print_line(slot: str) -> str:
    """``print(f"@gain[{gain}]")``: the slot's own name holds its value (the bundled model
    printed ``@Oman [38.062]`` for ``@country[...] @gain[...]`` from one example line), or
    ``value`` where the name is no free variable name (a keyword, a builtin, ``p-value``)."""
    plain = slot.isidentifier() and not iskeyword(slot) and not hasattr(builtins, slot)
    return f'print(f"@{slot}[{{{slot if plain else "value"}}}]")'
