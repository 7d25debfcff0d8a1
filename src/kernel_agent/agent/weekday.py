"""A day of the month read as a day of the week.

Asked how many hot days "fell on a Saturday or a Sunday" in 1973, with the date split in
``Month`` and ``Day`` columns, the bundled model counted ``(df['Day'] == 6) | (df['Day'] ==
7)``: days 6 and 7 of each month (the eval's tuned half, 2026-12-04). The property: the
task asks about days of the week, the code computes no weekday from a date (no
``dayofweek``, ``weekday()``, ``day_name()``, ``%a``...), and it compares a column named
for days with whole numbers 0-7. The note builds the dates with the year the task gives.
Pure: the task, the cell's code and the columns the kernel reported.
"""

from __future__ import annotations

import ast
import copy
import re
from collections.abc import Iterable

from .code_text import parse_python

__all__ = ["day_as_weekday"]

_WEEKDAY_ASKED = re.compile(
    r"\b(?:mon|tues|wednes|thurs|fri|satur|sun)days?\b|\bweek-?ends?\b|\bweekdays?\b|"
    r"\bday of (?:the )?week\b",
    re.I,
)
#: what computes a weekday from a date
_WEEKDAY_CALLS = frozenset(
    {"dayofweek", "weekday", "day_of_week", "day_name", "isoweekday", "isocalendar"}
)
_WEEKDAY_FORMAT = re.compile(r"%[aAwu]")
_DAY_COLUMN = re.compile(r"^day$|^dd$|day.?of.?month|^mday$", re.I)
_YEAR = re.compile(r"\b(1[89]\d\d|20\d\d)\b")
_NAMES = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
_SHOWN = 600  # the longest corrected statement quoted back
_NAME_CHARS = 60  # the longest frame or column name quoted back


def day_as_weekday(task: str, code: str, columns: Iterable[str] = ()) -> str | None:
    """A note when ``task`` asks about weekdays and ``code`` compares a day-of-month
    column with weekday numbers, computing no weekday; else None."""
    if not _WEEKDAY_ASKED.search(task):
        return None
    tree = parse_python(code)
    if tree is None or _computes_weekday(tree):
        return None
    day = next((c for node in ast.walk(tree) if (c := _day_compared(node))), None)
    if day is None:
        return None
    frame, column = day[0][:_NAME_CHARS], day[1][:_NAME_CHARS]
    month = next((c for c in columns if c.lower() == "month"), "Month")
    year = m[1] if (m := _YEAR.search(task)) else "YEAR"
    parts = f"year={year}, month={frame}[{month!r}], day={frame}[{column!r}]"
    dates = f"dates = pd.to_datetime(dict({parts}))"
    head = (
        f"Note: the task asks about days of the week, and this cell compares "
        f"`{frame}[{column!r}]` with weekday numbers, computing no weekday from a date: a "
        f"{column!r} column beside a month is the day of the month (1-31), and which "
        "weekday a date falls on depends on its year and month."
    )
    try:
        fixed = _corrected(tree, f"dates.dt.day_of_week.isin({_asked_days(task)})")
    except RecursionError:  # thousands of comparisons joined: no statement to quote back
        fixed = None
    if fixed is None:
        return (
            f"{head} Build the dates and read their weekday: `{dates}`, then "
            "`dates.dt.day_of_week >= 5` holds on Saturdays and Sundays (Monday is 0)."
        )
    return (
        f"{head} Build the dates, and test their weekday where the cell tests the day "
        f"(Monday is 0, Sunday 6):\n```python\n{dates}\n{fixed}\n```"
    )


def _asked_days(task: str) -> list[int]:
    """The weekdays ``task`` names, as pandas numbers them (the weekend: 5 and 6)."""
    text = task.lower()
    days = [i for i, name in enumerate(_NAMES) if re.search(rf"\b{name}", text)]
    if not days and re.search(r"\bweek-?ends?\b", text):
        days = [5, 6]
    return days or [0, 1, 2, 3, 4]  # "weekdays"


def _corrected(tree: ast.Module, weekday: str) -> str | None:
    """The first statement of ``tree`` that compares a day column, with each whole
    comparison of it replaced by ``weekday``; None if there is none to rewrite."""
    replacement = ast.parse(weekday, mode="eval").body
    for statement in tree.body:
        if any(_day_compared(n) for n in ast.walk(statement)):
            fixed = _Replace(replacement).visit(copy.deepcopy(statement))
            text = ast.unparse(fixed)
            return text if len(text) <= _SHOWN else None
    return None


class _Replace(ast.NodeTransformer):
    """Each expression made only of day comparisons (joined by ``|``, ``or``) becomes the
    weekday test."""

    def __init__(self, replacement: ast.expr) -> None:
        self.replacement = replacement

    def visit(self, node: ast.AST) -> ast.AST:
        if isinstance(node, ast.expr) and _only_days(node):
            return copy.deepcopy(self.replacement)
        return self.generic_visit(node)


def _only_days(node: ast.expr) -> bool:
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
        return _only_days(node.left) and _only_days(node.right)
    if isinstance(node, ast.BoolOp) and isinstance(node.op, ast.Or):
        return all(_only_days(v) for v in node.values)
    return _day_compared(node) is not None


def _computes_weekday(tree: ast.AST) -> bool:
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr in _WEEKDAY_CALLS:
            return True
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            if _WEEKDAY_FORMAT.search(node.value):
                return True
    return False


def _day_compared(node: ast.AST) -> tuple[str, str] | None:
    """``(frame, column)`` when ``node`` compares a day column with whole numbers 0-7
    (``df['Day'] == 6``, ``df['Day'].isin([6, 7])``, ``df.Day >= 6``)."""
    if isinstance(node, ast.Compare):
        sides = [node.left, *node.comparators]
        numbers = [s for s in sides if _weekday_number(s)]
        if numbers:
            return next((c for s in sides if (c := _day_column(s))), None)
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
        if (
            node.func.attr == "isin"
            and node.args
            and isinstance(node.args[0], ast.List | ast.Tuple)
        ):
            if node.args[0].elts and all(_weekday_number(e) for e in node.args[0].elts):
                return _day_column(node.func.value)
    return None


def _weekday_number(node: ast.AST) -> bool:
    return isinstance(node, ast.Constant) and type(node.value) is int and 0 <= node.value <= 7


def _day_column(node: ast.AST) -> tuple[str, str] | None:
    if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name):
        key = node.slice
        if isinstance(key, ast.Constant) and isinstance(key.value, str):
            return (node.value.id, key.value) if _DAY_COLUMN.search(key.value) else None
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
        return (node.value.id, node.attr) if _DAY_COLUMN.search(node.attr) else None
    return None
