"""What a task asks of its answer's form, and the numbers an answer states.

:class:`FormatSpec` is what can be checked of the form (the ``@name[value]`` slots the task
names, a number of decimal places, a yes/no answer); :func:`format_problems` what in an
answer does not follow it. The levers that act on them are ``answer_format`` and
``states_result`` (:mod:`.levers`), and the composed answer reads the spec too.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from .slots import OPENING, slot_values

__all__ = ["FormatSpec", "decimal_places", "format_problems", "numbers_in"]

_NUMBER = re.compile(r"(?<![\w.])[-+]?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?(?:[eE][-+]?\d+)?")
_WORDS = {"zero": 0, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6}
_DECIMALS = re.compile(
    r"\b(\d|zero|one|two|three|four|five|six)\s+(?:decimal(?:\s+places?|\s+digits?|s)?|"
    r"digits?\s+after\s+the\s+decimal(?:\s+point)?|dp)\b",
    re.I,
)
_NEAREST_INT = re.compile(r"\b(?:nearest|closest)\s+(?:whole\s+number|integer)\b", re.I)
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
            if n not in spec.given and decimal_places(n) > spec.decimals
        ]
        if worse:
            places = f"{spec.decimals} decimal places" if spec.decimals else "whole numbers"
            problems.append(f"{', '.join(worse[:4])} not rounded to {places}")
    if spec.yes_no and not re.search(r"\b(?:yes|no|true|false)\b", answer, re.I):
        problems.append("it does not say yes or no")
    return problems


def decimal_places(number: str) -> int:
    """The digits after the decimal point of ``number`` as written (``1.50e3``: 2)."""
    mantissa = number.lower().split("e")[0]
    return len(mantissa.split(".")[1]) if "." in mantissa else 0


def _without_dates(text: str) -> str:
    return re.sub(r"\d{4}-\d{2}-\d{2}|\d{1,2}:\d{2}(?::\d{2})?", " ", text)
