"""``df['a'] * df['b'].sum()`` sent again after the note that it printed one value per row.

The bundled model wrote ``df['quantity'] * df['item_price'].sum()`` for a total revenue
(scratch, 2026-12-07), got a Series of 1,203 values and the note that says a total of a
product is ``(a * b).sum()``, and sent the same line again, twice. Two columns of the same
frame, the second summed: the sum binds first, so each row is multiplied by the whole
column's total. Run again under the note, the product is summed instead. Pure.
"""

from __future__ import annotations

import ast

from .code_text import column_frame, parse_python, rewritten

__all__ = ["summed_product"]


def summed_product(code: str) -> str | None:
    """``code`` with each ``X['a'] * X['b'].sum()`` (either order, one line) written as
    ``(X['a'] * X['b']).sum()``; None when it has none."""
    tree = parse_python(code)
    if tree is None:
        return None
    return rewritten(code, tree, lambda node: _fixed(node) if isinstance(node, ast.BinOp) else None)


def _fixed(node: ast.BinOp) -> str | None:
    if not isinstance(node.op, ast.Mult):
        return None
    for column, summed in ((node.left, node.right), (node.right, node.left)):
        inner = _summed(summed)
        if (
            inner is not None
            and column_frame(column) is not None
            and column_frame(column) == column_frame(inner)
        ):
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
