"""Pandas pitfalls in a cell that worked: a printed value that is not what it looks like.

Mistakes a small model makes in code that runs, prints and looks done:

- **a row number for a key**: ``df['murder'].idxmax()`` on a frame read from a CSV is a
  label of its index, and that index is the row numbers 0, 1, 2...; asked which state, the
  model prints ``@state[8]``. On the eval's transcripts of 2026-11-25 this was the
  commonest wrong answer after a cell that worked (4 tasks over three halves: a state,
  a year twice, a month).
- **all rows for a count**: ``len(mask)`` (or ``mask.count()``) of a True/False series
  counts every row, not the True ones (engel-iqr: 235 "outliers" of 235 households);
- **a fraction for a percentage**: asked what percentage of passengers survived, the
  model prints ``@rate[0.45]`` (only for a share; a "percentage change" may be small);
- **another statistic than the one named**: Spearman for Pearson (the idiom in the
  system prompt shows ``method='spearman'``), Pearson for Spearman, a t-test with equal
  variances for Welch's; asked which group has the largest mean, the model takes each
  group's ``max()`` (``groupby('Island')[x].max()``: 231 mm, the longest flipper, for the
  mean) and never computes a mean;
- **normality read backwards**: ``print(f"@normal[{p < 0.05}]")`` after a Shapiro-Wilk
  test prints True when the test rejects normality;
- **an edge in the wrong bin**: ``pd.cut(age, [0, 18, 60, inf])`` puts 18 with the children
  (bins hold their right edge) where the task says "under 18";
- **many values in a slot that asks one**: asked Coderre's share of all votes, the model
  printed ``@coderre_share[{share}]`` where ``share`` was a Series of each district's share
  (58 lines of it), and answered with the lot (the messy tuned half, 2026-12-02).

The ``pandas_pitfalls`` lever (:mod:`.levers.pandas_pitfalls`) notes one under the cell's
output, and an answer composed from that cell waits for the model to read the note. The
first two are read from the cell's code (``ast``) and the namespace the kernel reported
after it, and fire only when the value
is shown (printed, formatted, or kept in a name that is), not when it only selects rows
(``df.loc[s.idxmax(), 'state']`` is what the first note asks for).
"""

from __future__ import annotations

import ast
import copy
import re
from collections.abc import Sequence

from ..kernel_state.namespace import VariableInfo
from ..llm.view import render_cell
from ..results import CellResult
from .answers import FormatSpec
from .code_text import parse_python
from .composed import printed_values
from .slots import FILLED

__all__ = [
    "GROUPED",
    "STATISTIC",
    "all_rows_counts",
    "assigned_by",
    "asked_column",
    "cut_edges",
    "fraction_for_percentage",
    "group_statistic_mismatch",
    "method_mismatch",
    "normality_reversed",
    "row_label_calls",
    "shown_names",
    "slot_holds_many",
]

_LABEL_CALLS = ("idxmax", "idxmin")
_LOOKUPS = ("loc", "at", "iloc", "iat")


def _root(node: ast.expr) -> ast.Name | None:
    """The variable a receiver selects from: ``v``, ``v['c']``, ``v.c``, ``v[['c']]``."""
    while True:
        if isinstance(node, ast.Name):
            return node
        if isinstance(node, ast.Attribute) and node.attr not in _LOOKUPS:
            node = node.value
        elif isinstance(node, ast.Subscript) and isinstance(node.slice, (ast.Constant, ast.List)):
            node = node.value
        else:
            return None


def _parse(code: str) -> tuple[ast.Module, dict[ast.AST, ast.AST]] | None:
    tree = parse_python(code)
    if tree is None:
        return None
    parents = {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}
    return tree, parents


def _looks_up(node: ast.AST, parents: dict[ast.AST, ast.AST]) -> bool:
    """True when ``node`` sits in the brackets of a subscript (it selects, it is not shown)."""
    child, parent = node, parents.get(node)
    while parent is not None and not isinstance(parent, ast.stmt):
        if isinstance(parent, ast.Subscript) and child is parent.slice:
            return True
        child, parent = parent, parents.get(parent)
    return False


