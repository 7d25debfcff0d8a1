"""A final answer composed from the last cell's printed lines: no model turn spent on it.

When the task asks for ``@name[value]`` slots and the last successful cell printed every
one of them, either in that form or as ``name: value`` / ``name = value`` lines, the
answer is those slots, filled with the printed values. It is grounded by construction,
and it saves the model turn that would only restate them (20-50 s on the bundled model).

Nothing is guessed: a slot printed twice with different values, a value that is not one
number or one short label, a rounding the task asks for that cannot be told per slot, or a
plot the task asks for that no cell made: the model answers as usual.
"""

from __future__ import annotations

import re

from ..llm.view import render_cell
from ..results import CellResult
from .answers import FormatSpec
from .asked_form import decimals_asked
from .code_text import typed_values_only
from .slots import FILLED

__all__ = ["compose_answer", "printed_values"]

_LABELED = re.compile(r"^\s*['\"]?([A-Za-z_][\w ()-]{0,60}?)['\"]?\s*[:=]\s*(.+?)\s*$")
_WRAPPED = re.compile(r"^(?:np\.|numpy\.)?(?:float|int)\d*\((.+)\)$")
_NUMBER = re.compile(r"^[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?$")
_LABEL = re.compile(r"^[A-Za-z][\w .'/-]{0,40}$")
_PLOT = re.compile(r"\b(?:plot|chart|graph|histogram|figure|visuali[sz]e)\b", re.I)
_YES_NO_ASKED = re.compile(r"\byes\s*(?:/|or)\s*no\b", re.I)
_NOT_VALUES = {"", "nan", "none", "null", "value", "...", "n/a", "na", "inf", "-inf"}


_MIDNIGHT = re.compile(r"(\d{4}-\d{2}-\d{2})[ T]00:00:00(?:\.0+)?")
_DATE = re.compile(r"\d{4}-\d{2}(?:-\d{2})?")  # a day, or a month (a pandas Period)


def _key(name: str) -> str:
    return re.sub(r"[\s-]+", "_", name.strip().lower())


def printed_values(text: str) -> dict[str, set[str]]:
    """``{name: {values}}`` from ``@name[value]`` and ``name: value`` lines of ``text``."""
    found: dict[str, set[str]] = {}
    for line in text.splitlines():
        slots = FILLED.findall(line)
        if slots:
            for name, value in slots:
                found.setdefault(_key(name), set()).add(value.strip())
        elif m := _LABELED.match(line):
            found.setdefault(_key(m.group(1)), set()).add(m.group(2).strip())
    return found


def _clean(value: str, decimals: set[int]) -> str | None:
    """The value as the answer states it, or None when it is not one clear value."""
    value = value.strip().strip("'\"`").strip()
    if m := _WRAPPED.match(value):
        value = m.group(1).strip()
    if value.lower() in _NOT_VALUES:
        return None
    if m := _MIDNIGHT.fullmatch(value):
        value = m.group(1)  # a pandas Timestamp of a date prints its midnight
    if _NUMBER.match(value):
        places = len(value.lower().split("e")[0].partition(".")[2])
        if "e" not in value.lower() and (not decimals or places <= min(decimals)):
            return value
        if len(decimals) != 1:
            return None  # which rounding applies to this slot is not known
        return f"{float(value):.{next(iter(decimals))}f}"
    return value if _LABEL.match(value) or _DATE.fullmatch(value) else None


def compose_answer(task: str, cell: CellResult, cells: list[CellResult]) -> str | None:
    """The ``@name[value]`` answer ``task`` asks for, from ``cell``'s output, or None."""
    spec = FormatSpec.of(task)
    if not spec.slots or not cell.ok:
        return None
    if typed_values_only(cell.code) and not all(c.ok for c in cells):
        return None  # typed after a failure: the model's to answer for, and checked
    if _PLOT.search(task) and not any(_has_image(c) for c in cells):
        return None
    found = printed_values(render_cell(cell, budget=4000).text)
    decimals = decimals_asked(task)
    placeholder = {name: text.strip().lower() for name, text in FILLED.findall(task)}
    parts = []
    for slot in spec.slots:
        values = found.get(_key(slot), set())
        if len(values) != 1:
            return None
        whole = placeholder.get(slot, "").startswith(("int", "whole", "count"))
        value = _clean(next(iter(values)), {0} if whole else decimals)
        if value is None or value.lower() in spec.placeholders:
            return None
        if value in ("True", "False") and _YES_NO_ASKED.search(task):
            value = "yes" if value == "True" else "no"  # a printed bool, in the asked words
        parts.append(f"@{slot}[{value}]")
    return " ".join(parts)


def _has_image(cell: CellResult) -> bool:
    return any(
        any(mime.startswith("image/") for mime in out.get("data", {})) for out in cell.outputs
    )
