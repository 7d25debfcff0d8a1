"""A rule the task states, recomputed in the kernel and held against the count printed.

Asked how many values are outliers by a rule the task spells out (the IQR fences, a
z-score above 2.5), the bundled model printed counts its own series could not give: all
the rows, none at all (``stats.zscore`` of a column with missing values is all ``nan``, and
``nan > 2.5`` is False everywhere), the values of another condition. The model cannot see
that; the kernel can. So the check is one property, not a list of slips: the rule the task
states, applied in the kernel to the series the cell's code computed it on (the receiver
of ``quantile``/``std``/``mean``, the argument of ``zscore``/``percentile``; else a column
its condition reads), with missing and non-numeric values dropped, gives a set of counts
(every quantile method pandas has, strict and inclusive bounds, ``ddof`` 0 and 1 where the
task does not fix it), and a fence or two. A printed count outside that set, or a printed
fence none of them has, gets one note with the rule written as code.

The series are named by the model's code and evaluated again, after the cell, as
``user_expressions``: only expressions without side effects (names, columns, filters,
comparisons, a few pure methods), at most :data:`_SERIES` of them. What comes back is the
kernel's, hostile: bounded before it is parsed, and read into :class:`Recount` only when
every field has the shape asked.
"""

from __future__ import annotations

import ast
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from ..kernel_state.expressions import expression_json, kernel_call
from ..llm.view import render_cell
from ..results import CellResult
from .answers import FormatSpec
from .code_text import parse_python, reads_only
from .every_row import COUNT_ASKED, printed_counts
from .slots import FILLED, quoted

__all__ = [
    "Contradiction", "Recount", "Rule", "recounts_of", "rule_note", "rule_probe", "stated_rule",
]  # fmt: skip

_KEY = "stated_rule_"  # user_expressions keys: stated_rule_0, stated_rule_1, ...
_SERIES = 3  # series recomputed a cell
_EXPR_CHARS = 300  # the longest series expression sent back to the kernel
_ANSWER_CHARS = 20_000  # the longest answer read back
_MOST = 10**15  # no count printed is larger (a longer number is no count to quote back)
_VALUE_CHARS = 40  # the longest printed fence read
_OUTLIERS = re.compile(r"outlier|anomal|extreme|fence|unusual", re.I)
_IQR = re.compile(r"\bIQR\b|inter-?quartile", re.I)
_IQR_K = re.compile(
    r"(\d+(?:\.\d+)?)\s*(?:\*|x|×|times)?\s*(?:the\s+)?(?:IQR\b|inter-?quartile)", re.I
)
_Z = re.compile(r"\bz[- ]?scores?\b|\|z\|", re.I)
_Z_K = re.compile(
    r"(?:>=?|≥|greater than|above|exceed\w*|more than|over|beyond|larger than|outside|"
    r"at least)\s*(?:\+/-|±)?\s*(\d+(?:\.\d+)?)",
    re.I,
)
_SD_K = re.compile(
    r"(\d+(?:\.\d+)?)\s*(?:standard deviations?|std\.?|sd|sigma|σ)\b(?:[^.]{0,40}\bmean\b)", re.I
)
_DDOF0 = re.compile(r"ddof\s*=\s*0|population standard deviation", re.I)
_DDOF1 = re.compile(r"ddof\s*=\s*1|sample standard deviation", re.I)
#: a printed label or slot name that holds the count (and not a fence, a mean or a share)
_COUNT_NAME = re.compile(r"outlier|count|number|num|n_|anomal|extreme|how_many|total", re.I)
_NOT_COUNT = re.compile(r"fence|bound|thresh|max|min|mean|avg|percent|pct|ratio|share|rate|frac")
_FENCE_NAME = re.compile(r"(lower|upper|low|high)[\w-]*(fence|bound|limit|threshold|cut)", re.I)
#: calls whose receiver is the series the rule is computed on (``df['x'].quantile(0.25)``)
_ON_RECEIVER = frozenset({"quantile", "std", "mean", "describe", "median"})
#: calls whose first argument is (``stats.zscore(df['x'])``, ``np.percentile(s, 75)``)
_ON_ARGUMENT = frozenset({"zscore", "percentile", "nanpercentile", "quantile", "iqr"})
#: names a module goes by, not a series (``np.quantile(s, 0.25)``)
_MODULES = frozenset({"np", "numpy", "pd", "pandas", "stats", "scipy", "st", "sp"})
#: the kernel's side: the rule on one series, every reading of it the task allows
_RULE_SOURCE = """
def result(values, kind, ks, ddofs):
    import numpy as np
    import pandas as pd
    if isinstance(values, pd.DataFrame):
        if values.shape[1] != 1:
            return None
        values = values.iloc[:, 0]
    if not isinstance(values, pd.Series):
        if not isinstance(values, (np.ndarray, list, tuple)):
            return None
        values = pd.Series(np.asarray(values).ravel())
    if values.dtype.kind in "mM" or not 3 <= len(values) <= 20_000_000:
        return None
    s = pd.to_numeric(values, errors="coerce").astype(float)
    s = s[np.isfinite(s)]
    if len(s) < 3:
        return None
    found = []
    for k in ks:
        if kind == "iqr":
            for method in ("linear", "lower", "higher", "midpoint", "nearest"):
                q1 = s.quantile(0.25, interpolation=method)
                q3 = s.quantile(0.75, interpolation=method)
                lo, hi = q1 - k * (q3 - q1), q3 + k * (q3 - q1)
                counts = {int(((s < lo) | (s > hi)).sum()), int(((s <= lo) | (s >= hi)).sum())}
                found.append({"counts": sorted(counts), "fences": [float(lo), float(hi)]})
        else:
            for ddof in ddofs:
                sd = s.std(ddof=ddof)
                if not sd > 0:
                    continue
                z = ((s - s.mean()) / sd).abs()
                counts = {int((z > k).sum()), int((z >= k).sum())}
                fences = [float(s.mean() - k * sd), float(s.mean() + k * sd)]
                found.append({"counts": sorted(counts), "fences": fences})
    return {"n": int(len(s)), "found": found}
"""


