"""A count that is every row: the cell counted a condition, and it printed the row count.

Asked how many full professors' salaries are outliers, the bundled model printed
``sum(df['rank'].str.startswith('Prof') & df['salary'] < lower_fence)``: 397, the file's
row count. Python reads ``a & b < c`` as ``(a & b) < c``, so the mask held on every row,
and the answer went out unchecked (scratch data, 2026-12-03). An outlier count equal to
the number of rows was also one of the issue's contradictions seen on the hidden sets.

The check is one property, not a list of mistakes: the task asks a count, the cell's code
holds a condition (a comparison, ``isna``, ``between``, ``isin``, ``str.contains``...) on a
frame or series, and a value the cell printed for the count is that frame's or series'
number of rows, or the number of values (not missing) of a column the condition reads,
as the kernel reported them. Asked how many students have a Pulse whose z-score is above
2.5, the model wrote ``df[df['Pulse'].abs() > 2.5]`` and printed 192, every Pulse there
is (the eval's tuned half, 2026-12-03). Whatever slip made the condition hold on every
row, the note says so; when the slip is the precedence of ``&``/``|`` over a comparison,
it names the fix too.

Its mirror: asked how many people have no age recorded, the model printed
``df['age'].dropna().count()``, the ages that are there (the tuned half, the same day).
When the task asks about missing values, a printed count that is the number of values
(not missing) of a column the code reads gets a note too. Pure: the cell, the task and
the namespace summary.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass

from ..kernel_state.namespace import VariableInfo
from ..llm.view import render_cell
from ..results import CellResult
from .answers import FormatSpec
from .code_text import parse_python
from .composed import printed_values
from .precedence import Slip, precedence_slip

__all__ = ["EveryRow", "every_row_counted"]

#: the task asks for a count
_COUNT_ASKED = re.compile(r"\bhow many\b|\bnumber of\b|\bcount\b", re.I)
#: the task asks about missing values
_MISSING_ASKED = re.compile(
    r"\bmissing\b|\bnot recorded\b|\bnull\b|\bno\s+[\w .()/-]{1,40}?\s+(?:recorded|value|given)\b",
    re.I,
)
#: ... or about what is left once they are dropped (then the values there are the answer)
_KEPT_ASKED = re.compile(r"\b(?:left|remain\w*|kept|after (?:dropping|removing))\b", re.I)
#: a printed label for the size of a table, not for a part of it
_SIZE_LABEL = re.compile(r"row|shape|len|size|record|entr|observation|sample|before|after")
#: calls that make a True/False series from a frame or series
_CONDITIONS = frozenset(
    {
        "isna",
        "isnull",
        "notna",
        "notnull",
        "between",
        "isin",
        "contains",
        "startswith",
        "endswith",
        "match",
        "eq",
        "ne",
        "lt",
        "le",
        "gt",
        "ge",
        "duplicated",
    }
)
_MISSING = frozenset({"isna", "isnull", "notna", "notnull"})
_ORDER = (ast.Lt, ast.LtE, ast.Gt, ast.GtE, ast.Eq, ast.NotEq)
#: fewer rows than this and a count equal to them is no sign of anything
_MIN_ROWS = 10


@dataclass(frozen=True)
class EveryRow:
    """A printed count (``rows``) that is every row of a frame or series, or every value
    of a column; ``what`` says which, for the note."""

    label: str
    rows: int
    what: str
    #: an ``a & b < c`` in the cell's conditions
    precedence: Slip | None = None
    #: the task asks about missing values, and the count is of the values there
    present: bool = False

    def note(self) -> str:
        if self.present:
            return (
                f"Note: {self.label} printed {self.rows}, and {self.what}: that counts the "
                "values that are there, and the task asks about the missing ones. Count "
                "those: `.isna().sum()` on the column (or `.isna().any(axis=1).sum()` for "
                "rows missing any value)."
            )
        text = (
            f"Note: {self.label} printed {self.rows}, and {self.what}: the condition this "
            "cell counted held on every one of them. If the task counts only some rows "
            "(outliers, matches, one group), that condition is not the one the task "
            "states: compute what the task says (each step of its rule), and check it on "
            "a few rows."
        )
        return f"{text} {self.precedence.sentence()}" if self.precedence else text


def every_row_counted(
    task: str, cell: CellResult, namespace: dict[str, VariableInfo]
) -> EveryRow | None:
    """The first printed count of ``cell`` that is the row count of a frame or series its
    code puts a condition on, when ``task`` asks a count; else None."""
    if not _COUNT_ASKED.search(task):
        return None
    tree = parse_python(cell.code)
    if tree is None:
        return None
    conditions = [node for node in ast.walk(tree) if _is_condition(node)]
    rows = _rows_under(conditions, namespace)
    present: dict[int, str] = {}
    if _MISSING_ASKED.search(task) and not _KEPT_ASKED.search(
        task
    ):  # the values that are there, counted for the missing
        for node in ast.walk(tree):
            for count, what in _counts_of(node, namespace, values=True):
                if count >= _MIN_ROWS and "values" in what:
                    present.setdefault(count, what)
    if not rows and not present:
        return None
    asked = set(FormatSpec.of(task).slots)
    for label, values in printed_values(render_cell(cell, budget=4000).text).items():
        if (asked and label not in asked) or _SIZE_LABEL.search(label):
            continue
        for value in values:
            number = _integer(value)
            shown = f"@{label}[...]" if label in asked else f"`{label}`"
            if number is not None and number in rows:
                return EveryRow(shown, number, rows[number], precedence_slip(cell.code))
            if number is not None and number in present:
                return EveryRow(shown, number, present[number], present=True)
    return None


def _is_condition(node: ast.AST) -> bool:
    if isinstance(node, ast.Compare):
        return all(isinstance(op, _ORDER) for op in node.ops)
    return (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr in _CONDITIONS
    )


def _rows_under(conditions: list[ast.AST], namespace: dict[str, VariableInfo]) -> dict[int, str]:
    """``{count: what}`` for the frames and series the conditions read: their rows, and
    the values a column they read has (not missing), unless the condition is about
    missing values itself (``notna`` holds on every value, as it should)."""
    found = [
        pair
        for condition in conditions
        for node in ast.walk(condition)
        for pair in _counts_of(node, namespace, values=not _missingness(condition))
    ]
    rows: dict[int, str] = {}
    for count, what in sorted(found, key=lambda pair: "rows" not in pair[1]):  # rows first
        if count >= _MIN_ROWS:
            rows.setdefault(count, what)
    return rows


def _counts_of(
    node: ast.AST, namespace: dict[str, VariableInfo], *, values: bool
) -> list[tuple[int, str]]:
    if isinstance(node, ast.Name) and (info := _table(namespace, node.id)):
        first = info.shape.strip("()").split(",")[0].strip() if info.shape else ""
        found = [(int(first), f"`{info.name}` has {first} rows")] if first.isdigit() else []
        if values and info.type == "Series" and info.counts:
            found.append(
                (info.counts[0], f"`{info.name}` has {info.counts[0]} values (not missing)")
            )
        return found
    column = _column(node)
    if values and column and (info := _table(namespace, column[0])) and info.counts:
        if info.columns and column[1] in info.columns:
            count = info.counts[info.columns.index(column[1])]
            return [(count, f"`{ast.unparse(node)}` has {count} values (not missing)")]
    return []


def _table(namespace: dict[str, VariableInfo], name: str) -> VariableInfo | None:
    info = namespace.get(name)
    return info if info is not None and info.type in ("DataFrame", "Series") else None


def _column(node: ast.AST) -> tuple[str, str] | None:
    """``(frame, column)`` for ``df['c']`` and ``df.c``."""
    if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name):
        if isinstance(node.slice, ast.Constant) and isinstance(node.slice.value, str):
            return node.value.id, node.slice.value
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
        return node.value.id, node.attr
    return None


def _missingness(condition: ast.AST) -> bool:
    return any(
        isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr in _MISSING
        for n in ast.walk(condition)
    )


def _integer(value: str) -> int | None:
    text = value.strip().strip("'\"`").replace(",", "")
    if text.endswith(".0"):
        text = text[:-2]
    return int(text) if text.isdigit() else None
