"""``stall_guard``: a run that makes no progress is asked once for its answer, then ends.

Small models loop in a few recognisable ways, all seen in real runs: the same successful
cell again and again, a cell whose output is one already seen, ``!pip install`` in a
kernel that cannot install, the final sentence written inside a code fence (a
SyntaxError, then the last good cell again). Each is a turn of *no progress*, counted in
``TaskState.stalls`` (a repeated cell or output here; a refused install by ``no_install``;
prose in a cell by ``prose_cell``); after :data:`STALL_LIMIT` of them in a row the model
is asked once for its final answer, stated from what was printed. If it still does not
give one, the run ends: with the last statement the model wrote beside its code whose
numbers the outputs (or the data preview) show, as status ``ok``, else with status
``no_answer``, saying what the last output was. ``max_steps`` stays a backstop.
"""

from __future__ import annotations

import re

from ...llm.view import render_cell
from ...prompts import prompt
from ...results import CellResult
from ..code_text import normalize_code
from ..grounding import numbers_in, ungrounded_numbers
from ..state import Ask, Stop, TaskState
from .base import Lever

__all__ = ["STALL_LIMIT", "StallGuard"]

#: prose that plans the work rather than states its result
_PLAN = re.compile(
    r"\b(?:let'?s|we (?:will|need|can|should)|i (?:will|need|can)|here is|here's|step|"
    r"to (?:find|compute|calculate|answer|determine|get)|first,?|then|next)\b",
    re.I,
)
#: a task that asks for a value (a statement of one can answer it)
_ASKS_FOR_VALUE = re.compile(
    r"\b(?:how (?:many|much)|what (?:is|are|was|were)|which|count|number of|mean|average|"
    r"median|sum|total|percent\w*|ratio|correlation)\b|@[A-Za-z_]\w*\[",
    re.I,
)

#: turns in a row without progress before the model is asked for its final answer
STALL_LIMIT = 2


class StallGuard(Lever):
    """Repeated cells and repeated outputs count as no progress; two ask for the answer once.

    A successful cell sent again is not re-run (its output is known). After the ask, one
    more turn without progress ends the run with status ``no_answer``.
    """

    name = "stall_guard"

    def forget(self) -> None:
        super().forget()
        #: normalized code of each successful cell -> the output the model saw
        self.succeeded: dict[str, str] = {}
        #: whether the model was asked for its final answer in this task
        self.asked_for_answer = False

    def before_cell(self, state: TaskState, code: str) -> Ask | Stop | None:
        seen = self.succeeded.get(normalize_code(code))
        if seen is not None:
            state.stalls += 1
            decision = self._decide(state)
            if decision is not None:
                return decision
            return Ask(
                prompt("repeated_cell", output=_tail(seen)),
                notice="the model repeated a cell that already ran; not run again",
                cell_meta={"repeat": True},
                failure=False,
            )
        return self._decide(state)

    def after_cell(self, state: TaskState, cell: CellResult, hint: str) -> None:
        if not cell.ok:
            return  # failures have their own bound (max_consecutive_errors)
        text = render_cell(cell, budget=4000).text.strip()
        repeated = bool(text) and text in self.succeeded.values()
        self.succeeded[normalize_code(cell.code)] = text
        state.stalls = state.stalls + 1 if repeated else 0

    def _decide(self, state: TaskState) -> Ask | Stop | None:
        if state.stalls < STALL_LIMIT:
            return None
        if not self.asked_for_answer:
            self.asked_for_answer = True
            return Ask(
                prompt("final_answer_now", printed=_last_outputs(state)),
                notice="no progress for two turns; asking the model for its final answer",
                failure=False,
            )
        if state.stalls <= STALL_LIMIT:
            return None
        if stated := _grounded_statement(state):
            return Stop(
                "ok",
                stated,
                notice="the model made no progress after being asked for its answer; "
                "answered with what it stated beside its code, which the outputs show",
            )
        last = _last_outputs(state)
        return Stop(
            "no_answer",
            "No final answer: the model kept repeating itself after it was asked for one."
            + (f" The last output was:\n\n```\n{last}\n```" if last else ""),
            notice="the model made no progress after being asked for its answer; stopping",
        )


def _grounded_statement(state: TaskState) -> str:
    """The last prose the model wrote beside its code that states a number (a count or a
    value, not only small ordinals) every one of which a cell's output or the data preview
    shows, when the task asks for a value; else "". The scratch survey run stated "the
    number of respondents who did not give a satisfaction score is 15" above its first
    cell (the preview had counted 15), then repeated a cell until it was stopped."""
    if not _ASKS_FOR_VALUE.search(state.task):
        return ""
    outputs = [render_cell(c, budget=4000).text for c in state.cells if c.ok]
    shown = [*outputs, *state.briefing]
    for said in reversed(state.said):
        if "```" in said or len(said) > 600 or _PLAN.search(said) or not _a_value_in(said):
            continue
        if not ungrounded_numbers(said, shown, given=state.task, ignore_below=0):
            return said
    return ""


def _a_value_in(said: str) -> bool:
    """``said`` states a number that is not a small whole one (an ordinal, a step)."""
    for number in numbers_in(said):
        try:
            value = float(number)
        except ValueError:
            continue
        if not value.is_integer() or abs(value) >= 11:
            return True
    return False


def _tail(text: str, limit: int = 1200) -> str:
    return text if len(text) <= limit else "..." + text[-limit:]


def _last_outputs(state: TaskState, cells: int = 3, limit: int = 1500) -> str:
    outputs = [render_cell(c, budget=2000).text.strip() for c in state.cells if c.ok]
    shown = "\n".join(o for o in outputs[-cells:] if o)
    return _tail(shown, limit)
