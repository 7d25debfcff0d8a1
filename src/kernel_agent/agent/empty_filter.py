"""A condition of the cell's filter that no row meets, found in the kernel and told with
what the column holds.

Asked "on how many days in 1965 ...", the bundled model filtered ``df['Yr'] == 1965`` on a
column of two-digit years and printed 0; asked for North America's countries, it compared
a column where pandas had read ``'NA'`` as missing; a correlation came out ``nan`` where a
filter had left nothing. The printed result looks like an answer, and the model states it.
The mistake is never in the result but in one condition, and only the kernel can tell
which: so each condition the cell's code compares a column with a literal on
(``==``/``<``/``in``..., ``isin``, ``between``, ``str.contains``...) is evaluated again
after the cell, and one that holds for none of the rows, in a cell that printed an empty
or zero result, gets one note: the condition, the rows, and what the column holds (its
range, or its most common values and those spelt like the literal). One property, whatever
the value, the column or the statistic.

The conditions are named by the model's code and sent back as ``user_expressions`` only
when they read without side effects (:func:`~.code_text.reads_only`), at most
:data:`_CONDITIONS` a cell. What comes back is the kernel's, hostile: bounded before it is
parsed, and read into :class:`NoRow` only when every field has the shape asked.
"""

from __future__ import annotations

import ast
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, TypeGuard

from ..kernel_state.expressions import expression_json, kernel_call
from ..llm.view import render_cell
from ..results import CellResult
from .code_text import parse_python, reads_only, rewritten

__all__ = ["NoRow", "empty_filter", "filter_probe"]

_KEY = "empty_filter_"  # user_expressions keys: empty_filter_0, empty_filter_1, ...
_CONDITIONS = 3  # conditions sent back a cell
_EXPR_CHARS = 300  # the longest condition or column expression sent back
_ANSWER_CHARS = 4_000  # the longest answer read back
_VALUES = 8  # the most common values told
_VALUE_CHARS = 40  # the longest value told
_MOST = 10**12  # no more rows than this
#: methods that test each value against their arguments (the receiver is the column)
_TESTS = frozenset({"isin", "between", "eq", "ne", "lt", "le", "gt", "ge"})
#: ``.str`` methods that do (the column is the ``.str``'s receiver)
_TEXT_TESTS = frozenset({"contains", "startswith", "endswith", "match", "fullmatch"})
#: an output line that ends in no value or a zero: ``0``, ``0.0``, ``nan``, ``[0]``...
_EMPTY_LINE = re.compile(
    r"(?:^|[\s\[(:=,])(?:0(?:\.0+)?|-?nan|NaN|None|NaT|<NA>|\[\])[\])]?\s*$"
    r"|Empty DataFrame|Series\(\[\]|^\s*\[\]\s*$",
    re.M,
)

#: the kernel's side: whether the condition holds anywhere, and if not what the column holds
_FILTER_SOURCE = """
def result(mask, column, literals, retest):
    import numpy as np
    import pandas as pd
    if isinstance(mask, pd.DataFrame) or not isinstance(mask, (pd.Series, np.ndarray)):
        return None
    m = np.asarray(mask)
    if m.dtype != bool or m.ndim != 1:
        return None
    n, hits = int(m.size), int(m.sum())
    if hits or not n:
        return {"n": n, "hits": hits}
    if isinstance(column, pd.DataFrame) or not isinstance(column, (pd.Series, np.ndarray)):
        return None
    s = pd.Series(np.asarray(column).ravel()) if isinstance(column, np.ndarray) else column
    found = {"n": n, "hits": 0, "missing": int(s.isna().sum())}
    s = s.dropna()
    if not len(s):
        return dict(found, kind="empty")
    def meets(value):
        try:
            again = np.asarray(retest(value))
        except Exception:
            return False
        return again.dtype == bool and again.shape == m.shape and bool(again.any())

    x = literals[0] if retest is not None and len(literals) == 1 else None
    if s.dtype.kind in "iuf":
        found = dict(found, kind="number", low=float(s.min()), high=float(s.max()))
        # days or months (every one of 1..12 held, none above 31) are no two-digit years
        held = set(s[s == s.round()].astype(int)) if bool((s == s.round()).all()) else set()
        days = set(range(1, 13)) <= held <= set(range(1, 32))
        if isinstance(x, int) and 1900 <= x < 2100 and not days and meets(x % 100):
            found["instead"] = x % 100  # a two-digit year
        return found
    if s.dtype.kind in "mM":
        return dict(found, kind="date", low=str(s.min())[:40], high=str(s.max())[:40])
    counts = s.astype(str).value_counts()
    words = [str(w).strip().lower() for w in literals if isinstance(w, str) and w.strip()]
    near = [v for v in counts.index[:5000]
            if any(w in v.lower() or v.strip().lower() in w for w in words if v.strip())]
    found = dict(found, kind="text", distinct=int(len(counts)),
                 values=[v[:40] for v in counts.index[:8]], near=[v[:40] for v in near[:3]])
    if isinstance(x, str):
        spelt = [v for v in near if v.strip().lower() == x.strip().lower()]
        if len(spelt) == 1 and len(spelt[0]) <= 40 and meets(spelt[0]):
            found["instead"] = spelt[0]  # the same word, in another case or with spaces
    return found
"""


