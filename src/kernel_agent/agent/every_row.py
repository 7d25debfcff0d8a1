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
from collections.abc import Iterable
from dataclasses import dataclass

from ..kernel_state.namespace import VariableInfo
from ..llm.view import render_cell
from ..results import CellResult
from .answers import FormatSpec
from .code_text import parse_python
from .precedence import Slip, is_comparison, precedence_slip
from .slots import FILLED, quoted

__all__ = ["COUNT_ASKED", "EveryRow", "every_row_counted", "printed_counts"]

#: the task asks for a count
COUNT_ASKED = re.compile(r"\bhow many\b|\bnumber of\b|\bcount\b", re.I)
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
#: a line that ends in a whole number after a label: ``Number of outliers: 12``
_COUNT_LINE = re.compile(r"^\s*([^\n:=@]{1,120}?)\s*[:=]\s*([\d,]+)\s*$", re.M)
_SHOWN = 100  # characters of the model's code quoted back
#: fewer rows than this and a count equal to them is no sign of anything
_MIN_ROWS = 10


@dataclass(frozen=True)
class Whole:
    """A count the kernel reported: every row of ``source``, or every value it has."""

    count: int
    source: str
    rows: bool

    def said(self) -> str:
        kind = "rows" if self.rows else "values (not missing)"
        return f"`{self.source}` has {self.count} {kind}"


@dataclass(frozen=True)
class EveryRow:
    """A printed count that is a :class:`Whole`: every row or every value there is."""

    label: str
    whole: Whole
    #: an ``a & b < c`` in the cell's conditions
    precedence: Slip | None = None
    #: the task asks about missing values, and the count is of the values there
    present: bool = False

    def note(self) -> str:
        head = f"Note: {self.label} printed {self.whole.count}, and {self.whole.said()}"
        if self.present:
            return (
                f"{head}: that counts the values that are there, and the task asks about "
                f"the missing ones. Count those: `{self.whole.source}.isna().sum()` (rows "
                "missing any value: `df.isna().any(axis=1).sum()`)."
            )
        text = (
            f"{head}: the condition this cell counted held on every one of them. If the "
            "task counts only some rows (outliers, matches, one group), that condition is "
            "not the one the task states: compute what the task says (each step of its "
            "rule), and check it on a few rows."
        )
        return f"{text} {self.precedence.sentence()}" if self.precedence else text


def every_row_counted(
    task: str, cell: CellResult, namespace: dict[str, VariableInfo]
) -> EveryRow | None:
    """The first printed count of ``cell`` that is every row (or value) of a frame, series
    or column its code puts a condition on, when ``task`` asks a count; asked about
    missing values, also one that is every value of a column the code reads; else None."""
    if not COUNT_ASKED.search(task):
        return None
    tree = parse_python(cell.code)
    if tree is None:
        return None
    conditions = [node for node in ast.walk(tree) if _is_condition(node)]
    asks_values = {id(condition): not _missingness(condition) for condition in conditions}
    under = _wholes(
        (
            (node, asks_values[id(condition)])
            for condition in conditions
            for node in ast.walk(condition)
        ),
        namespace,
    )
    present: dict[int, Whole] = {}
    if _MISSING_ASKED.search(task) and not _KEPT_ASKED.search(task):
        wholes = _wholes(((node, True) for node in ast.walk(tree)), namespace)
        present = {n: whole for n, whole in wholes.items() if not whole.rows}
    if not under and not present:
        return None
    for label, number in printed_counts(task, cell):
        if number in under:
            return EveryRow(label, under[number], precedence_slip(cell.code))
        if number in present:
            return EveryRow(label, present[number], present=True)
    return None


def printed_counts(task: str, cell: CellResult) -> list[tuple[str, int]]:
    """``(label, count)`` for each whole number printed in an asked slot (or, with none
    asked, in a slot or after a label: ``Number of students above 2.5: 192``), not for a
    label of a table's size."""
    asked = set(FormatSpec.of(task).slots)
    text = render_cell(cell, budget=4000).text
    found = [
        (quoted(name, slot=True), value)
        for name, value in FILLED.findall(text)
        if not asked or name in asked
    ]
    if not asked:
        found += [(quoted(m[1], slot=False), m[2]) for m in _COUNT_LINE.finditer(text)]
    return [
        (label, number)
        for label, value in found
        if (number := _integer(value)) is not None and not _SIZE_LABEL.search(label.lower())
    ]


def _is_condition(node: ast.AST) -> bool:
    return is_comparison(node) or (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr in _CONDITIONS
    )


def _wholes(
    nodes: Iterable[tuple[ast.AST, bool]], namespace: dict[str, VariableInfo]
) -> dict[int, Whole]:
    """``{count: whole}`` for the frames, series and columns among ``nodes``: their rows,
    and (where the node's flag says so) the values a column or series has. A condition
    about missing values itself does not ask for the values (``notna`` holds on every
    one, as it should)."""
    found = [whole for node, values in nodes for whole in _counts_of(node, namespace, values)]
    wholes: dict[int, Whole] = {}
    for whole in sorted(found, key=lambda w: not w.rows):  # rows first
        if whole.count >= _MIN_ROWS:
            wholes.setdefault(whole.count, whole)
    return wholes


def _counts_of(node: ast.AST, namespace: dict[str, VariableInfo], values: bool) -> list[Whole]:
    if isinstance(node, ast.Name) and (info := _table(namespace, node.id)):
        first = info.shape.strip("()").split(",")[0].strip() if info.shape else ""
        found = [Whole(int(first), info.name, rows=True)] if first.isdigit() else []
        if values and info.type == "Series" and info.counts:
            found.append(Whole(info.counts[0], info.name, rows=False))
        return found
    column = _column(node)
    if values and column and (info := _table(namespace, column[0])) and info.counts:
        if info.columns and column[1] in info.columns:
            count = info.counts[info.columns.index(column[1])]
            return [Whole(count, ast.unparse(node)[:_SHOWN], rows=False)]
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
