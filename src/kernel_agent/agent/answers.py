"""Levers on a final answer: it states the computed values, and it follows the asked format.

Both send an answer back once, with what is wrong and what the cells printed; the
model's second answer is taken as it is.

- :class:`StatesResult`: an answer with no number although the last cell printed some
  ("we can use the determinant variable as the final answer"), or one that leaves out
  every number of a short last output.
- :class:`AnswerFormat`: what the task asks of the answer's form and can be checked: the
  ``@name[value]`` slots it names, a number of decimal places, a yes/no answer.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from ..llm.view import render_cell
from ..prompts import prompt
from .lever import Lever
from .slots import OPENING, slot_values
from .state import Ask, TaskState

__all__ = ["AnswerFormat", "FormatSpec", "StatesResult", "format_problems", "numbers_in"]

_NUMBER = re.compile(r"(?<![\w.])[-+]?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?(?:[eE][-+]?\d+)?")
_WORDS = {"zero": 0, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6}
_DECIMALS = re.compile(
    r"\b(\d|zero|one|two|three|four|five|six)\s+(?:decimal(?:\s+places?|\s+digits?|s)?|"
    r"digits?\s+after\s+the\s+decimal(?:\s+point)?|dp)\b",
    re.I,
)
_NEAREST_INT = re.compile(r"\b(?:nearest|closest)\s+(?:whole\s+number|integer)\b", re.I)
_NOT_PRINTED = re.compile(r"^\s*(?:\[[\w/+.-]+ image\b.*\]|<(?:Figure|Axes)\b.*>)\s*$")
#: a task that asks for a computed value (else an answer owes no number)
_ASKS_FOR_VALUE = re.compile(
    r"\b(?:how (?:many|much|often)|what (?:is|are|was|were)|calculate|compute|count|number of|"
    r"mean|average|median|sum|total|percentage|percent|rate|ratio|correlation|p-value|"
    r"statistic|std|standard deviation|variance|minimum|maximum|min|max|estimate|predict)\b"
    r"|@[A-Za-z_]\w*\[",
    re.I,
)
_YES_NO = re.compile(r"\(?\byes\s*(?:/|or)\s*no\b\)?|\btrue\s*(?:/|or)\s*false\b", re.I)


def numbers_in(text: str) -> list[str]:
    """The numbers written in ``text``, as written (thousands separators removed)."""
    return [m.group(0).replace(",", "") for m in _NUMBER.finditer(text)]


@dataclass(frozen=True)
class FormatSpec:
    """What a task asks of its answer's form, as far as it can be checked."""

    slots: tuple[str, ...] = ()
    decimals: int | None = None
    yes_no: bool = False
    given: frozenset[str] = field(default_factory=frozenset)
    #: what the task writes inside its slots (``@mean[mean_value]``): not an answer
    placeholders: frozenset[str] = field(default_factory=frozenset)

    @classmethod
    def of(cls, task: str) -> FormatSpec:
        slots = tuple(dict.fromkeys(OPENING.findall(task)))
        decimals: int | None = None
        if asked := _DECIMALS.findall(task):  # two roundings (1 place, 4 places): the larger
            decimals = max(int(w) if w.isdigit() else _WORDS[w.lower()] for w in asked)
        elif _NEAREST_INT.search(task):
            decimals = 0
        yes_no = bool(_YES_NO.search(task))
        placeholders = frozenset(v.strip().lower() for v in slot_values(task) if v.strip())
        return cls(slots, decimals, yes_no, frozenset(numbers_in(task)), placeholders)

    @property
    def empty(self) -> bool:
        return not (self.slots or self.decimals is not None or self.yes_no)

    def template(self) -> str:
        return " ".join(f"@{name}[value]" for name in self.slots)


def format_problems(spec: FormatSpec, answer: str) -> list[str]:
    """What in ``answer`` does not follow ``spec`` (empty: nothing that can be checked)."""
    problems: list[str] = []
    missing = [s for s in spec.slots if f"@{s}[" not in answer]
    if missing:
        problems.append("it lacks " + ", ".join(f"@{s}[...]" for s in missing))
    filled = slot_values(answer)
    empty = {"", "value", "...", *spec.placeholders}
    if any(v.strip().lower() in empty for v in filled):
        problems.append("a @name[...] slot holds no value")
    if spec.decimals is not None:
        worse = [
            n
            for n in numbers_in(_without_dates(answer))
            if n not in spec.given and _decimals(n) > spec.decimals
        ]
        if worse:
            places = f"{spec.decimals} decimal places" if spec.decimals else "whole numbers"
            problems.append(f"{', '.join(worse[:4])} not rounded to {places}")
    if spec.yes_no and not re.search(r"\b(?:yes|no|true|false)\b", answer, re.I):
        problems.append("it does not say yes or no")
    return problems


