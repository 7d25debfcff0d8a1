"""``unread_column``: a column the task names that no cell read is a condition the values
leave out ("among chicks on Diet 1", and no cell selects by ``Diet``).

The columns are the data preview's (``TaskState.data_facts``), named as
:func:`~..unread_columns.named_columns` reads the task; the check is
:func:`~..unread_columns.unread_columns`'s, over the cells that ran in this task.
"""

from __future__ import annotations

from ...prompts import prompt
from ...results import CellResult
from ..state import Ask, TaskState
from ..unread_columns import unread_columns
from .base import AskBudget, Lever

__all__ = ["UnreadColumn"]


class UnreadColumn(Lever):
    """The first cell that prints values while a column the task names is unread gets a
    note (an answer composed from it waits for the model); an answer given with no such
    note, while a named column is unread, goes back once."""

    name = "unread_column"
    budget = AskBudget(asks=1, then="accept")

    def forget(self) -> None:
        super().forget()
        self.noted = False

    def after_cell(self, state: TaskState, cell: CellResult, hint: str) -> str | None:
        if self.noted or not cell.ok or not _prints(cell):
            return None
        note = self._note(state)
        self.noted = note is not None
        return note

    def check_answer(self, state: TaskState, answer: str) -> Ask | None:
        if self.noted or (note := self._note(state)) is None:
            return None
        return Ask(
            note.removeprefix("Note: "),
            notice="the answer leaves out a column the task names; asking again",
        )

    def _note(self, state: TaskState) -> str | None:
        columns = list(dict.fromkeys(c for f in state.data_facts.values() for c in f.columns))
        codes = [c.code for c in state.cells if c.ok]
        unread = unread_columns(state.task, columns, codes, state.data_facts)
        if not unread:
            return None
        named = " and ".join(f"the column {c!r}" for c in unread[:3])
        return prompt("unread_column", columns=named, it="it" if len(unread) == 1 else "them")


def _prints(cell: CellResult) -> bool:
    """The cell printed something (a stream or a displayed value), not only an image."""
    return any(
        o.get("output_type") == "stream"
        or "text/plain" in (o.get("data") or {})
        and "image/png" not in (o.get("data") or {})
        for o in cell.outputs
        if isinstance(o, dict)
    )