@dataclass(frozen=True)
class Rule:
    """An outlier rule the task states: ``iqr`` (outside ``k`` IQRs beyond the quartiles)
    or ``z`` (``|z| > k``, z from the mean and a standard deviation with ``ddofs``)."""

    kind: Literal["iqr", "z"]
    ks: tuple[float, ...]
    ddofs: tuple[int, ...] = (0, 1)

    def said(self) -> str:
        k = _number(self.ks[0])
        if self.kind == "iqr":
            return f"the IQR rule (below Q1 - {k}*IQR or above Q3 + {k}*IQR)"
        return f"|z| > {k}"

    def code(self, series: str) -> str:
        """The rule on ``series`` as a cell the model can run."""
        k = _number(self.ks[0])
        head = f"s = pd.to_numeric({series}, errors='coerce').dropna()\n"
        if self.kind == "iqr":
            return (
                f"{head}q1, q3 = s.quantile(0.25), s.quantile(0.75)\n"
                f"lower, upper = q1 - {k} * (q3 - q1), q3 + {k} * (q3 - q1)\n"
                "print(lower, upper, ((s < lower) | (s > upper)).sum())"
            )
        return (
            f"{head}z = (s - s.mean()) / s.std(ddof={self.ddofs[0]})\nprint((z.abs() > {k}).sum())"
        )


@dataclass(frozen=True)
class Recount:
    """The rule on one series, in the kernel: its values, the counts it allows, its fences
    (the first: pandas' default reading)."""

    series: str
    n: int
    counts: frozenset[int]
    fences: tuple[tuple[float, float], ...]


@dataclass(frozen=True)
class Contradiction:
    """A value the cell printed that the recomputed rule does not give, and the note."""

    printed: str
    note: str


def stated_rule(task: str) -> Rule | None:
    """The outlier rule ``task`` states, when it asks a count; else None."""
    if not COUNT_ASKED.search(task):
        return None
    if _IQR.search(task) and _OUTLIERS.search(task):
        ks = tuple(dict.fromkeys(float(k) for k in _IQR_K.findall(task))) or (1.5,)
        return Rule("iqr", ks)
    if z := _Z.search(task):
        ks = tuple(dict.fromkeys(float(k) for k in _Z_K.findall(task[z.start() : z.end() + 80])))
    else:
        ks = tuple(dict.fromkeys(float(k) for k in _SD_K.findall(task)))
    if not ks or not all(0 < k < 100 for k in ks):
        return None
    ddofs = (0,) if _DDOF0.search(task) else (1,) if _DDOF1.search(task) else (0, 1)
    return Rule("z", ks, ddofs)


def rule_probe(rule: Rule, code: str) -> dict[str, str]:
    """``user_expressions`` that recompute ``rule`` on the series ``code`` computes it on
    (none when it names none without side effects)."""
    kind, ks, ddofs = repr(rule.kind), repr(rule.ks), repr(rule.ddofs)
    return {
        f"{_KEY}{i}": kernel_call(_RULE_SOURCE, f"({series}), {kind}, {ks}, {ddofs}")
        for i, series in enumerate(_series(code))
    }


