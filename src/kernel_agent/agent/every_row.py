"""A count that is every row: the cell counted a condition, and it printed the row count.

Asked how many full professors' salaries are outliers, the bundled model printed
``sum(df['rank'].str.startswith('Prof') & df['salary'] < lower_fence)``: 397, the file's
row count. Python reads ``a & b < c`` as ``(a & b) < c``, so the mask held on every row,
and the answer went out unchecked (scratch data, 2026-12-03). An outlier count equal to
the number of rows was also one of the issue's contradictions seen on the hidden sets.

The check is one property, not a list of mistakes: the task asks a count, the cell's code
holds a condition (a comparison, ``isna``, ``between``, ``isin``, ``str.contains``...) on a
frame or series, and a value the cell printed for the count is that frame's or series'
number of rows, as the kernel reported it. Whatever slip made the condition hold on
every row, the note says so; when the slip is the precedence of ``&``/``|`` over a
comparison, it names the fix too. Pure: the cell, the task and the namespace summary.
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
_ORDER = (ast.Lt, ast.LtE, ast.Gt, ast.GtE, ast.Eq, ast.NotEq)
#: fewer rows than this and a count equal to them is no sign of anything
_MIN_ROWS = 10


@dataclass(frozen=True)
class EveryRow:
    """A printed count that is the number of rows of ``frame`` (``rows``)."""

    label: str
    rows: int
    frame: str
    #: an ``a & b < c`` in the cell's conditions
    precedence: Slip | None = None

    def note(self) -> str:
        text = (
            f"Note: {self.label} printed {self.rows}, and `{self.frame}` has {self.rows} "
            "rows: the condition this cell counted held on every row. If the task counts "
            "only some rows (outliers, matches, one group), that condition is not the one "
            "the task states; check it on a few rows."
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
    if not rows:
        return None
    asked = set(FormatSpec.of(task).slots)
    for label, values in printed_values(render_cell(cell, budget=4000).text).items():
        if (asked and label not in asked) or _SIZE_LABEL.search(label):
            continue
        for value in values:
            if (count := _integer(value)) in rows:
                shown = f"@{label}[...]" if label in asked else f"`{label}`"
                return EveryRow(shown, count, rows[count], precedence_slip(cell.code))
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
    """``{rows: name}`` of the frames and series the conditions read."""
    rows: dict[int, str] = {}
    for condition in conditions:
        for node in ast.walk(condition):
            info = namespace.get(node.id) if isinstance(node, ast.Name) else None
            if info is None or info.type not in ("DataFrame", "Series") or not info.shape:
                continue
            first = info.shape.strip("()").split(",")[0].strip()
            if first.isdigit() and int(first) >= _MIN_ROWS:
                rows.setdefault(int(first), info.name)
    return rows


def _integer(value: str) -> int | None:
    text = value.strip().strip("'\"`").replace(",", "")
    if text.endswith(".0"):
        text = text[:-2]
    return int(text) if text.isdigit() else None
