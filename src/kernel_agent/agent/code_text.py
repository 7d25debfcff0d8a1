"""What a cell's code says, read without running it: the helpers the levers share.

Pure functions of the code's text: :func:`normalize_code` (two cells that differ only in
blank lines are one), :func:`parse_python` (the ast, or None), :func:`typed_values_only`
(a cell that only prints constants computed nothing), :func:`reads_only` (an expression
that can be evaluated again without changing anything), :func:`converted_columns` (the
columns a cell converts from text itself), :func:`column_frame` (the frame a column is
read from) and :func:`rewritten` (the code with some one-line expressions written anew).
"""

from __future__ import annotations

import ast
from collections.abc import Callable

__all__ = [
    "called_name",
    "column_frame",
    "converted_columns",
    "frame_column",
    "normalize_code",
    "parse_python",
    "reads_only",
    "rewritten",
    "typed_values_only",
]


def normalize_code(code: str) -> str:
    """The code without blank lines and trailing blanks: two cells that differ only so are one."""
    return "\n".join(line.rstrip() for line in code.strip().splitlines() if line.strip())


def parse_python(code: str) -> ast.Module | None:
    """The model's code as an ast, or None when it is not Python (or too deep to parse)."""
    try:
        return ast.parse(code)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None


#: calls that only re-type a constant: ``str(0)``, ``round(4.25, 1)``
_RETYPING = frozenset({"str", "int", "float", "round", "format", "repr", "bool"})


def typed_values_only(code: str) -> bool:
    """The cell is nothing but ``print`` calls of values built from constants alone (a
    literal, an f-string of literals, ``'@days[' + str(0) + ']'``): it reads no name,
    computes nothing from the data, and what it prints was typed, not found (comments
    and blank lines aside)."""
    tree = parse_python(code)
    if tree is None or not tree.body:
        return False
    for statement in tree.body:
        call = statement.value if isinstance(statement, ast.Expr) else None
        if not (
            isinstance(call, ast.Call)
            and isinstance(call.func, ast.Name)
            and call.func.id == "print"
            and all(_constant_built(a) for a in (*call.args, *(k.value for k in call.keywords)))
        ):
            return False
    return True


def _constant_built(node: ast.expr) -> bool:
    """Made of constants only: no name read, no attribute, no subscript, no arithmetic
    (``365 + 1`` computes from the task's numbers), no call but a re-typing of constants;
    text joined with ``+`` is typed."""
    retyping = {
        id(sub.func)
        for sub in ast.walk(node)
        if isinstance(sub, ast.Call) and isinstance(sub.func, ast.Name) and sub.func.id in _RETYPING
    }
    return not any(
        isinstance(sub, ast.Attribute | ast.Subscript | ast.Starred)
        or (isinstance(sub, ast.Name) and id(sub) not in retyping)
        or (isinstance(sub, ast.BinOp) and not _joins_text(sub))
        for sub in ast.walk(node)
    )


def _joins_text(node: ast.BinOp) -> bool:
    """``'@days[' + str(0) + ']'``: a ``+`` with text on one side."""

    def text(side: ast.expr) -> bool:
        return (
            (isinstance(side, ast.Constant) and isinstance(side.value, str))
            or isinstance(side, ast.JoinedStr)
            or (
                isinstance(side, ast.Call)
                and isinstance(side.func, ast.Name)
                and side.func.id == "str"
            )
            or (isinstance(side, ast.BinOp) and _joins_text(side))
        )

    return isinstance(node.op, ast.Add) and (text(node.left) or text(node.right))