def _kept_in(node: ast.AST, parents: dict[ast.AST, ast.AST]) -> set[str] | None:
    """The names the statement holding ``node`` assigns (None: it assigns nothing)."""
    statement: ast.AST | None = node
    while statement is not None and not isinstance(statement, ast.stmt):
        statement = parents.get(statement)
    if not isinstance(statement, (ast.Assign, ast.AnnAssign)):
        return None
    targets = statement.targets if isinstance(statement, ast.Assign) else [statement.target]
    return {t.id for t in targets if isinstance(t, ast.Name)}


def _uses(tree: ast.AST, parents: dict[ast.AST, ast.AST], names: set[str]) -> list[str]:
    """Those of ``names`` the code reads other than to select (in a subscript's brackets)."""
    return sorted(
        {
            node.id
            for node in ast.walk(tree)
            if isinstance(node, ast.Name)
            and isinstance(node.ctx, ast.Load)
            and node.id in names
            and not _looks_up(node, parents)
        }
    )


def _shown(node: ast.AST, tree: ast.AST, parents: dict[ast.AST, ast.AST]) -> bool:
    """The value reaches an output: used in place, or kept in names used so."""
    kept = _kept_in(node, parents)
    return kept is None or bool(_uses(tree, parents, kept))


def row_label_calls(
    code: str, namespace: dict[str, VariableInfo]
) -> list[tuple[str, str, set[str]]]:
    """``(call, variable, names)`` for each ``idxmax()``/``idxmin()`` whose row-number
    result the cell shows; ``variable`` has the row-number index, ``names`` keep the
    result."""
    parsed = _parse(code)
    if parsed is None:
        return []
    tree, parents = parsed
    found: list[tuple[str, str, set[str]]] = []
    for node in ast.walk(tree):
        if not (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in _LABEL_CALLS
            and not node.args
        ):
            continue
        root = _root(node.func.value)
        info = namespace.get(root.id) if root is not None else None
        if info is None or not info.row_numbers or _looks_up(node, parents):
            continue
        if _shown(node, tree, parents):
            found.append((ast.unparse(node), info.name, _kept_in(node, parents) or set()))
    return found


def shown_names(code: str, names: set[str]) -> list[str]:
    """Those of ``names`` (kept noted values) that ``code`` shows and does not assign anew."""
    parsed = _parse(code) if names else None
    if parsed is None:
        return []
    tree, parents = parsed
    assigned = {
        n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and not isinstance(n.ctx, ast.Load)
    }
    return _uses(tree, parents, names - assigned)


def all_rows_counts(
    code: str, namespace: dict[str, VariableInfo]
) -> list[tuple[str, str, set[str]]]:
    """``(call, mask, names)`` for each shown ``len(mask)`` / ``mask.count()`` of a bool
    series; ``names`` keep the count."""
    parsed = _parse(code)
    if parsed is None:
        return []
    tree, parents = parsed
    found: list[tuple[str, str, set[str]]] = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call) or node.keywords:
            continue
        if isinstance(node.func, ast.Name) and node.func.id == "len" and len(node.args) == 1:
            target = node.args[0]
        elif isinstance(node.func, ast.Attribute) and node.func.attr == "count" and not node.args:
            target = node.func.value
        else:
            continue
        if not isinstance(target, ast.Name):
            continue
        info = namespace.get(target.id)
        if info is None or info.type != "Series" or info.dtype != "bool":
            continue
        if _shown(node, tree, parents):
            found.append((ast.unparse(node), target.id, _kept_in(node, parents) or set()))
    return found


def fraction_for_percentage(task: str, cell: CellResult) -> tuple[str, str] | None:
    """``(slot, value)``: a task asking what percentage (a share) printed a fraction of 1
    in an asked ``@slot[value]``, or on a line labelled as a percentage."""
    if not _SHARE_ASKED.search(task) or _NOT_A_SHARE.search(task):
        return None
    slots = set(FormatSpec.of(task).slots)
    for name, values in printed_values(render_cell(cell, budget=4000).text).items():
        if name not in slots and "percent" not in name:
            continue
        for value in values:
            try:
                number = float(value.strip().rstrip("%"))
            except ValueError:
                continue
            if 0 < number < 1 and not value.strip().endswith("%"):
                return name, value.strip()
    return None