Literal = int | float | str


@dataclass(frozen=True)
class Condition:
    """A test of a column against literals in the model's code: its text, the column's,
    the literals, and (with one literal) the test as a function of that literal, which
    the kernel calls with the data's spelling of the value."""

    test: str
    column: str
    literals: tuple[Literal, ...]
    retest: str | None

    def probe(self) -> str:
        arguments = f"({self.test}), ({self.column}), {self.literals!r}, {self.retest or 'None'}"
        return kernel_call(_FILTER_SOURCE, arguments)


@dataclass(frozen=True)
class NoRow:
    """A condition no row meets: its code, the rows it was tested on, what the column holds
    (in words), and the condition with the value as the data writes it, when the kernel
    found one rows meet."""

    condition: str
    column: str
    rows: int
    holds: str
    instead: str | None = None
    #: ``instead`` compares the column's dates in ISO form (:mod:`.dated_filter`), written
    #: on the host from the preview's format: not tested in the kernel
    dated: bool = False

    def note(self) -> str:
        head = (
            f"Note: no row meets `{self.condition}` (0 of {self.rows:,} rows), so what this "
            f"cell printed is computed from nothing. `{self.column}` holds {self.holds}. "
        )
        if self.instead and self.dated:
            return head + (
                "Its dates are written in another form than the value asked. Compared as "
                f"dates in the form asked: `{self.instead}`. Run the cell again with that "
                "condition."
            )
        if self.instead:
            return head + (
                f"Rows do meet `{self.instead}`: the data writes the value so. Run the cell "
                "again with that condition."
            )
        return head + (
            "If the task's value is written another way in the data (another case or "
            "spelling, a code, a unit, a two-digit year, a number stored as text), filter on "
            "the data's form and run the cell again; if the task really asks about rows "
            "that do not exist, say so."
        )


def filter_probe(code: str) -> dict[str, str]:
    """``user_expressions`` that test each condition of ``code`` again, after the cell."""
    return {f"{_KEY}{i}": c.probe() for i, c in enumerate(_conditions(code))}


def empty_filter(cell: CellResult) -> NoRow | None:
    """The first condition of ``cell`` that the kernel found no row meets, when the cell
    printed an empty or zero result; else None."""
    if not cell.ok or not _EMPTY_LINE.search(render_cell(cell, budget=4000).text):
        return None
    for i, condition in enumerate(_conditions(cell.code)):
        answer = expression_json(cell.user_expressions.get(f"{_KEY}{i}"), _ANSWER_CHARS)
        if (found := _no_row(condition, answer)) is not None:
            return found
    return None


def refiltered(code: str, instead: Mapping[str, str]) -> str | None:
    """``code`` with each condition ``instead`` names (by its text) written as it says:
    the model sent again a condition the kernel found no row meets, where rows meet the
    value as the data writes it. None when ``code`` has none of them."""
    tree = parse_python(code)
    if tree is None or not instead:
        return None
    return rewritten(
        code,
        tree,
        lambda node: (
            instead.get(ast.unparse(node)) if isinstance(node, ast.Compare | ast.Call) else None
        ),
    )


# ------------------------------------------------------------------ the conditions
def _conditions(code: str) -> list[Condition]:
    """Each test of a column against literals in ``code`` that reads only, in order, at
    most :data:`_CONDITIONS`."""
    tree = parse_python(code)
    if tree is None:
        return []
    found: dict[str, Condition] = {}
    for node in ast.walk(tree):
        split = _split(node)
        if split is None or not reads_only(split[0]):
            continue  # the test itself and its literals only read
        column, literals = split
        test, column_text = ast.unparse(node), ast.unparse(column)
        if len(test) <= _EXPR_CHARS and len(column_text) <= _EXPR_CHARS:
            found.setdefault(test, Condition(test, column_text, literals, _retest(node)))
    return list(found.values())[:_CONDITIONS]


def _retest(node: ast.AST) -> str | None:
    """``lambda _ka_v: <node with its one literal replaced by _ka_v>``, for a comparison
    of a column with one literal (the sign kept out: ``-5`` is not retested); else None."""
    if not isinstance(node, ast.Compare):
        return None
    sides = [node.left, node.comparators[0]]
    at = [i for i, side in enumerate(sides) if _one_literal(side)]
    if len(at) != 1:
        return None
    sides[at[0]] = ast.Name("_ka_v", ast.Load())
    again = ast.Compare(sides[0], node.ops, [sides[1]])
    return f"(lambda _ka_v: ({ast.unparse(again)}))"


def _one_literal(node: ast.expr) -> bool:
    return isinstance(node, ast.Constant) and type(node.value) in (int, float, str)