#: methods that read without changing what they read
_PURE_CALLS = frozenset(
    {
        "dropna", "astype", "abs", "isna", "notna", "isnull", "notnull", "isin", "between",
        "startswith", "endswith", "contains", "strip", "lower", "upper", "to_numeric",
        "fillna", "copy", "squeeze", "eq", "ne", "lt", "le", "gt", "ge",
    }
)  # fmt: skip
_PURE_NODES = (
    ast.Name, ast.Attribute, ast.Subscript, ast.Constant, ast.Slice, ast.Compare, ast.BoolOp,
    ast.BinOp, ast.UnaryOp, ast.Tuple, ast.List, ast.Call, ast.keyword, ast.expr_context,
    ast.boolop, ast.operator, ast.unaryop, ast.cmpop,
)  # fmt: skip


def reads_only(node: ast.AST) -> bool:
    """Whether evaluating ``node`` again (as a ``user_expression``, after its cell) reads
    only: no call but the pure methods above, no private name or attribute, a name, column
    or call at its heart."""
    for n in ast.walk(node):
        if not isinstance(n, _PURE_NODES):
            return False
        if isinstance(n, ast.Attribute) and n.attr.startswith("_"):
            return False
        if isinstance(n, ast.Name) and n.id.startswith("_"):
            return False
        if isinstance(n, ast.Call) and not (
            isinstance(n.func, ast.Attribute) and n.func.attr in _PURE_CALLS
        ):
            return False
    return isinstance(node, ast.Name | ast.Attribute | ast.Subscript | ast.Call)


#: calls that convert a column's text (its own way)
_CONVERSIONS = frozenset(
    {"to_numeric", "astype", "replace", "extract", "strip", "rstrip", "lstrip", "split",
     "apply", "map", "to_datetime", "float", "int"}
)  # fmt: skip


def called_name(call: ast.Call) -> str:
    """The name of the function or method a call calls ("" for another callee)."""
    func = call.func
    return func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")


def converted_columns(tree: ast.Module) -> set[str]:
    """The columns ``tree`` converts itself: those written to from a conversion
    (``df['x'] = df['x'].str.rstrip(' L').astype(float)``) and those a conversion reads
    (``pd.to_numeric(df['x'])``)."""

    def converts(node: ast.AST) -> bool:
        return any(
            isinstance(n, ast.Call) and called_name(n) in _CONVERSIONS for n in ast.walk(node)
        )

    def columns(node: ast.AST) -> set[str]:
        return {
            n.slice.value
            for n in ast.walk(node)
            if isinstance(n, ast.Subscript)
            and isinstance(n.slice, ast.Constant)
            and isinstance(n.slice.value, str)
        }

    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and converts(node.value):
            for target in node.targets:
                found |= columns(target)
        elif isinstance(node, ast.Call) and called_name(node) in _CONVERSIONS:
            found |= columns(node)
    return found


def column_frame(node: ast.expr) -> str | None:
    """``X`` of a column ``X['a']`` or ``X.a`` of a named frame; else None."""
    found = frame_column(node)
    return found[0] if found else None


def frame_column(node: ast.expr) -> tuple[str, str] | None:
    """``(X, 'a')`` of a column ``X['a']`` or ``X.a`` of a named frame; else None."""
    if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name):
        key = node.slice
        if isinstance(key, ast.Constant) and isinstance(key.value, str):
            return node.value.id, key.value
        return None
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
        return node.value.id, node.attr
    return None


def rewritten(code: str, tree: ast.Module, anew: Callable[[ast.AST], str | None]) -> str | None:
    """``code`` with each expression of ``tree`` (its parse) that ``anew`` gives a text for,
    and that stands on one line, replaced by that text; None when there is none."""
    lines = code.splitlines(keepends=True)
    spans = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.expr) or node.lineno != node.end_lineno:
            continue
        if node.end_col_offset is not None and (new := anew(node)) is not None:
            spans.append((node.lineno - 1, node.col_offset, node.end_col_offset, new))
    if not spans:
        return None
    for row, start, end, new in sorted(spans, reverse=True):  # right to left: offsets hold
        line = lines[row].encode()
        lines[row] = (line[:start] + new.encode() + line[end:]).decode()
    return "".join(lines)
