"""A condition with an ISO date ('2020-03') on a column that writes its dates otherwise.

"How many new cases did Italy report in March 2020?": the bundled model filtered
``df['date'].str.contains('2020-03')`` on dates written '03/15/2020', printed 0, got the
note that no row meets it, and sent the same cell again (scratch, 2026-12-07). The
preview's facts know the column's format; the condition is written again on the dates
in ISO form (``pd.to_datetime(df['date'], format='%m/%d/%Y').dt.strftime('%Y-%m-%d')``),
which the model's literal matches as it meant. Pure.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Mapping

from ..kernel_state.preview_facts import parsed_dates

__all__ = ["dated_condition"]

#: a year and a month, or a full date, as ISO writes them
_ISO = re.compile(r"\d{4}-\d{2}(?:-\d{2})?")


def dated_condition(condition: str, column: str, dates: Mapping[str, str]) -> str | None:
    """``condition`` on ``column``'s dates in ISO form, when its literal is an ISO date
    (piece) and the column is one whose dates the preview found written in another fixed
    format (``dates``: column name -> strftime format); else None."""
    try:
        test = ast.parse(condition, mode="eval").body
        target = ast.parse(column, mode="eval").body
    except SyntaxError:
        return None
    literals = [n.value for n in ast.walk(test) if isinstance(n, ast.Constant)]
    if not any(isinstance(v, str) and _ISO.fullmatch(v) for v in literals):
        return None
    fmt = dates.get(_name(target) or "")
    if not fmt or fmt == "mixed" or fmt.startswith("%Y-%m-%d"):
        return None
    iso = ast.parse(f"{parsed_dates('pd', column, fmt)}.dt.strftime('%Y-%m-%d')", mode="eval").body
    changed = _Swap(column, iso).visit(test)
    text = ast.unparse(changed)
    return text if text != condition else None


def _name(node: ast.expr) -> str | None:
    """The column name of ``df['date']`` or ``df.date``."""
    if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant):
        return node.slice.value if isinstance(node.slice.value, str) else None
    if isinstance(node, ast.Attribute):
        return node.attr
    return None


class _Swap(ast.NodeTransformer):
    """Every expression written as ``column`` becomes ``iso``."""

    def __init__(self, column: str, iso: ast.expr) -> None:
        self.column, self.iso = column, iso

    def generic_visit(self, node: ast.AST) -> ast.AST:
        if isinstance(node, ast.expr) and ast.unparse(node) == self.column:
            return self.iso
        return super().generic_visit(node)