_PERIOD_ASKED = re.compile(r"\b(?:which|what|in which)\s+(?:\w+\s+)?(year|month)\b", re.I)
_FULL_DATE = re.compile(r"\b\d{4}-\d{2}-\d{2}(?:[ T]\d{2}:\d{2}:\d{2})?\b")


def date_for_period(task: str, cell: CellResult) -> tuple[str, str] | None:
    """``(period, date)``: a task asking which year (or month) whose cell grouped rows and
    printed a full date, with no year or month taken in its code: a group of each day
    (the scratch TMDB run, 2026-12-07, grouped by release_date and answered the year of
    the busiest day)."""
    asked = _PERIOD_ASKED.search(task)
    if asked is None or not GROUPED.search(cell.code) and "value_counts" not in cell.code:
        return None
    period = asked.group(1).lower()
    if re.search(rf"\b{period}\b|\.dt\.|to_period|resample|Grouper", cell.code, re.I):
        return None
    printed = _FULL_DATE.search(render_cell(cell, budget=4000).text)
    return (period, printed.group(0)) if printed else None


def slot_holds_many(task: str, cell: CellResult) -> tuple[str, int, str] | None:
    """``(slot, count, what)``: an asked ``@slot[...]`` that wants one value (not a list)
    printed with many in it, a pandas Series or DataFrame over lines, or an array."""
    placeholders = dict(FILLED.findall(task))
    text = render_cell(cell, budget=4000).text
    for slot in FormatSpec.of(task).slots:
        if _MANY_ASKED.search(placeholders.get(slot, "")):
            continue
        for found in re.finditer(rf"@{re.escape(slot)}\[", text):
            inside = text[found.end() :].split("]", 1)[0].strip("[ \n")
            lines = [ln for ln in inside.splitlines() if ln.strip(" .")]
            meta = [ln for ln in lines if _REPR_FOOTER.match(ln)]
            if len(lines) - len(meta) > 1:
                what = "a pandas Series" if any("dtype" in ln for ln in meta) else "a table"
                told = [int(m[1] or m[2]) for ln in meta if (m := _REPR_LENGTH.search(ln))]
                return slot, told[0] if told else len(lines) - len(meta), what
            words = re.split(r",?\s+", inside.strip(" ,"))  # 1 2 3, or 1, 2, 3 (not 1,234)
            if len(words) > 1 and all(_A_NUMBER.fullmatch(w) for w in words):
                return slot, len(words), "an array"
    return None


#: a task that asks for one total, mean or count over the rows
_ONE_ASKED = re.compile(
    r"\b(?:what is|what was|compute|calculate|find)\b.*\b(?:total|sum|mean|average|overall)\b",
    re.I | re.S,
)
#: ... unless it asks one per group or row
_PER_ASKED = re.compile(r"\b(?:per|each|every|by|for all|group\w*|list|which)\b", re.I)


def rows_for_one_value(task: str, cell: CellResult) -> int | None:
    """The length of a row-wise pandas Series (20 values or more, cut in the middle) that
    a cell printed where a task with no slots asks for one total or mean: the scratch
    sales run printed ``df['Quantity Ordered'] * df['Price Each'].sum()``, 405 values, and
    answered the first of them as "the total revenue"."""
    if FormatSpec.of(task).slots or not _ONE_ASKED.search(task) or _PER_ASKED.search(task):
        return None
    text = render_cell(cell, budget=4000).text
    lengths = [int(m.group(1)) for m in re.finditer(r"Length: (\d{1,9}), dtype: \w+", text)]
    rows = 0  # a Series shown whole: its numbered rows above a "dtype:" footer
    for line in text.splitlines():
        if re.fullmatch(r"(?:.*?:\s*)?\d+\s+[-+\d.e]+\s*", line):
            rows += 1
        elif re.search(r"\bdtype: \w+\s*$", line):
            lengths.append(rows)
            rows = 0
        elif line.strip():
            rows = 0
    return next((n for n in lengths if n >= 20), None)


