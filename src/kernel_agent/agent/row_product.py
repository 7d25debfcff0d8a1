"""``df['a'] * df['b'].sum()`` sent again after the note that it printed one value per row.

The bundled model wrote ``df['quantity'] * df['item_price'].sum()`` for a total revenue
(scratch, 2026-12-07), got a Series of 1,203 values and the note that says a total of a
product is ``(a * b).sum()``, and sent the same line again, twice. Two columns of the same
frame, the second summed: the sum binds first, so each row is multiplied by the whole
column's total. Run again under the note, the product is summed instead. Pure.
"""

from __future__ import annotations

import ast

from .code_text import parse_python

__all__ = ["summed_product"]


def summed_product(code: str) -> str | None:
    """``code`` with each ``X['a'] * X['b'].sum()`` (either order, one line) written as
    ``(X['a'] * X['b']).sum()``; None when it has none."""
    tree = parse_python(code)
    if tree is None:
        return None
    lines = code.splitlines(keepends=True)
    spans = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.BinOp):
            continue
        fixed = _fixed(node)
        if fixed and node.lineno == node.end_lineno and node.end_col_offset is not None:
            spans.append((node.lineno - 1, node.col_offset, node.end_col_offset, fixed))
    if not spans:
        return None
    for row, start, end, new in sorted(spans, reverse=True):  # right to left: offsets hold
        line = lines[row].encode()
        lines[row] = (line[:start] + new.encode() + line[end:]).decode()
    return "".join(lines)


def _fixed(node: ast.BinOp) -> str | None:
    if not isinstance(node.op, ast.Mult):
        return None
    for column, summed in ((node.left, node.right), (node.right, node.left)):
        inner = _summed(summed)
        if inner is not None and _frame(column) is not None and _frame(column) == _frame(inner):
            return f"({ast.unparse(column)} * {ast.unparse(inner)}).sum()"
    return None


def _summed(node: ast.expr) -> ast.expr | None:
    """``X['b']`` of ``X['b'].sum()`` with no arguments."""
    if (
        isinstance(node, ast.Call)
        and not node.args
        and not node.keywords
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "sum"
    ):
        return node.func.value
    return None


def _frame(node: ast.expr) -> str | None:
    """``X`` of a column ``X['a']`` or ``X.a`` of a named frame."""
    if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name):
        key = node.slice
        return (
            node.value.id if isinstance(key, ast.Constant) and isinstance(key.value, str) else None
        )
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
        return node.value.id
    return None
