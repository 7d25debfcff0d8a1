"""A lever: a check the loop consults at named points. The base class, :class:`Lever`.

A lever sees the run's :class:`~.state.TaskState` and may return an :class:`~.state.Ask`
(send a message to the model and take another turn) at four points:

- ``after_reply(state, turn)``: a reply was parsed (may trim ``turn.codes``);
- ``rewrite(state, code)``: a cell is about to run: the code to run instead, with a note
  for the model (None: run it as it is); each lever rewrites what the last one made;
- ``before_cell(state, code)``: a cell is about to run (an Ask skips it);
- ``after_cell(state, cell, hint)``: a cell ran (record what it taught; a returned note is
  added to the model's view of the cell, and an answer composed from a cell that drew a
  note waits for the model);
- ``on_answer(state, answer)``: the model answered without code (an Ask refuses the answer,
  a Stop ends the run without it);
- ``compose(state)``: a reply's cells ran and the last succeeded: a final answer made
  from what it printed settles the run with no further model turn;
- ``task_note(state, executor)``: a task starts (text added to the task's message).

``before_cell`` may also return a :class:`~.state.Stop`: the run ends there, honestly.

A lever is named once, by its class's ``name``; :mod:`.levers` lists the small-model ones
and makes those ``Settings.levers`` picks (:meth:`Lever.from_settings`). This module imports
no lever, so every lever module can import it.
"""

from __future__ import annotations

import ast
from collections.abc import Sequence
from typing import TYPE_CHECKING

from ..results import CellResult
from .state import Ask, Stop, TaskState, Turn

if TYPE_CHECKING:
    from ..executors.base import AsyncExecutor
    from ..settings import Settings

__all__ = [
    "Lever",
    "first_decision",
    "first_rewrite",
    "normalize_code",
    "parse_python",
    "typed_values_only",
]


def normalize_code(code: str) -> str:
    """The code without blank lines and trailing blanks: two cells that differ only so are one."""
    return "\n".join(line.rstrip() for line in code.strip().splitlines() if line.strip())


def parse_python(code: str) -> ast.Module | None:
    """The model's code as an ast, or None when it is not Python (or too deep to parse)."""
    try:
        return ast.parse(code)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None


def typed_values_only(code: str) -> bool:
    """The cell is nothing but ``print`` calls of constants: it reads no name, computes
    nothing, and what it prints was typed, not found (comments and blank lines aside)."""
    tree = parse_python(code)
    if tree is None or not tree.body:
        return False
    for statement in tree.body:
        call = statement.value if isinstance(statement, ast.Expr) else None
        if not (
            isinstance(call, ast.Call)
            and isinstance(call.func, ast.Name)
            and call.func.id == "print"
            and not call.keywords
            and all(isinstance(a, ast.Constant) for a in call.args)
        ):
            return False
    return True


class Lever:
    """A check the loop consults; every hook does nothing unless a lever overrides it."""

    name: str = ""

    @classmethod
    def from_settings(cls, settings: Settings) -> Lever:
        """The lever as ``settings`` configure it (most read nothing from them)."""
        return cls()

    def after_reply(self, state: TaskState, turn: Turn) -> None:
        return None

    def rewrite(self, state: TaskState, code: str) -> tuple[str, str] | None:
        return None

    def before_cell(self, state: TaskState, code: str) -> Ask | Stop | None:
        return None

    def after_cell(self, state: TaskState, cell: CellResult, hint: str) -> str | None:
        return None

    def on_answer(self, state: TaskState, answer: str) -> Ask | Stop | None:
        return None

    def compose(self, state: TaskState) -> str | None:
        return None

    async def task_note(self, state: TaskState, executor: AsyncExecutor) -> str | None:
        return None

    def _once(self, state: TaskState) -> bool:
        """True the first time in a task (then the lever has used its ask)."""
        if self.name in state.fired:
            return False
        state.fired.add(self.name)
        return True


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


def first_decision(
    levers: Sequence[Lever], state: TaskState, code: str
) -> tuple[str, Ask | Stop | None]:
    """The first lever that skips the cell (or stops the run) before it runs, by name."""
    for lever in levers:
        decision = lever.before_cell(state, code)
        if decision is not None:
            return lever.name, decision
    return "", None