class StatesResult(Lever):
    """An answer that states none of the printed values goes back once with the last output.

    Only for tasks that ask for a value ("how many", "what is", "mean", ``@name[...]``...),
    and only when the last successful cell printed a number. An answer stating a value that
    *any* successful cell printed is kept: the last cell often prints something unrelated
    (``key: None``, ``n = 6``) after the cell that computed the answer.
    """

    name = "states_result"

    def on_answer(self, state: TaskState, answer: str) -> Ask | None:
        if self.name in state.fired or not _ASKS_FOR_VALUE.search(state.task):
            return None
        last = _last_output(state)
        printed = numbers_in(last)
        if not printed:
            return None
        stated = numbers_in(answer)
        if stated:
            if len(set(printed)) > 4:
                return None
            given = set(numbers_in(state.task))
            own = [n for n in stated if n not in given] or stated
            if any(_same(p, own) for p in _all_printed(state)):
                return None
        elif _names_a_word(state, answer, last):
            return None
        state.fired.add(self.name)
        return Ask(
            prompt("state_values", printed=last[-1500:]),
            notice="the answer does not state the values the cells printed; asking again",
        )


class AnswerFormat(Lever):
    """An answer that ignores the format the task asks for goes back once, saying what is off."""

    name = "answer_format"

    def on_answer(self, state: TaskState, answer: str) -> Ask | None:
        spec = FormatSpec.of(state.task)
        if spec.empty or self.name in state.fired:
            return None
        problems = format_problems(spec, answer)
        if not problems:
            return None
        state.fired.add(self.name)
        template = f" Use exactly this form: {spec.template()}" if spec.slots else ""
        return Ask(
            prompt("answer_format", problems="; ".join(problems), template=template),
            notice="the answer does not follow the requested format; asking again",
        )


def _last_output(state: TaskState) -> str:
    """The last printed text of a successful cell (image notes and figure reprs left out)."""
    for cell in reversed(state.cells):
        if cell.ok:
            lines = render_cell(cell, budget=3000).text.strip().splitlines()
            text = "\n".join(line for line in lines if not _NOT_PRINTED.match(line)).strip()
            if text:
                return text
    return ""


def _all_printed(state: TaskState) -> list[str]:
    """The numbers every successful cell of the task printed (image notes left out)."""
    found: list[str] = []
    for cell in state.cells:
        if cell.ok:
            lines = render_cell(cell, budget=3000).text.splitlines()
            found += numbers_in("\n".join(ln for ln in lines if not _NOT_PRINTED.match(ln)))
    return found


def _same(printed: str, stated: list[str]) -> bool:
    """``printed`` appears among ``stated``, as written or rounded to a stated precision."""
    try:
        value = float(printed)
    except ValueError:
        return False
    for s in stated:
        try:
            if float(s) == value or round(value, _decimals(s)) == float(s):
                return True
        except ValueError:
            continue
    return False


def _names_a_word(state: TaskState, answer: str, last: str) -> bool:
    """The answer is a word the output printed (a name, a label, yes/no), not a variable."""
    words = set(re.findall(r"[A-Za-z][\w-]{2,}", answer))
    code_names = set(re.findall(r"\b[A-Za-z_]\w*\b", "\n".join(c.code for c in state.cells)))
    printed_words = set(re.findall(r"[A-Za-z][\w-]{2,}", last))
    named = (words & printed_words) - code_names
    return bool(named) and "`" not in answer


def _decimals(number: str) -> int:
    mantissa = number.lower().split("e")[0]
    return len(mantissa.split(".")[1]) if "." in mantissa else 0


def _without_dates(text: str) -> str:
    return re.sub(r"\d{4}-\d{2}-\d{2}|\d{1,2}:\d{2}(?::\d{2})?", " ", text)
