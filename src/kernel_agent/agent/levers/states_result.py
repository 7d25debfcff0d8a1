"""``states_result``: an answer that states none of the printed values is sent back once.

An answer with no number although the last cell printed some ("we can use the
determinant variable as the final answer"), or one that leaves out every number of a
short last output, goes back with that output; the model's second answer is taken.
"""

from __future__ import annotations

import re

from ...llm.view import render_cell
from ...prompts import prompt
from ..answers import decimal_places, numbers_in
from ..asked_parts import missing_parts
from ..state import Ask, TaskState
from .base import AskBudget, Lever

__all__ = ["StatesResult"]

_NOT_PRINTED = re.compile(r"^\s*(?:\[[\w/+.-]+ image\b.*\]|<(?:Figure|Axes)\b.*>)\s*$")
#: a task that asks for a computed value (else an answer owes no number)
_ASKS_FOR_VALUE = re.compile(
    r"\b(?:how (?:many|much|often)|what (?:is|are|was|were)|calculate|compute|count|number of|"
    r"mean|average|median|sum|total|percentage|percent|rate|ratio|correlation|p-value|"
    r"statistic|std|standard deviation|variance|minimum|maximum|min|max|estimate|predict)\b"
    r"|@[A-Za-z_]\w*\[",
    re.I,
)


class StatesResult(Lever):
    """An answer that states none of the printed values goes back once with the last output.

    Only for tasks that ask for a value ("how many", "what is", "mean", ``@name[...]``...),
    and only when the last successful cell printed a number. An answer stating a value that
    *any* successful cell printed is kept: the last cell often prints something unrelated
    (``key: None``, ``n = 6``) after the cell that computed the answer.
    """

    name = "states_result"
    budget = AskBudget(asks=1, then="accept")

    def check_answer(self, state: TaskState, answer: str) -> Ask | None:
        parts = missing_parts(state.task, answer, set(_all_printed(state)))
        if parts:
            return Ask(
                prompt(
                    "asked_parts",
                    count=f"{len(parts)} values" if len(parts) > 1 else "a value",
                    parts="\n".join(f"- {part}" for part in parts),
                    printed=(_last_output(state) or "(nothing)")[-1500:],
                ),
                notice="the answer leaves out a value the task asks for; asking again",
            )
        if not _ASKS_FOR_VALUE.search(state.task):
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
        return Ask(
            prompt("state_values", printed=last[-1500:]),
            notice="the answer does not state the values the cells printed; asking again",
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
            if float(s) == value or round(value, decimal_places(s)) == float(s):
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
