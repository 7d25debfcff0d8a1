"""A share of a group, divided by every row instead of the group's own count.

"What percentage of female passengers survived?": the bundled model wrote
``df[df['Sex'] == 'female']['Survived'].sum() / df['Survived'].count() * 100``, the
female survivors out of every passenger, and answered 31.7 for 77.3 (scratch,
2026-12-07). The check reads the task and the cell's code: the task asks a share "of"
(or "among") a value, the numerator selects rows by that value, and the denominator counts
the whole frame (``len(df)``, ``df.shape[0]``, ``df[c].count()``, ``df[c].size``). Pure.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass

from .code_text import column_frame, parse_python

__all__ = ["WholeBase", "whole_base"]

_SHARE = re.compile(r"\b(?:percent\w*|share|proportion|fraction|rate|ratio|likely)\b", re.I)


@dataclass(frozen=True)
class WholeBase:
    """``division`` takes a share of the ``value`` rows of ``frame`` out of every row."""

    division: str
    value: str
    frame: str
    subset: str

    def note(self) -> str:
        return (
            f"Note: the task asks for a share of the {self.value!r} rows, and "
            f"`{self.division[:160]}` divides by every row of {self.frame}. A share among "
            f"them is out of their own count: `{self.subset[:100]}['column'].mean()` for a "
            f"0/1 column, or the count of those rows that meet the condition divided by "
            f"`len({self.subset[:100]})`."
        )


def whole_base(task: str, code: str) -> WholeBase | None:
    """The first division of ``code`` that does so, when ``task`` asks a share of a value."""
    if not _SHARE.search(task):
        return None
    tree = parse_python(code)
    if tree is None:
        return None
    named: dict[str, tuple[str, str, str]] = {}  # a name kept for a subset -> its parts
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and (kept := _subset(node.value, task, named)):
            named.update({t.id: kept for t in node.targets if isinstance(t, ast.Name)})
    for node in ast.walk(tree):
        if not (isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div)):
            continue
        part = next((s for n in ast.walk(node.left) if (s := _subset(n, task, named))), None)
        if part is None:
            continue
        frame, value, subset = part
        if _whole(node.right) == frame:
            return WholeBase(ast.unparse(node), value, frame, subset)
    return None


def _subset(
    node: ast.AST, task: str, named: dict[str, tuple[str, str, str]]
) -> tuple[str, str, str] | None:
    """(frame, value, code) of ``frame[<a mask comparing with 'value'>]`` (or ``.loc``),
    a value the task asks a share "of"; or a name kept for one."""
    if isinstance(node, ast.Name):
        return named.get(node.id)
    if not isinstance(node, ast.Subscript):
        return None
    base = (
        node.value.value
        if isinstance(node.value, ast.Attribute) and node.value.attr == "loc"
        else node.value
    )
    if not isinstance(base, ast.Name):
        return None
    mask = (
        node.slice.elts[0] if isinstance(node.slice, ast.Tuple) and node.slice.elts else node.slice
    )
    for inner in ast.walk(mask):
        if isinstance(inner, ast.Compare):
            for text in (c.value for c in ast.walk(inner) if isinstance(c, ast.Constant)):
                if isinstance(text, str) and _share_of(task, text):
                    return base.id, text, f"{base.id}[{ast.unparse(inner)}]"
    return None


def _share_of(task: str, value: str) -> bool:
    """The task asks a share of ``value``'s rows: "of (the) female passengers", "among
    women", "rate of males", or "of male students" for the code 'M'."""
    if not 1 <= len(value) <= 60 or not re.search(r"[^\W\d_]", value):
        return False
    # a code of one capital stands for a word it starts: 'M' for "of male students"
    word = rf"{re.escape(value)}\w*" if re.fullmatch(r"[A-Z]", value) else re.escape(value)
    return (
        re.search(rf"\b(?:of|among)\s+(?:the\s+|all\s+)?{word}(?:e?s)?\b", task, re.I) is not None
    )


def _whole(node: ast.expr) -> str | None:
    """``X`` of ``len(X)``, ``X.shape[0]``, ``len(X[c])``, ``X[c].count()``, ``X[c].size``."""
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id == "len"
        and node.args
    ):
        return _frame(node.args[0])
    if (
        isinstance(node, ast.Subscript)
        and isinstance(node.value, ast.Attribute)
        and node.value.attr == "shape"
    ):
        return _frame(node.value.value)
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "count"
        and not node.args
    ):
        return _frame(node.func.value)
    if isinstance(node, ast.Attribute) and node.attr == "size":
        return _frame(node.value)
    return None


def _frame(node: ast.expr) -> str | None:
    """``X`` itself, or of a column ``X['c']`` / ``X.c`` (no mask)."""
    return node.id if isinstance(node, ast.Name) else column_frame(node)
