"""A Series of one value per group, combined with a column of one value per row.

"What is the average revenue per order?": the bundled model wrote
``df.groupby('order_id')['quantity'].sum() * df['item_price']`` (scratch, 2026-12-07).
pandas pairs the two by index label, order ids against row numbers, not row by row, and
the mean of what comes out is a number from nowhere, printed without an error. The check
reads the cell's code: an arithmetic operation with a ``groupby`` aggregate (written there,
or a name this cell assigned one to) on one side and a column of the same frame on the
other. Pure.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

from .code_text import column_frame, parse_python

__all__ = ["Misaligned", "misaligned"]

#: the calls that make one value per group (``transform`` keeps one per row)
_AGGREGATES = frozenset(
    {"sum", "mean", "median", "count", "size", "min", "max", "nunique", "std", "var", "agg",
     "first", "last", "prod"}
)  # fmt: skip
_OPS = {ast.Mult: "*", ast.Div: "/", ast.Add: "+", ast.Sub: "-"}


@dataclass(frozen=True)
class Misaligned:
    """``expression`` combines a per-``key`` aggregate of ``frame`` with ``column``."""

    expression: str
    frame: str
    key: str
    column: str

    def note(self) -> str:
        return (
            f"Note: `{self.expression[:160]}` combines a Series of one value per {self.key} "
            f"group (a groupby) with {self.column}, one value per row. pandas pairs them "
            "by index label (group keys against row numbers), not row by row, so what it "
            "printed is wrong. Compute the per-row value first, then group it: "
            f"`{self.frame}.assign(v=<the per-row formula>).groupby({self.key})['v'].sum()`, "
            "or aggregate both sides by the same groups."
        )


def misaligned(code: str) -> Misaligned | None:
    """The first such operation in ``code``."""
    tree = parse_python(code)
    if tree is None:
        return None
    named = {}  # names this cell assigned a groupby aggregate to -> that aggregate
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and (grouped := _grouped(node.value)) is not None:
            named.update({t.id: grouped for t in node.targets if isinstance(t, ast.Name)})
    for node in ast.walk(tree):
        if not isinstance(node, ast.BinOp) or type(node.op) not in _OPS:
            continue
        for side, other in ((node.left, node.right), (node.right, node.left)):
            grouped = named.get(side.id) if isinstance(side, ast.Name) else _grouped(side)
            if grouped is None:
                continue
            frame, key = grouped
            if column_frame(other) == frame:
                return Misaligned(ast.unparse(node), frame, key, ast.unparse(other))
    return None


def _grouped(node: ast.expr) -> tuple[str, str] | None:
    """(frame, key) of ``frame.groupby(key)[...].agg()``: one aggregate call, the last."""
    if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
        return None
    if node.func.attr not in _AGGREGATES:
        return None
    inner: ast.expr = node.func.value
    while True:  # down to the groupby, through column picks (a call ends the walk)
        if isinstance(inner, ast.Subscript | ast.Attribute):
            inner = inner.value
            continue
        break
    if not (
        isinstance(inner, ast.Call)
        and isinstance(inner.func, ast.Attribute)
        and inner.func.attr == "groupby"
        and isinstance(inner.func.value, ast.Name)
        and inner.args
    ):
        return None
    return inner.func.value.id, ast.unparse(inner.args[0])
