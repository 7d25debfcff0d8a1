"""Rows with a missing value, counted in one column: the task asks about rows, the code
about one of their fields.

Asked how many days have at least one missing value, the bundled model printed
``df['Solar.R'].isna().sum()``: 7, the days without that one reading, where 42 days miss
one value or more (the eval's tuned half, 2026-12-04; the preview had said "42 of 153
rows have one"). The property: the task asks for rows (days, records, people...) with a
missing value in any field, and every ``isna``/``isnull``/``notna`` the cell calls is on
one column, none on a frame (``df.isna().any(axis=1)``, ``dropna()`` of the frame), so
the count printed is of one column's gaps. Pure: the task and the cell's code.
"""

from __future__ import annotations

import ast
import re

from .code_text import parse_python

__all__ = ["one_column_missing"]

#: the task asks about rows with a missing value in any field
_ANY_MISSING = re.compile(
    r"\b(?:at least one|any|one or more)\s+missing\b|\bmissing\s+(?:any|one or more)\b|"
    r"\bincomplete\s+(?:rows?|records?|days?|cases?|observations?|entries)\b|"
    r"\b(?:rows?|records?|days?|cases?|observations?|entries)\s+(?:that\s+)?(?:are\s+|is\s+)?"
    r"(?:not\s+)?complete\b",
    re.I,
)
_MISSING_CALLS = frozenset({"isna", "isnull", "notna", "notnull"})
_ROW_CALLS = frozenset({"any", "all", "dropna", "count"})
_SHOWN = 80  # characters of the model's code quoted back


def one_column_missing(task: str, code: str) -> str | None:
    """A note when ``task`` asks for rows missing any value and ``code`` counts the gaps
    of single columns only; else None."""
    if not _ANY_MISSING.search(task):
        return None
    tree = parse_python(code)
    if tree is None:
        return None
    calls = [
        node
        for node in ast.walk(tree)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
    ]
    missing = [c for c in calls if c.func.attr in _MISSING_CALLS]  # type: ignore[attr-defined]
    if not missing or any(_on_frame(c) for c in calls):
        return None
    receiver = missing[0].func.value  # type: ignore[attr-defined]
    if not (isinstance(receiver, ast.Subscript) and isinstance(receiver.value, ast.Name)):
        return None
    frame, column = receiver.value.id[:_SHOWN], ast.unparse(receiver)[:_SHOWN]
    return (
        f"Note: the task asks for rows with at least one missing value, and this cell counts "
        f"the missing values of one column (`{column}.isna()`), not the rows missing any of "
        f"theirs. Count those rows: `{frame}.isna().any(axis=1).sum()` (the complete ones: "
        f"`{frame}.notna().all(axis=1).sum()`)."
    )


def _on_frame(call: ast.Call) -> bool:
    """Whether ``call`` reads missing values across a row: ``x.isna().any(axis=1)``,
    ``frame.dropna()``, ``frame.isna()`` on a bare name, ``frame.count(axis=1)``."""
    func = call.func
    assert isinstance(func, ast.Attribute)
    if func.attr in _ROW_CALLS and any(k.arg == "axis" for k in call.keywords):
        return True
    if func.attr in _ROW_CALLS | _MISSING_CALLS and isinstance(func.value, ast.Name):
        return True
    return func.attr == "dropna" and not isinstance(func.value, ast.Subscript)