#: a slot that asks several values (a list, names, pairs): many in it are no mistake
_MANY_ASKED = re.compile(r"\blist|comma|separated|,|\b(?:values|names|pairs|items)\b", re.I)
_A_NUMBER = re.compile(r"[-+]?(?:\d+\.?\d*|\.\d+)(?:e[-+]?\d+)?", re.I)
#: the last lines of a pandas repr (``Name: x, dtype: float64``, ``[58 rows x 2 columns]``),
#: and the length they tell of what was cut
_REPR_LENGTH = re.compile(r"Length: (\d+)|^\s*\[?(\d+) rows x")
_REPR_FOOTER = re.compile(
    r"^\s*(?:Name: .*|dtype: \w+|Length: \d+.*|\[?\d+ rows x \d+ columns\]?)\s*$"
)


_SHARE_ASKED = re.compile(r"\b(?:what percentage of|as a percentage|in percent(?:age)?)\b", re.I)
_NOT_A_SHARE = re.compile(r"\bas a fraction\b|\bpercentage change\b|\bgrowth\b", re.I)


def method_mismatch(task: str, code: str) -> str:
    """A note when the cell computes another statistic than the one the task names."""
    asked = {m for m in ("pearson", "spearman", "kendall", "welch") if m in task.lower()}
    asked |= {"welch"} if re.search(r"unequal variances", task, re.I) else set()
    used = code.lower()
    if asked & {"pearson", "spearman", "kendall"} == {"pearson"} and re.search(
        r"spearman|kendall", used
    ):
        return (
            "the task asks for the Pearson correlation, and this cell computed a rank "
            "correlation (Spearman or Kendall). Pearson's is `a.corr(b)` with no method, "
            "or `stats.pearsonr(a, b)`."
        )
    if asked & {"pearson", "spearman", "kendall"} == {"spearman"} and "spearman" not in used:
        if ".corr(" in used or "pearsonr" in used:
            return (
                "the task asks for the Spearman correlation, and this cell computed "
                "another one. Spearman's is `a.corr(b, method='spearman')`, or "
                "`stats.spearmanr(a, b)`."
            )
    if "welch" in asked and "ttest_ind(" in used and not re.search(r"equal_var\s*=\s*false", used):
        return (
            "the task asks for Welch's t-test (unequal variances), and this cell's "
            "`ttest_ind` assumes equal variances. Welch's is "
            "`stats.ttest_ind(a, b, equal_var=False)`."
        )
    return ""


#: the per-group statistics a task names, and the names (methods, functions, or strings
#: given to ``agg``) that compute each of them in a cell
_GROUP_STATISTICS = {
    "mean": (re.compile(r"\b(?:mean|average|averages|avg)\b", re.I),
             {"mean", "average", "nanmean", "describe", "zscore"}),
    "median": (re.compile(r"\bmedians?\b", re.I), {"median", "nanmedian", "describe"}),
}  # fmt: skip
#: what a grouped frame or series is reduced by, as a method or a name given to ``agg``
_REDUCERS = frozenset({"max", "min", "sum", "mean", "median", "count", "size", "std", "var",
                       "first", "last", "nunique", "prod"})  # fmt: skip
_AGG_METHODS = frozenset({"agg", "aggregate", "transform"})


