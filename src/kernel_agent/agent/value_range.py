"""A mean, median or extreme stated outside the values it was taken of.

A mean of a column lies between the column's smallest and largest value, whatever rows
were selected or grouped: "the mean rating in percent" of a column of 38 to 99 came out
7256 (the model multiplied a percentage by 100 again; scratch, 2026-12-07), and the
issue's 300-digit "average" of streams read as text is the same class. After each cell,
the kernel reports the range of every column whose mean, median, min, max, quantile or
mode the cell's code takes (``df['Rating'].mean()``, ``df[mask]['Price'].median()``,
``df.groupby('g')['x'].max()``, ``np.mean(df['x'])``), read as numbers. An answer to a
task that asks for such a value, none of whose own numbers lies in any of those ranges,
gets a note. A task about a difference, a ratio, a change or a total is not checked (its
value may lie anywhere), and a percentage of a column of fractions (0 to 1) is in range.
"""

from __future__ import annotations

import ast
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass

from ..kernel_state.expressions import expression_json, kernel_call
from ..results import CellResult
from .answers import numbers_in
from .code_text import parse_python

__all__ = ["ColumnRange", "out_of_range", "range_note", "range_probe", "ranges_of"]

_KEY = "ka_range_"
#: at most this many columns are probed after one cell, with names this long at most
_MOST = 6
_LONGEST_NAME = 200
#: statistics that lie within the values they are taken of
_WITHIN = frozenset({"mean", "median", "min", "max", "quantile", "mode", "nanmean", "nanmedian"})
#: a task that asks for one of them
_ASKS = re.compile(r"\b(?:mean|average|median|minimum|maximum|highest|lowest)\b", re.I)
#: a task whose value may lie outside the columns it is computed from
_DERIVED = re.compile(
    r"\b(?:differ\w*|change\w*|ratio|increase\w*|decrease\w*|growth|times|gap|total|sum|"
    r"combined|product|scaled?|normali[sz]\w*|standardi[sz]\w*|z-?scores?|log\w*|"
    r"per (?:cent|mille)|variance|std|deviation|range|spread|error|rate)\b",
    re.I,
)
_PERCENT = re.compile(r"\bper ?cent(?:age)?s?\b|%", re.I)
_RANGE_SOURCE = """
def result(frame, column):
    import math
    import pandas as pd
    if not hasattr(frame, 'columns') or column not in frame.columns:
        return None
    values = pd.to_numeric(frame[column], errors='coerce')
    low, high = float(values.min()), float(values.max())
    if not (math.isfinite(low) and math.isfinite(high)):
        return None
    return [low, high]
"""


@dataclass(frozen=True)
class ColumnRange:
    """``column`` of ``frame`` holds numbers from ``low`` to ``high``."""

    frame: str
    column: str
    low: float
    high: float

    def holds(self, value: float) -> bool:
        slack = 0.005 * (self.high - self.low) + 0.01  # a rounded mean at an end
        return self.low - slack <= value <= self.high + slack

    def describe(self) -> str:
        return f"{self.column!r} runs from {self.low:g} to {self.high:g}"


def _taken_of(code: str) -> list[tuple[str, str]]:
    """``(frame, column)`` for each column of a named frame whose mean, median, min, max,
    quantile or mode ``code`` takes, in order, at most :data:`_MOST`."""
    tree = parse_python(code)
    if tree is None:
        return []
    found: dict[tuple[str, str], None] = {}
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Attribute):
            continue
        if node.func.attr not in _WITHIN:
            continue
        receivers = [node.func.value, *node.args[:1]]  # df['x'].mean(), np.mean(df['x'])
        for receiver in receivers:
            if (pair := _column_of(receiver)) is not None:
                found.setdefault(pair)
    return list(found)[:_MOST]


def _column_of(node: ast.expr) -> tuple[str, str] | None:
    """``(frame, column)`` of ``frame[...]['column']`` and ``frame.groupby(...)['column']``."""
    if not (
        isinstance(node, ast.Subscript)
        and isinstance(node.slice, ast.Constant)
        and isinstance(node.slice.value, str)
    ):
        return None
    root: ast.expr = node.value
    while isinstance(root, ast.Subscript | ast.Attribute | ast.Call):
        root = root.func if isinstance(root, ast.Call) else root.value
    if not isinstance(root, ast.Name) or not 0 < len(node.slice.value) <= _LONGEST_NAME:
        return None
    return root.id, node.slice.value


def _checked(task: str) -> bool:
    return _ASKS.search(task) is not None and _DERIVED.search(task) is None


def range_probe(task: str, code: str) -> dict[str, str]:
    """``user_expressions`` asking the kernel, after the cell, for the range of each column
    whose mean (median, extreme...) ``code`` takes; none for a task not checked."""
    if not _checked(task):
        return {}
    return {
        f"{_KEY}{i}": kernel_call(_RANGE_SOURCE, f"{frame}, {column!r}")
        for i, (frame, column) in enumerate(_taken_of(code))
    }


def ranges_of(cell: CellResult) -> list[ColumnRange]:
    """The ranges the kernel reported for ``cell``'s columns (a forged answer is none)."""
    found = []
    for i, (frame, column) in enumerate(_taken_of(cell.code)):
        answer = expression_json(cell.user_expressions.get(f"{_KEY}{i}"), 200)
        if (
            isinstance(answer, list)
            and len(answer) == 2
            and all(isinstance(v, int | float) and math.isfinite(v) for v in answer)
            and answer[0] <= answer[1]
        ):
            found.append(ColumnRange(frame, column, float(answer[0]), float(answer[1])))
    return found


def out_of_range(
    task: str, answer: str, ranges: Mapping[tuple[str, str], ColumnRange]
) -> tuple[str, list[ColumnRange]] | None:
    """The answer's number, and the ranges, when ``task`` asks for a mean, median or
    extreme and none of the numbers ``answer`` states (the task's own left out) lies in
    any range a cell's column reported."""
    if not ranges or not _checked(task):
        return None
    given = set(numbers_in(task))
    stated = []
    for number in numbers_in(answer[:4000])[:20]:
        if number in given:
            continue
        try:
            stated.append((number, float(number)))
        except ValueError:
            continue
    if not stated:
        return None
    percent = _PERCENT.search(task) is not None
    for _, value in stated:
        for column in ranges.values():
            if column.holds(value) or (percent and column.high <= 1 and column.holds(value / 100)):
                return None
    return stated[0][0], list(ranges.values())[:3]


def range_note(number: str, columns: list[ColumnRange]) -> str:
    ran = "; ".join(c.describe() for c in columns)
    if len(number) > 40:  # a sum of numbers read as text: its length is the news
        number = f"{number[:20]}... ({len(number)} characters)"
    return (
        f"Note: the task asks for a mean, median or extreme, which lies within the values "
        f"it is taken of, and the answer states {number}, outside every column the cells "
        f"took one of ({ran}), so it is not their mean. Find the step that changed it (a "
        "value multiplied or summed on the way, another column, numbers read as text: a "
        "percentage is already one), and print the value again in a new cell."
    )
