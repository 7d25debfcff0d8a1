"""The values a task asks for, part by part, held against the numbers an answer states.

"How many flowers have a petal width over 1.5 cm, and what is their mean sepal length?":
the bundled model printed the mean and answered with it alone; "which country had the
largest population in 2020, and what was it?" got the answer "Yes" after a cell that
printed the country. Each part of a task that asks for a number ("how many", "how much",
"what is the mean ...", "what percentage", "what was it" after a "which") owes the
answer one number, so an answer that states fewer numbers of its own than the task has
such parts left one out, whatever the statistic.

Pure: the task and the answer in, the parts out. Linear patterns on bounded text.
"""

from __future__ import annotations

import re
from collections.abc import Collection

from .answers import numbers_in

__all__ = ["missing_parts", "number_parts"]

_TASK_CHARS = 2_000  # the longest task read
#: where a part of a question starts
_PART = re.compile(r"\b(?:how (?:many|much|often)|what|which|who)\b", re.I)
#: a part that asks for a number
_NUMBER_PART = re.compile(
    r"^(?:how (?:many|much|often)\b"
    r"|what (?:percentage|percent|proportion|fraction|share|ratio|number|amount)\b"
    r"|what(?:'s| is| was| are| were) (?:it|that|this|they)\b"
    r"|what(?:'s| is| was| are| were) (?:the |their |its |his |her |that |this )?"
    r"(?:[a-z-]+ ){0,2}?(?:mean|average|median|total|sum|number|count|percentage|percent|"
    r"proportion|share|ratio|rate|std|standard deviation|variance|correlation|value|amount|"
    r"difference|minimum|maximum|range|p-value)\b)",
    re.I,
)
#: a task written as a yes/no question, or one that offers yes/no as the answer
_YES_NO_TASK = re.compile(
    r"\byes\b|\bwhether\b|(?:^|[.?!]\s+)(?:is|are|was|were|do|does|did|can|has|have|"
    r"should|will)\b",
    re.I,
)
_CELL_NUMBER = re.compile(r"\b(?:cell|step|In|Out)\s*\[\d+\]", re.I)
_NO_NUMBER = re.compile(r"\b(?:nan|NaN|NaT|None|inf|infinity|<NA>)\b")
_YES_NO_ANSWER = re.compile(r"^\W*(?:yes|no)\W*$", re.I)


def number_parts(task: str) -> list[str]:
    """The parts of ``task`` that each ask for one number, as the task words them."""
    text = task[:_TASK_CHARS]
    if "@" in text and re.search(r"@\w+\[", text):
        return []  # answer slots say what is asked (printed_answer and the slot checks)
    starts = [m.start() for m in _PART.finditer(text)]
    parts: list[str] = []
    for start, end in zip(starts, [*starts[1:], len(text)], strict=False):
        part = re.split(r"[?;!]|\.(?!\d)", text[start:end], maxsplit=1)[0]
        part = re.sub(r"[\s,]*\band\s*$", "", part.strip()).strip(" ,")
        if _NUMBER_PART.match(part):
            parts.append(part)
    return parts


def missing_parts(task: str, answer: str, printed: Collection[str] = ()) -> list[str]:
    """The number parts of ``task`` when ``answer`` states fewer numbers of its own than
    there are, or answers a question that is not yes/no with a bare yes or no; else none.

    A number of the answer's own is one the task does not write ("greater than 1.5 cm"
    restates the task), or one a cell ``printed`` too (a count of 3 in a task that asks
    for 3 decimal places)."""
    parts = number_parts(task)
    if not parts:
        return []
    if _YES_NO_ANSWER.match(answer) and not _YES_NO_TASK.search(task[:_TASK_CHARS]):
        return parts
    given = set(numbers_in(task[:_TASK_CHARS]))
    stated = _CELL_NUMBER.sub(" ", answer)  # "the output of cell [2] is ...": not a value
    own = {n for n in numbers_in(stated) if n not in given or n in printed}
    own |= set(_NO_NUMBER.findall(stated))  # a nan stated is a value (empty_value's to tell)
    return parts if len(own) < len(parts) else []