def group_statistic_mismatch(task: str, code: str) -> str:
    """A note when the task names a per-group statistic (a mean, a median) that the cell
    never computes, while it reduces its groups by another one (``groupby(g)[x].max()``
    where the largest *mean* was asked). What the cell computes is read from its code, not
    its words: a comment or a printed label that says "mean" computes none."""
    asked = [name for name, (said, _) in _GROUP_STATISTICS.items() if said.search(task)]
    parsed = parse_python(code) if len(asked) == 1 else None
    if parsed is None or _computes(parsed, _GROUP_STATISTICS[asked[0]][1]):
        return ""
    for statement in ast.walk(parsed):
        if not isinstance(statement, ast.stmt) or isinstance(statement, _BLOCKS):
            continue
        for node in ast.walk(statement):
            reducer = _group_reducer(node)
            if reducer is None or reducer == asked[0]:
                continue
            call = ast.get_source_segment(code, node) or f".{reducer}()"
            fixed = ast.unparse(_Reduce(node, reducer, asked[0]).visit(copy.deepcopy(statement)))
            return (
                f"the task asks for the {asked[0]} of each group, and this cell computed no "
                f"{asked[0]}: `{_short(call)}` takes each group's {reducer}. The {asked[0]} "
                f"of each group: `{_short(fixed, 160)}` (then the largest or smallest "
                f"{asked[0]} is `.idxmax()` / `.max()` of those)."
            )
    return ""


#: statements that hold others (the reducing statement itself is the one to show)
_BLOCKS = (ast.If, ast.For, ast.While, ast.With, ast.Try, ast.FunctionDef, ast.ClassDef)


class _Reduce(ast.NodeTransformer):
    """A copy of a statement with one group reduction (found by position) made ``by``."""

    def __init__(self, target: ast.AST, was: str, by: str) -> None:
        self.at = (getattr(target, "lineno", 0), getattr(target, "col_offset", 0),
                   getattr(target, "end_col_offset", 0))  # fmt: skip
        self.was, self.by = was, by

    def visit_Call(self, node: ast.Call) -> ast.AST:
        self.generic_visit(node)
        here = (node.lineno, node.col_offset, node.end_col_offset)
        if here == self.at and isinstance(node.func, ast.Attribute):
            if node.func.attr in _AGG_METHODS:
                for name in _agg_names(node):
                    if name.value == self.was:
                        name.value = self.by
            else:
                node.func.attr = self.by
        return node


def _agg_names(call: ast.Call) -> list[ast.Constant]:
    """The statistics an ``agg``/``transform`` call names: ``agg('max')``,
    ``agg(['max', 'min'])``, ``agg({'col': 'max'})``, ``agg(top=('col', 'max'))``."""
    given: list[ast.expr] = call.args[:1]
    found: list[ast.Constant] = []
    while given:
        node = given.pop(0)
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            found.append(node)
        elif isinstance(node, (ast.List, ast.Tuple)):
            given.extend(node.elts)
        elif isinstance(node, ast.Dict):
            given.extend(v for v in node.values if v is not None)
    for keyword in call.keywords:  # named aggregation: (column, statistic)
        value = keyword.value
        if isinstance(value, ast.Tuple) and len(value.elts) == 2:
            statistic = value.elts[1]
            if isinstance(statistic, ast.Constant) and isinstance(statistic.value, str):
                found.append(statistic)
    return found


