"""The slots a task asks its answer to fill, and the numbers an answer states.

:class:`FormatSpec` holds the ``@name[value]`` slots the task names (the composed answer of
:mod:`.composed`, ``printed_answer`` and ``pandas_pitfalls`` read them); ``states_result``
reads the numbers an answer states.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from .slots import OPENING, slot_values

__all__ = ["FormatSpec", "decimal_places", "numbers_in"]

_NUMBER = re.compile(r"(?<![\w.])[-+]?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?(?:[eE][-+]?\d+)?")


def numbers_in(text: str) -> list[str]:
    """The numbers written in ``text``, as written (thousands separators removed)."""
    return [m.group(0).replace(",", "") for m in _NUMBER.finditer(text)]


@dataclass(frozen=True)
class FormatSpec:
    """The ``@name[value]`` slots a task asks its answer to fill."""

    slots: tuple[str, ...] = ()
    #: what the task writes inside its slots (``@mean[mean_value]``): not an answer
    placeholders: frozenset[str] = field(default_factory=frozenset)

    @classmethod
    def of(cls, task: str) -> FormatSpec:
        slots = tuple(dict.fromkeys(OPENING.findall(task)))
        placeholders = frozenset(v.strip().lower() for v in slot_values(task) if v.strip())
        return cls(slots, placeholders)


def decimal_places(number: str) -> int:
    """The digits after the decimal point of ``number`` as written (``1.50e3``: 2)."""
    mantissa = number.lower().split("e")[0]
    return len(mantissa.split(".")[1]) if "." in mantissa else 0