def _split(node: ast.AST) -> tuple[ast.expr, tuple[Literal, ...]] | None:
    """The column ``node`` tests and the literals it tests it against, when ``node`` is a
    test of one column against literals only; else None."""
    if isinstance(node, ast.Compare) and len(node.ops) == 1:
        left, right = node.left, node.comparators[0]
        for column, other in ((left, right), (right, left)):
            if _column(column) and (literals := _literals(other)) is not None:
                return column, literals
        return None
    if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)) or node.keywords:
        return None
    receiver, name = node.func.value, node.func.attr
    if name in _TEXT_TESTS and isinstance(receiver, ast.Attribute) and receiver.attr == "str":
        receiver = receiver.value
    elif name not in _TESTS:
        return None
    args = [_literals(a) for a in node.args]
    if not _column(receiver) or not args or any(a is None for a in args):
        return None
    return receiver, tuple(t for a in args if a is not None for t in a)


def _column(node: ast.expr) -> bool:
    """A column, a series read from one or a name (``df['Yr']``, ``df.Yr``,
    ``df['a'].str.lower()``, ``years``); the kernel skips what is no series."""
    return isinstance(node, ast.Subscript | ast.Attribute | ast.Call | ast.Name)


def _literals(node: ast.expr) -> tuple[Literal, ...] | None:
    """The values of a literal (a number, a text, a date string, or a list of them), or
    None when ``node`` is not one."""
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        inner = _literals(node.operand)
        return None if inner is None else tuple(-v for v in inner if not isinstance(v, str))
    if isinstance(node, ast.Constant) and isinstance(node.value, int | float | str):
        return () if isinstance(node.value, bool) else (node.value,)
    if isinstance(node, ast.List | ast.Tuple | ast.Set) and 0 < len(node.elts) <= 50:
        parts = [_literals(e) for e in node.elts]
        if any(p is None for p in parts):
            return None
        return tuple(t for p in parts if p is not None for t in p)
    return None


# ------------------------------------------------------------------ the kernel's answer
def _no_row(condition: Condition, answer: Any) -> NoRow | None:
    """The kernel's answer for ``condition`` as a :class:`NoRow`, when it says no row meets
    it and every field has the shape asked; else None."""
    if not isinstance(answer, Mapping) or answer.get("hits") != 0:
        return None
    test, column = condition.test, condition.column
    rows, missing, kind = answer.get("n"), answer.get("missing"), answer.get("kind")
    if not (_count(rows) and rows > 0 and _count(missing) and missing <= rows):
        return None
    gaps = f", and {missing:,} missing values" if missing else ""
    if kind == "empty":
        return NoRow(test, column, rows, "no value at all: every one is missing")
    if kind == "number":
        low, high = answer.get("low"), answer.get("high")
        if not (_finite(low) and _finite(high)):
            return None
        holds = f"numbers from {_number(low)} to {_number(high)}{gaps}"
        return NoRow(test, column, rows, holds, _instead(condition, answer.get("instead")))
    if kind == "date":
        low, high = answer.get("low"), answer.get("high")
        if not (_text(low) and _text(high)):
            return None
        return NoRow(test, column, rows, f"dates from {low} to {high}{gaps}")
    values, near, distinct = answer.get("values"), answer.get("near"), answer.get("distinct")
    if kind != "text" or not (_count(distinct) and _texts(values) and _texts(near)):
        return None
    shown = ", ".join(repr(v) for v in values[:_VALUES])
    more = f" ({distinct:,} distinct)" if distinct > len(values) else ""
    holds = f"the values {shown}{more}{gaps}"
    if near:
        holds += "; spelt like the value asked: " + ", ".join(repr(v) for v in near)
    return NoRow(test, column, rows, holds, _instead(condition, answer.get("instead")))


def _instead(condition: Condition, value: Any) -> str | None:
    """``condition`` with its one literal written as the kernel found the data writes it,
    when the kernel's value is one the host would have tried itself: the two-digit form
    of a year, or the same text in another case or with spaces around it."""
    if condition.retest is None or len(condition.literals) != 1:
        return None
    (asked,) = condition.literals
    if isinstance(asked, int) and not isinstance(value, bool) and 1900 <= asked < 2100:
        ok = isinstance(value, int) and value == asked % 100
    elif isinstance(asked, str) and _text(value):
        ok = value != asked and value.strip().lower() == asked.strip().lower()
    else:
        ok = False
    if not ok:
        return None
    node = ast.parse(condition.test, mode="eval").body
    assert isinstance(node, ast.Compare)
    if _one_literal(node.left):
        node.left = ast.Constant(value)
    else:
        node.comparators = [ast.Constant(value)]
    return ast.unparse(node)


def _count(value: Any) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= _MOST


def _finite(value: Any) -> TypeGuard[float]:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def _text(value: Any) -> TypeGuard[str]:
    return isinstance(value, str) and len(value) <= _VALUE_CHARS


def _texts(values: Any) -> TypeGuard[list[str]]:
    return isinstance(values, list) and len(values) <= _VALUES and all(map(_text, values))


def _number(value: float) -> str:
    return str(int(value)) if value == int(value) and abs(value) < 1e15 else f"{value:.6g}"