def _computes(tree: ast.AST, names: set[str]) -> bool:
    """Whether ``tree`` calls or names one of ``names`` (``.mean()``, ``np.mean``,
    ``agg('mean')``, ``quantile(0.5)`` for a median), as code, not as words."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr in names:
            return True
        if isinstance(node, ast.Name) and node.id in names:
            return True
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in names:
            return True
        if (
            "median" in names
            and isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "quantile"
            and any(isinstance(a, ast.Constant) and a.value == 0.5 for a in node.args)
        ):
            return True
    return False


def _group_reducer(node: ast.AST) -> str | None:
    """The statistic ``node`` reduces a ``groupby`` by: ``.max()`` or ``.agg('max')`` on a
    chain that holds a ``.groupby(...)`` call; None for any other node."""
    if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
        return None
    name = node.func.attr
    if name in _AGG_METHODS:
        name = next((c.value for c in _agg_names(node) if c.value in _REDUCERS), "")
    if name not in _REDUCERS:
        return None
    receiver: ast.AST = node.func.value
    while isinstance(receiver, (ast.Call, ast.Attribute, ast.Subscript)):
        if isinstance(receiver, ast.Call):
            if isinstance(receiver.func, ast.Attribute) and receiver.func.attr == "groupby":
                return name
            receiver = receiver.func
        else:
            receiver = receiver.value
    return None


def _short(text: str, limit: int = 80) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def cut_edges(task: str, code: str) -> str:
    """A bin edge the task bounds with "under N" / "N and over", in a ``pd.cut`` whose bins
    hold their right edge (the default), so N lands in the bin the task says it is not in."""
    parsed = _parse(code)
    if parsed is None:
        return ""
    bounded = {float(n) for n in _UNDER.findall(task) + _AND_OVER.findall(task)}
    for node in ast.walk(parsed[0]):
        if not (
            isinstance(node, ast.Call)
            and (
                (isinstance(node.func, ast.Attribute) and node.func.attr == "cut")
                or (isinstance(node.func, ast.Name) and node.func.id == "cut")
            )
        ):
            continue
        keywords = {k.arg: k.value for k in node.keywords}
        right = keywords.get("right")
        if isinstance(right, ast.Constant) and right.value is False:
            continue
        bins = keywords.get("bins", node.args[1] if len(node.args) > 1 else None)
        if not isinstance(bins, (ast.List, ast.Tuple)):
            continue
        edges = {
            float(e.value)
            for e in bins.elts
            if isinstance(e, ast.Constant)
            and isinstance(e.value, (int, float))
            and not isinstance(e.value, bool)
        }
        if edge := sorted(edges & bounded):
            n = f"{edge[0]:g}"
            return (
                f"`pd.cut` bins hold their right edge by default, so a value of exactly {n} "
                f'falls in the bin that ends at {n}; the task\'s "under {n}" / "{n} and '
                f'over" puts {n} in the bin that starts there. Pass `right=False`.'
            )
    return ""


_UNDER = re.compile(
    r"\b(?:under|below|less than|younger than|lower than)\s+(\d+(?:\.\d+)?)\b", re.I
)
_AND_OVER = re.compile(
    r"\b(\d+(?:\.\d+)?)\s*(?:\+|(?:and|or)\s+(?:over|above|older|more|up)\b)", re.I
)


def normality_reversed(task: str, cell: CellResult) -> bool:
    """A "does it look normal (yes/no)" task whose cell printed ``p < 0.05`` as True/False
    after a normality test: True there means the test rejects normality, the reverse."""
    if not _NORMAL_ASKED.search(task) or not _NORMALITY_TEST.search(cell.code):
        return False
    if not _P_BELOW.search(cell.code):
        return False
    printed = printed_values(render_cell(cell, budget=4000).text)
    return any(v in ("True", "False") for values in printed.values() for v in values)


_NORMAL_ASKED = re.compile(r"\bnormal(?:ly)?\b", re.I)
_NORMALITY_TEST = re.compile(r"\b(?:shapiro|normaltest|kstest|jarque_bera|anderson)\s*\(")
_P_BELOW = re.compile(r"\bp\w*\s*<=?\s*(?:0?\.\d+|alpha)\b", re.I)


STATISTIC = re.compile(r"spearman|kendall|pearsonr|\.corr\(|ttest_ind\(")
#: a statement that reduces groups (the names it assigns keep a per-group statistic)
GROUPED = re.compile(r"\.groupby\(")


def assigned_by(code: str, pattern: re.Pattern[str]) -> set[str]:
    """The names that statements matching ``pattern`` assign (they keep what it computed)."""
    parsed = _parse(code)
    if parsed is None:
        return set()
    return {
        target.id
        for node in ast.walk(parsed[0])
        if isinstance(node, ast.Assign) and pattern.search(ast.unparse(node.value))
        for target in ast.walk(node)
        if isinstance(target, ast.Name) and isinstance(target.ctx, ast.Store)
    }


def asked_column(task: str, columns: Sequence[str]) -> str:
    """The column a "which year / in which state ..." task asks for, if the frame has it;
    else ``'<column>'``."""
    for word in _WHICH.findall(task):
        match = [c for c in columns if c.lower() == word.lower()]
        if match:
            return match[0]
    return "<column>"


_WHICH = re.compile(r"\b(?:which|what)\s+([A-Za-z_]\w*)", re.I)