def rule_note(
    task: str, rule: Rule, cell: CellResult, earlier: Sequence[Recount] = ()
) -> Contradiction | None:
    """The first count (or fence) ``cell`` printed for ``task`` that ``rule`` does not give
    on any series the kernel recomputed it on after ``cell`` (or, where the cell names no
    series, after the last cell that did: ``earlier``), with its note; else None."""
    recounts = recounts_of(cell) or list(earlier)
    if not recounts:
        return None
    first = recounts[0]
    told = f"{rule.said()}, on `{first.series}` ({first.n} numeric values, missing dropped)"
    fix = f"Run the rule as the task states it:\n```python\n{rule.code(first.series)}\n```"
    for label, number in printed_counts(task, cell):
        if number <= _MOST and _COUNT_NAME.search(label) and not _NOT_COUNT.search(label.lower()):
            if not any(number in r.counts for r in recounts):
                gives = ", ".join(str(c) for c in sorted(first.counts))
                note = f"Note: {label} printed {number}, but {told} gives {gives}. {fix}"
                return Contradiction(str(number), note)
    for label, value in _printed_fences(task, cell):
        if not any(_near(value, f) for r in recounts for pair in r.fences for f in pair):
            lo, hi = first.fences[0]
            note = (
                f"Note: {label} printed {value}, but {told} has the fences {lo:.4g} and {hi:.4g}."
            )
            return Contradiction(value, f"{note} {fix}")
    return None


# ------------------------------------------------------------------ the series
def _series(code: str) -> list[str]:
    tree = parse_python(code)
    if tree is None:
        return []
    ruled: list[ast.expr] = []  # series a quantile or z-score is computed on
    described: list[ast.expr] = []  # ... a mean or std is
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        name = (
            node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
        )
        if name in _ON_ARGUMENT and node.args:  # stats.zscore(s), np.percentile(s, 75)
            ruled.append(node.args[0])
        if isinstance(node.func, ast.Attribute) and name in _ON_RECEIVER:
            receiver = node.func.value
            if not (isinstance(receiver, ast.Name) and receiver.id in _MODULES):
                (ruled if name == "quantile" else described).append(receiver)
    found = ruled + described
    if not found:  # no statistic: the columns the cell's conditions read
        found = [
            n
            for c in ast.walk(tree)
            if isinstance(c, ast.Compare)
            for n in ast.walk(c)
            if isinstance(n, ast.Subscript) and isinstance(n.slice, ast.Constant)
        ]
    texts = [ast.unparse(node) for node in found if reads_only(node)]
    return [t for t in dict.fromkeys(texts) if len(t) <= _EXPR_CHARS][:_SERIES]


# ------------------------------------------------------------------ the kernel's answer
def recounts_of(cell: CellResult) -> list[Recount]:
    """The kernel's recounts after ``cell``, in the order asked; an answer of the wrong
    shape is none."""
    found = []
    series = _series(cell.code)
    for i, source in enumerate(series):
        answer = expression_json(cell.user_expressions.get(f"{_KEY}{i}"), _ANSWER_CHARS)
        if (recount := _recount(source, answer)) is not None:
            found.append(recount)
    return found


def _recount(source: str, answer: Any) -> Recount | None:
    if not isinstance(answer, Mapping) or not isinstance(answer.get("found"), list):
        return None
    n = answer.get("n")
    readings = answer["found"]
    if not isinstance(n, int) or isinstance(n, bool) or n < 0 or not 0 < len(readings) <= 20:
        return None
    counts: set[int] = set()
    fences = []
    for reading in readings:
        if not isinstance(reading, Mapping):
            return None
        got, pair = reading.get("counts"), reading.get("fences")
        if not isinstance(got, list) or not 0 < len(got) <= 2 or not _ints(got, n):
            return None
        if not isinstance(pair, list) or len(pair) != 2 or not all(_finite(f) for f in pair):
            return None
        counts.update(got)
        fences.append((float(pair[0]), float(pair[1])))
    return Recount(source, n, frozenset(counts), tuple(fences))


def _ints(values: list[Any], most: int) -> bool:
    return all(isinstance(v, int) and not isinstance(v, bool) and 0 <= v <= most for v in values)


def _finite(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


# ------------------------------------------------------------------ what was printed
def _printed_fences(task: str, cell: CellResult) -> list[tuple[str, str]]:
    """``(label, value)`` for each number printed in an asked slot named as a fence."""
    asked = set(FormatSpec.of(task).slots)
    text = render_cell(cell, budget=4000).text
    return [
        (quoted(name, slot=True), value.strip())
        for name, value in FILLED.findall(text)
        if name in asked
        and _FENCE_NAME.search(name)
        and len(value) <= _VALUE_CHARS
        and _float(value) is not None
    ]


def _near(printed: str, fence: float) -> bool:
    """Whether ``printed`` is ``fence`` to the digits it shows (at least two decimals'
    worth of slack, for a value printed rounded)."""
    value = _float(printed)
    if value is None:
        return True
    decimals = len(printed.strip().split(".")[1]) if "." in printed else 0
    return abs(value - fence) <= max(0.6 * 10.0 ** -min(decimals, 2), 1e-6 * abs(fence))


def _float(text: str) -> float | None:
    try:
        value = float(text.strip().strip("'\"`").replace(",", ""))
    except ValueError:
        return None
    return value if math.isfinite(value) else None


def _number(k: float) -> str:
    return str(int(k)) if k == int(k) else str(k)
