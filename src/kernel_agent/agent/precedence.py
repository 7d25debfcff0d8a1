"""Conditions combined the way Python does not read them: ``a & b < c``, ``and`` on masks.

``&`` and ``|`` bind tighter than a comparison, so ``m & s < f`` is ``(m & s) < f`` (it
runs, and the mask is another one: a count of every row, on scratch data on
2026-12-03), and ``s > 1 & s < 3`` is the chained ``s > (1 & s) < 3`` (pandas stops it:
"The truth value of a Series is ambiguous"). ``and``/``or`` between two masks stops the
same way. Each is read from the code's ``ast`` and given back as written, as Python
reads it, and as meant, so a note or a hint can quote the fix. Pure.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from typing import TypeGuard

from .code_text import parse_python

__all__ = ["Slip", "is_comparison", "precedence_slip"]

_BITWISE = (ast.BitAnd, ast.BitOr, ast.BitXor)
_ORDER = (ast.Lt, ast.LtE, ast.Gt, ast.GtE, ast.Eq, ast.NotEq)
_SHOWN = 100  # characters of the model's code quoted back, each form


@dataclass(frozen=True)
class Slip:
    """One condition: ``written`` (the code), ``read`` (what Python does), ``meant``."""

    written: str
    #: None for ``and``/``or``, which ask one True/False of each whole mask
    read: str | None
    meant: str

    def sentence(self) -> str:
        if self.read is None:
            return (
                f"`{self.written}` asks one True/False of each whole mask, which pandas "
                f"refuses: combine masks with `&` and `|`, each in parentheses: `{self.meant}`."
            )
        return (
            f"Python reads `{self.written}` as `{self.read}` (`&` and `|` bind tighter than "
            f"a comparison): write `{self.meant}`."
        )


def precedence_slip(code: str) -> Slip | None:
    """The first condition of ``code`` combined against Python's precedence, or None.

    On plain numbers ``x & 1 == 0`` means what it says: the caller holds the evidence
    that a mask is involved (an "ambiguous" error, a count of every row)."""
    tree = parse_python(code)
    if tree is None:
        return None
    for node in ast.walk(tree):
        if is_comparison(node):
            slip = _compare(node)
        elif isinstance(node, ast.BoolOp) and all(is_comparison(v) for v in node.values):
            slip = _boolean(node)
        else:
            continue
        if slip is not None:
            return slip
    return None


def _compare(node: ast.Compare) -> Slip | None:
    operands = [node.left, *node.comparators]
    if len(node.ops) == 1:
        left, right = operands
        if _bitwise(left):
            assert isinstance(left, ast.BinOp)
            meant: ast.expr = ast.BinOp(left.left, left.op, _cmp(left.right, node.ops[0], right))
            read = f"({_code(left)}) {_op(node.ops[0])} {_code(right)}"
        elif _bitwise(right):
            assert isinstance(right, ast.BinOp)
            meant = ast.BinOp(_cmp(left, node.ops[0], right.left), right.op, right.right)
            read = f"{_code(left)} {_op(node.ops[0])} ({_code(right)})"
        else:
            return None
        return _slip(node, read, meant)
    # chained: a > b & c < d is a > (b & c) < d; meant (a > b) & (c < d)
    if len(node.ops) == 2 and _bitwise(operands[1]):
        middle = operands[1]
        assert isinstance(middle, ast.BinOp)
        meant = ast.BinOp(
            _cmp(operands[0], node.ops[0], middle.left),
            middle.op,
            _cmp(middle.right, node.ops[1], operands[2]),
        )
        read = (
            f"{_code(operands[0])} {_op(node.ops[0])} ({_code(middle)}) "
            f"{_op(node.ops[1])} {_code(operands[2])}"
        )
        return _slip(node, read, meant)
    return None


def _boolean(node: ast.BoolOp) -> Slip:
    op: ast.operator = ast.BitAnd() if isinstance(node.op, ast.And) else ast.BitOr()
    meant = node.values[0]
    for value in node.values[1:]:
        meant = ast.BinOp(meant, op, value)
    return _slip(node, None, meant)


def is_comparison(node: ast.AST) -> TypeGuard[ast.Compare]:
    """An order or equality comparison (``<``, ``==``... chained too; not ``in``, ``is``)."""
    return isinstance(node, ast.Compare) and all(isinstance(op, _ORDER) for op in node.ops)


def _bitwise(node: ast.expr) -> bool:
    return isinstance(node, ast.BinOp) and isinstance(node.op, _BITWISE)


def _cmp(left: ast.expr, op: ast.cmpop, right: ast.expr) -> ast.Compare:
    return ast.Compare(left, [op], [right])


def _op(op: ast.cmpop) -> str:
    return _code(ast.Compare(ast.Name("a"), [op], [ast.Name("b")]))[2:-2]


def _slip(node: ast.expr, read: str | None, meant: ast.expr) -> Slip:
    return Slip(_short(_code(node)), None if read is None else _short(read), _short(_code(meant)))


def _code(node: ast.AST) -> str:
    return ast.unparse(ast.fix_missing_locations(node))


def _short(text: str) -> str:
    return text if len(text) <= _SHOWN else text[: _SHOWN - 3] + "..."
