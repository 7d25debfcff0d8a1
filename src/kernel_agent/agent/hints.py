"""Short hints appended to an error the model must fix: the mistakes small models repeat.

Pure: built from the error, the cell's code and the namespace summary.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Mapping

from ..kernel_state.namespace import VariableInfo
from ..results import CellResult
from .imports import COMMON_ALIASES

__all__ = ["error_hint"]

_COMMON_IMPORTS = {
    **{alias: line for alias, (line, _) in COMMON_ALIASES.items()},
    "os": "import os",
    "random": "import random",
    "datetime": "import datetime",
}
#: what a function that small models unpack wrongly returns, in order
_RETURNS = {
    "chi2_contingency": "4 values: chi2, p, dof, expected",
    "linregress": "5 values: slope, intercept, rvalue, pvalue, stderr",
    "pearsonr": "2 values: statistic, pvalue",
    "spearmanr": "2 values: statistic, pvalue",
    "kendalltau": "2 values: statistic, pvalue",
    "ttest_ind": "2 values: statistic, pvalue",
    "ttest_rel": "2 values: statistic, pvalue",
    "ttest_1samp": "2 values: statistic, pvalue",
    "f_oneway": "2 values: statistic, pvalue",
    "kruskal": "2 values: statistic, pvalue",
    "mannwhitneyu": "2 values: statistic, pvalue",
    "shapiro": "2 values: statistic, pvalue",
    "levene": "2 values: statistic, pvalue",
    "chisquare": "2 values: statistic, pvalue",
    "polyfit": "one value per coefficient, the highest power first (deg=1: slope, intercept)",
}
_UNPACK = re.compile(r"(?:too many|not enough) values to unpack")
_ONE_VALUE = re.compile(r"cannot unpack non-iterable (\w+) object")
_NAME_ERROR = re.compile(r"name '([A-Za-z_]\w*)' is not defined")
_MISSING_MODULE = re.compile(r"No module named '([\w.]+)'")
_ANSWER_SLOT = re.compile(r"@[A-Za-z_]\w*\[")


def _squash(name: str) -> str:
    """A column name without case, spaces and punctuation: ``row_mz`` is ``row m/z``."""
    return re.sub(r"[\W_]+", "", str(name)).lower()


def _one_value(kind: str, code: str) -> str:
    """``r, p = s.corr(t)``: the call returns one value, which cannot be unpacked."""
    hint = (
        f"Hint: the right side of an `a, b = ...` line in this cell is one {kind} value, not "
        "a pair; assign it to one name."
    )
    if re.search(r"\.corr\s*\(", code):
        hint += (
            " `a.corr(b)` returns only the coefficient; `stats.pearsonr(a, b)` (or "
            "`stats.spearmanr`) returns the statistic and the p-value."
        )
    return hint


def error_hint(
    result: CellResult,
    namespace: dict[str, VariableInfo],
    libraries: Mapping[str, str] | None = None,
    install_policy: str = "never",
) -> str:
    """A hint for the model, or "" when there is nothing useful to add.

    ``libraries`` is what the kernel can import (``{import name: version}``), when known.
    """
    error = result.error
    if error is None or result.status != "error":
        return ""
    if error.ename == "SyntaxError" and _ANSWER_SLOT.search(result.code):
        return (
            "Hint: the @name[value] form is for your final answer text, not for code. "
            "Print the values plainly in code; write the @name[value] answer in prose."
        )
    if error.ename == "NameError" and (match := _NAME_ERROR.search(error.evalue)):
        return _name_error(match.group(1), result.code, namespace)
    if error.ename in ("ModuleNotFoundError", "ImportError") and (
        match := _MISSING_MODULE.search(error.evalue)
    ):
        have = ", ".join(sorted(libraries)) if libraries else "numpy, pandas, matplotlib"
        if install_policy != "never":
            return (
                f"Hint: the module {match.group(1)!r} is not installed. Use what is available "
                f"({have}), or call install_package({match.group(1).split('.')[0]!r}) "
                f"(policy: {install_policy}); shell installs do not work here."
            )
        return (
            f"Hint: the module {match.group(1)!r} is not installed and cannot be installed here "
            f"(no network). Use what is available: the standard library, {have}."
        )
    if error.ename == "ValueError" and _UNPACK.search(error.evalue):
        called = [f for f in _RETURNS if re.search(rf"\b{f}\s*\(", result.code)]
        if called:
            return (
                f"Hint: {called[0]}() returns {_RETURNS[called[0]]}. Unpack exactly that many "
                "names, or keep the result in one name and take its parts by index."
            )
    if error.ename == "TypeError" and (match := _ONE_VALUE.search(error.evalue)):
        return _one_value(match.group(1), result.code)
    if error.ename == "KeyError":
        frames = [v for v in namespace.values() if v.columns]
        key = error.evalue.strip().strip("'\"")
        if frames and re.fullmatch(r"-?\d+", key):
            return (
                f"Hint: `frame[{key}]` looks up a column, and there is no column {key}. "
                f"A row by its index label is `frame.loc[{key}]`, by its position "
                f"`frame.iloc[{key}]`; one value of it is `frame.loc[{key}, 'column']`."
            )
        for frame in frames:
            close = [c for c in frame.columns or () if _squash(c) == _squash(key)]
            close = close or difflib.get_close_matches(key, list(frame.columns or ()), n=1)
            if close:
                return (
                    f"Hint: there is no column {key!r}, "
                    f"but {frame.name} has a column {close[0]!r}. "
                    f"Use {frame.name}[{close[0]!r}] (column names are case-sensitive)."
                )
        if frames:
            listed = "; ".join(
                f"{v.name} has columns {', '.join(v.columns or ())}" for v in frames[:3]
            )
            return f"Hint: {listed}. Column names are case-sensitive."
    if (
        error.ename == "TypeError"
        and "bad operand type for abs(): 'str'" in error.evalue
        and re.search(r"\b(?:max|min|sorted)\s*\(.*\bkey\s*=\s*abs\b", result.code)
    ):
        return (
            "Hint: max()/min()/sorted() over a dict go through its keys, which are strings. "
            "To pick the key whose value is largest in absolute value: "
            "`max(d, key=lambda k: abs(d[k]))`."
        )
    if error.ename == "TypeError" and "passed to Series.__format__" in error.evalue:
        return (
            "Hint: a value formatted in the f-string is a Series (one value per row), not a "
            "number. Take its number out first: `x.iloc[0]` for its first row, or `x.item()` "
            "when it has exactly one."
        )
    if error.ename == "FileNotFoundError":
        return (
            "Hint: list the working directory (import os; print(os.listdir())) "
            "to see which files exist."
        )
    return ""


def _name_error(name: str, code: str, namespace: dict[str, VariableInfo]) -> str:
    if name in _COMMON_IMPORTS and not re.search(rf"^\s*{name}\s*=", code, re.M):
        return (
            f"Hint: `{name}` is a module that was never imported. "
            f"Add `{_COMMON_IMPORTS[name]}` at the top of the cell."
        )
    if re.search(rf"^\s*{name}\s*=.*\b{name}\b", code, re.M):
        return (
            f"Hint: `{name}` is used on the right-hand side of its own assignment, "
            "before it exists. "
            "Compute the values it needs first (in separate variables or statements), "
            f"then build `{name}`."
        )
    existing = ", ".join(sorted(namespace)[:20]) or "none yet"
    return f"Hint: no variable `{name}` exists in the kernel. Variables that exist: {existing}."
