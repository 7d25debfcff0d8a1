"""``repeat_guard``: a cell that already failed is not run again; the model is resampled."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ...prompts import prompt
from ...results import CellResult
from ..code_text import normalize_code
from ..state import Ask, TaskState
from .base import Lever

if TYPE_CHECKING:
    from ...settings import Settings

__all__ = ["RepeatGuard"]


class RepeatGuard(Lever):
    """A cell that already failed is not run again: the model is resampled hotter.

    The first time in a task, the attempt is forgotten (the conversation goes back to the
    task, with the error in one line, and the failing cells in a row count from 0 again): a
    small model that sends a failing cell again
    copies it from the conversation, and a fresh first cell often works. After that, the
    model is told the cell already failed. A run whose failing cells reach their bound
    without a repeat gets the same fresh start once, instead of giving up (the cells differ,
    but the model is stuck in the same hole).
    """

    name = "repeat_guard"

    def forget(self) -> None:
        super().forget()
        #: normalized code of each failed cell -> its error and hint
        self.failed: dict[str, str] = {}
        #: whether this task's attempt was already forgotten once
        self.rewound = False

    def __init__(self, temperature: float | None = None) -> None:
        super().__init__()
        self.temperature = max(temperature or 0.0, 0.7)

    @classmethod
    def from_settings(cls, settings: Settings) -> RepeatGuard:
        return cls(settings.temperature)

    def before_cell(self, state: TaskState, code: str) -> Ask | None:
        error = self.failed.get(normalize_code(code))
        if error is None:
            return None
        if not self.rewound:
            self.rewound = True  # the fresh attempt gets the whole bound of failing cells
            return Ask(
                prompt("fresh_start", error=_error_and_hint(error)),
                notice="the model repeated a failing cell; starting the task over",
                sampling={"temperature": self.temperature, "seed": state.step},
                cell_meta={"repeat": True, "rewind": True},
                rewind=True,
                failure=False,  # the fresh attempt gets its turn (once a task)
            )
        return Ask(
            prompt("repeated_failure", error=error),
            notice="the model repeated a failing cell; not run again, asked for a fix",
            sampling={"temperature": self.temperature, "seed": state.step},
            cell_meta={"repeat": True},
        )

    def on_give_up(self, state: TaskState) -> Ask | None:
        last = state.cells[-1] if state.cells else None
        if self.rewound or last is None or last.error is None:
            return None
        self.rewound = True
        return Ask(
            prompt("fresh_start", error=_error_and_hint(f"{last.error}\n{state.last_hint}")),
            notice="failing cells reached the bound; starting the task over once",
            sampling={"temperature": self.temperature, "seed": state.step},
            rewind=True,
            failure=False,
        )

    def after_cell(self, state: TaskState, cell: CellResult, hint: str) -> str | None:
        if cell.ok or cell.error is None:
            return None
        self.failed[normalize_code(cell.code)] = f"{cell.error}\n{hint}".strip()
        before = state.cells[-2] if len(state.cells) > 1 else None
        if before is None or before.ok or before.error is None:
            return None
        if str(before.error).splitlines()[:1] != str(cell.error).splitlines()[:1]:
            return None
        # other code, the same error: the change did not reach its cause
        return prompt("same_error")


def _error_and_hint(error: str) -> str:
    """The error's first line, and the hint given with it (a close column name, say): the
    fresh start forgets the attempt, not what was learnt from it."""
    lines = error.splitlines()
    hint = next((line for line in lines if line.startswith("Hint:")), "")
    return " ".join(part for part in (lines[0] if lines else "", hint) if part)
