"""The small-model levers, and the registry that makes those ``Settings.levers`` picks.

The hooks are :class:`~.lever.Lever`'s. Here: the levers that need no module of their own
(:class:`NudgeNoCode`, :class:`PushAfterError`, :class:`GroundingCheck`,
:class:`RepeatGuard`, :class:`FencedRules`, :class:`ResultCheck`), and :data:`LEVERS`,
made from :data:`SMALL_MODEL_LEVERS`: each lever is named once, by its class's ``name``.

``Settings.levers`` picks them: ``"auto"`` (all), ``"none"``, or a tuple of names, so
``bench/eval_analysis.py`` can measure each one. None of them touches a kernel or a server.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from ..errors import ConfigError
from ..llm.view import render_cell
from ..prompts import prompt
from ..results import CellResult
from .answers import AnswerFormat, StatesResult
from .briefing import DataPreview
from .checks import AnswerCheck
from .composed import PrintedAnswer
from .echo import PromptEcho
from .grounding import ungrounded_numbers
from .imports import AutoImport
from .lever import Lever, normalize_code, typed_values_only
from .pitfalls import PandasPitfalls
from .preflight import Preflight
from .progress import NoInstall, ProseCell, StallGuard
from .slots import slot_values
from .state import Ask, Stop, TaskState, Turn

if TYPE_CHECKING:
    from ..settings import Settings

__all__ = [
    "LEVERS",
    "SMALL_MODEL_LEVERS",
    "FencedRules",
    "GroundingCheck",
    "NudgeNoCode",
    "PushAfterError",
    "RepeatGuard",
    "ResultCheck",
    "UnbackedAnswer",
    "levers_for",
]


class NudgeNoCode(Lever):
    """An answer before any cell ran (often from memory) gets one request to compute it."""

    name = "nudge_no_code"

    def on_answer(self, state: TaskState, answer: str) -> Ask | None:
        if state.ran_code or not self._once(state):
            return None
        return Ask(prompt("nudge_no_code"))


class PushAfterError(Lever):
    """Giving up right after a failing cell gets one push to fix it, with the last hint."""

    name = "push_after_error"

    def after_cell(self, state: TaskState, cell: CellResult, hint: str) -> None:
        if not cell.ok and cell.error is not None and hint:
            state.last_hint = hint

    def on_answer(self, state: TaskState, answer: str) -> Ask | None:
        if not state.cells or state.cells[-1].ok or not self._once(state):
            return None
        push = prompt("nudge_after_error")
        return Ask(push + "\n" + state.last_hint if state.last_hint else push)


class GroundingCheck(Lever):
    """An answer stating numbers that no output shows gets one request to check them."""

    name = "grounding_check"

    def __init__(self, output_chars: int = 4000) -> None:
        self.output_chars = output_chars

    @classmethod
    def from_settings(cls, settings: Settings) -> GroundingCheck:
        return cls(settings.llm_output_chars)

    def on_answer(self, state: TaskState, answer: str) -> Ask | None:
        if self.name in state.fired:
            return None
        outputs = [render_cell(c, budget=self.output_chars).text for c in state.cells if c.ok]
        if not outputs:
            return None
        # what the model was shown of the kernel's variables under each cell grounds too:
        # the 212 of "malignant (DataFrame, shape (212, 31))" (sent back when right, twice)
        shown = [info.short() for info in list(state.namespace.values())[:200]]
        given = "\n".join([state.task, *(c.code for c in state.cells), *shown])
        # a line copied from a cell's "Variables new: ..." note is grounded in the namespace
        stated = "\n".join(ln for ln in answer.splitlines() if not _VARIABLES_NOTE.match(ln))
        missing = ungrounded_numbers(stated, outputs, given=given)
        if not missing:
            return None
        state.fired.add(self.name)
        printed = "\n".join(outputs[-3:])[-1500:]
        return Ask(
            prompt("answer_check", numbers=", ".join(missing), printed=printed),
            notice="the answer states numbers no cell printed; asking the model to check",
        )


_VARIABLES_NOTE = re.compile(r"^\s*Variables (?:new|changed|removed|gone)\b")


class UnbackedAnswer(Lever):
    """No cell succeeded, yet the answer states values: they cannot come from the data.

    After a cell that failed, one that only prints values typed into its code
    (``print('@t[0.123]')``) computed nothing, so it does not count as one that succeeded.
    (``grounding_check`` has no output to compare them with.) The first such answer gets
    one request to fix the error and print the values, unless ``push_after_error`` has
    already pushed; the next one ends the run with status ``no_answer``, and the values
    are not reported (the refused reply stays in the transcript's note).
    """

    name = "unbacked_answer"

    def on_answer(self, state: TaskState, answer: str) -> Ask | Stop | None:
        cells = state.cells
        if all(c.ok for c in cells) or any(c.ok and not typed_values_only(c.code) for c in cells):
            return None
        # numbers the task, the code or an error message says are not the answer's own
        given = "\n".join([state.task, *(f"{c.code}\n{c.error}" for c in state.cells)])
        values = ungrounded_numbers(answer, [], given=given, ignore_below=0)
        values += [v.strip() for v in slot_values(answer) if not _NUMERIC.match(v)]
        if not values:
            return None
        error = next(c.error for c in reversed(cells) if not c.ok)
        if "push_after_error" in state.fired or not self._once(state):
            return Stop(
                "no_answer",
                "No answer: no cell computed without an error, so the values the model stated "
                f"are not from the data and are not reported. The last error was: {error}",
                notice="the answer states values, but no cell succeeded; stopping without it",
            )
        return Ask(
            prompt("unbacked_answer", error=error, hint=state.last_hint),
            notice="the answer states values, but no cell succeeded; asking for a fix",
        )


_NUMERIC = re.compile(r"^\s*[-+]?[\d.,eE+-]*\s*$")


class RepeatGuard(Lever):
    """A cell that already failed is not run again: the model is resampled hotter.

    The first time in a task, the attempt is forgotten (the conversation goes back to the
    task, with the error in one line, and the failing cells in a row count from 0 again): a
    small model that sends a failing cell again
    copies it from the conversation, and a fresh first cell often works. After that, the
    model is told the cell already failed.
    """

    name = "repeat_guard"

    def __init__(self, temperature: float | None = None) -> None:
        self.temperature = max(temperature or 0.0, 0.7)

    @classmethod
    def from_settings(cls, settings: Settings) -> RepeatGuard:
        return cls(settings.temperature)

    def before_cell(self, state: TaskState, code: str) -> Ask | None:
        error = state.failed.get(normalize_code(code))
        if error is None:
            return None
        if self._once(state):
            state.failures = 0  # the fresh attempt gets the whole bound of failing cells
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

    def after_cell(self, state: TaskState, cell: CellResult, hint: str) -> str | None:
        if cell.ok or cell.error is None:
            return None
        state.failed[normalize_code(cell.code)] = f"{cell.error}\n{hint}".strip()
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


class FencedRules(Lever):
    """Fenced code runs one block per reply: the model sees each block's output before the next.

    (So a failing block also ends the reply's batch: the model fixes it first.)
    """

    name = "fenced_rules"

    def after_reply(self, state: TaskState, turn: Turn) -> None:
        if turn.fenced:
            del turn.codes[1:]


class ResultCheck(Lever):
    """A run that asked for ``set_result`` and got an answer without one: told once.

    Not a small-model lever (``levers_for`` does not make it): the agent adds it when
    its settings ask for a result.
    """

    name = "result_check"

    def __init__(self, missing: Callable[[], bool]) -> None:
        self.missing = missing

    def on_answer(self, state: TaskState, answer: str) -> Ask | None:
        if not self.missing() or not self._once(state):
            return None
        return Ask(prompt("result_missing"), notice="no result was set; asking for set_result")


#: Every small-model lever, in the order the loop consults them.
SMALL_MODEL_LEVERS: tuple[type[Lever], ...] = (
    DataPreview,
    NudgeNoCode,
    PushAfterError,
    PromptEcho,
    AnswerCheck,
    GroundingCheck,
    UnbackedAnswer,
    StatesResult,
    AnswerFormat,
    PrintedAnswer,
    Preflight,
    AutoImport,
    PandasPitfalls,
    RepeatGuard,
    NoInstall,
    ProseCell,
    StallGuard,
    FencedRules,
)

LEVERS: tuple[str, ...] = tuple(lever.name for lever in SMALL_MODEL_LEVERS)
"""Every small-model lever's name, in the order the loop consults them."""


def levers_for(settings: Settings) -> list[Lever]:
    """The levers ``settings.levers`` asks for: ``"auto"`` (all), ``"none"``, a tuple of
    names, or of ``-name`` (all but those)."""
    chosen: Sequence[str]
    if settings.levers == "auto":
        chosen = LEVERS
    elif settings.levers == "none":
        chosen = ()
    elif all(name.startswith("-") for name in settings.levers):  # all but these
        chosen = [n for n in LEVERS if f"-{n}" not in settings.levers]
        unknown = sorted({n[1:] for n in settings.levers} - set(LEVERS))
        if unknown:
            raise ConfigError(f"unknown lever {unknown[0]!r}; the levers are: {', '.join(LEVERS)}")
    else:
        chosen = settings.levers
    unknown = sorted(set(chosen) - set(LEVERS))
    if unknown:
        raise ConfigError(f"unknown lever {unknown[0]!r}; the levers are: {', '.join(LEVERS)}")
    return [lever.from_settings(settings) for lever in SMALL_MODEL_LEVERS if lever.name in chosen]
