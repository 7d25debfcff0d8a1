"""A count slot that holds no count: ``@outliers[count]`` answered with ``166.14``.

A task that writes a slot's placeholder as a count (``@outliers[count]``,
``@n[number of rows]``, ``@days[integer]``) asks a whole number there. A value with a
fraction in that slot is another value the cell printed in the wrong place (a fence, a
mean, a share): whatever printed it, it is no count. Pure: the task and a text (a cell's
output or an answer).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from .slots import FILLED, quoted

__all__ = ["NotACount", "not_a_count"]

#: a placeholder that asks a whole number
_COUNT_PLACEHOLDER = re.compile(
    r"^(?:count|counts|integer|int|whole number|n|number of [\w ]{1,40}|\w+_count|count_\w+)$",
    re.I,
)
_VALUE_CHARS = 40  # the longest printed value read (a longer one is no number to quote)


@dataclass(frozen=True)
class NotACount:
    """``value``, with a fraction, in the slot ``slot`` whose placeholder asks a count."""

    slot: str
    value: str

    def note(self) -> str:
        return (
            f"Note: the task asks a count in {quoted(self.slot, slot=True)}, a whole number, "
            f"and {self.value} there has a fraction: it is another value (a fence, a mean, a "
            "share), not the number of rows or values the task counts. Count them: "
            "`int(mask.sum())` for the rows where a condition holds, or `len(frame)`."
        )


def count_slots(task: str) -> frozenset[str]:
    """The slots whose placeholder in ``task`` asks a whole number."""
    return frozenset(
        name for name, value in FILLED.findall(task) if _COUNT_PLACEHOLDER.match(value.strip())
    )


def not_a_count(task: str, text: str) -> NotACount | None:
    """The first count slot of ``task`` that ``text`` fills with a number with a fraction."""
    asked = count_slots(task)
    if not asked:
        return None
    for name, value in FILLED.findall(text):
        value = value.strip()
        if name in asked and len(value) <= _VALUE_CHARS and _fractional(value):
            return NotACount(name, value)
    return None


def _fractional(value: str) -> bool:
    try:
        number = float(value.strip("'\"`").replace(",", ""))
    except ValueError:
        return False
    return number == number and abs(number) != float("inf") and number != int(number)
