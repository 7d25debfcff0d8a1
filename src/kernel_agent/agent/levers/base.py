"""A lever: a check the loop consults at named points. The base class, :class:`Lever`.

A lever sees the run's :class:`~..state.TaskState` and may return an
:class:`~..state.Ask` (send a message to the model and take another turn) at nine points:

- ``after_reply(state, turn)``: a reply was parsed (may trim ``turn.codes``);
- ``rewrite(state, code)``: a cell is about to run: the code to run instead, with a note
  for the model (None: run it as it is); each lever rewrites what the last one made;
- ``before_cell(state, code)``: a cell is about to run (an Ask skips it);
- ``probe(state, code)``: ``user_expressions`` the kernel evaluates after that cell, in its
  namespace (Python kernels only); ``after_cell`` reads their answers, hostile, in
  ``cell.user_expressions``;
- ``after_cell(state, cell, hint)``: a cell ran (record what it taught; a returned note is
  added to the model's view of the cell, and an answer composed from a cell that drew a
  note waits for the model);
- ``on_answer(state, answer)``: the model answered without code (an Ask refuses the answer,
  a Stop ends the run without it);
- ``compose(state)``: a reply's cells ran and the last succeeded: a final answer made
  from what it printed settles the run with no further model turn;
- ``task_note(state, executor)``: a task starts (text added to the task's message);
- ``on_give_up(state)``: the failing cells in a row reached their bound (an Ask, with
  ``rewind``, starts the task over instead of ending the run).

``before_cell`` may also return a :class:`~..state.Stop`: the run ends there, honestly.

**Memory.** A lever's memory lives on the lever, not on the shared ``TaskState``: the loop
makes each task's levers with :meth:`Lever.for_task` (a copy whose :meth:`Lever.forget`
ran), so memory lasts one task, as before. What two levers share is a named fact on
``TaskState`` (``stalls``, ``error_pushed``), never one lever's counter.

**Ask budget.** Most answer checks ask a few times a task and then accept the answer, or
end the run: that is :class:`AskBudget`, data on the class, applied in one place
(:meth:`Lever.on_answer`); the lever writes only :meth:`Lever.check_answer` (and
:meth:`Lever.stop` for ``then="stop"``).

A lever is named once, by its class's ``name``; the package's ``__init__`` lists the
small-model ones and makes those ``Settings.levers`` picks (:meth:`Lever.from_settings`).
This module imports no lever, so every lever module can import it.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar, Literal, TypeVar

from ...results import CellResult
from ..state import Ask, Stop, TaskState, Turn

if TYPE_CHECKING:
    from ...executors.base import AsyncExecutor
    from ...settings import Settings

__all__ = ["AskBudget", "Lever", "first_decision", "first_rewrite", "probes"]

L = TypeVar("L", bound="Lever")


@dataclass(frozen=True)
class AskBudget:
    """How many times a lever may refuse an answer in one task, and what comes after.

    ``then="accept"``: once the asks are spent, the next answer is taken (the lever is not
    consulted again); ``then="stop"``: the next answer it would refuse ends the run (the
    lever's :meth:`Lever.stop`).
    """

    asks: int = 1
    then: Literal["accept", "stop"] = "accept"

    def consults(self, used: int) -> bool:
        """Whether the lever is asked at all, with ``used`` asks spent."""
        return self.then == "stop" or used < self.asks

    def settle(
        self, used: int, decision: Ask | Stop | None, stop: Callable[[], Stop | None]
    ) -> tuple[int, Ask | Stop | None]:
        """The asks used after ``decision``, and what goes to the loop: an Ask within the
        budget; past it None (accept) or ``stop()``; a Stop or None as they are."""
        if not isinstance(decision, Ask):
            return used, decision
        if used < self.asks:
            return used + 1, decision
        return used, stop() if self.then == "stop" else None


class Lever:
    """A check the loop consults; every hook does nothing unless a lever overrides it."""

    name: str = ""
    #: how often ``check_answer`` may refuse an answer a task (None: it never does)
    budget: ClassVar[AskBudget | None] = None
    #: asks spent in this task (the budget's count)
    asked: int = 0

    def __init__(self) -> None:
        self.forget()

    @classmethod
    def from_settings(cls, settings: Settings) -> Lever:
        """The lever as ``settings`` configure it (most read nothing from them)."""
        return cls()

    def forget(self) -> None:
        """Start a task with no memory (a lever that keeps more extends this)."""
        self.asked = 0

    def for_task(self: L) -> L:
        """This lever for a new task: its settings kept, its memory empty."""
        fresh = copy.copy(self)
        fresh.forget()
        return fresh

    def after_reply(self, state: TaskState, turn: Turn) -> None:
        return None

    def rewrite(self, state: TaskState, code: str) -> tuple[str, str] | None:
        return None

    def before_cell(self, state: TaskState, code: str) -> Ask | Stop | None:
        return None

    def probe(self, state: TaskState, code: str) -> dict[str, str]:
        return {}

    def after_cell(self, state: TaskState, cell: CellResult, hint: str) -> str | None:
        return None

    def on_answer(self, state: TaskState, answer: str) -> Ask | Stop | None:
        """:meth:`check_answer`, within the lever's :attr:`budget`."""
        budget = self.budget
        if budget is None or not budget.consults(self.asked):
            return None
        decision = self.check_answer(state, answer)
        self.asked, decision = budget.settle(self.asked, decision, lambda: self.stop(state, answer))
        return decision

    def check_answer(self, state: TaskState, answer: str) -> Ask | Stop | None:
        """Why ``answer`` should go back (an Ask), ignoring the budget; a Stop ends the run."""
        return None

    def stop(self, state: TaskState, answer: str) -> Stop | None:
        """The end of the run once the asks are spent (``AskBudget(then="stop")``)."""
        return None

    def compose(self, state: TaskState) -> str | None:
        return None

    async def task_note(self, state: TaskState, executor: AsyncExecutor) -> str | None:
        return None

    def on_give_up(self, state: TaskState) -> Ask | None:
        return None


def first_rewrite(levers: Sequence[Lever], state: TaskState, code: str) -> tuple[str, str, str]:
    """The code to run, the levers that changed it ("", or names joined by "+") and their
    notes for the model. Each lever rewrites what the ones before it made."""
    names, notes = [], []
    for lever in levers:
        change = lever.rewrite(state, code)
        if change is not None:
            code = change[0]
            names.append(lever.name)
            if change[1]:
                notes.append(change[1])
    return code, "+".join(names), "\n".join(notes)


def probes(levers: Sequence[Lever], state: TaskState, code: str) -> dict[str, str]:
    """Every lever's ``user_expressions`` for the cell ``code`` (each lever its own keys)."""
    return {key: text for lever in levers for key, text in lever.probe(state, code).items()}


def first_decision(
    levers: Sequence[Lever], state: TaskState, code: str
) -> tuple[str, Ask | Stop | None]:
    """The first lever that skips the cell (or stops the run) before it runs, by name."""
    for lever in levers:
        decision = lever.before_cell(state, code)
        if decision is not None:
            return lever.name, decision
    return "", None
