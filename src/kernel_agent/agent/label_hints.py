"""Hints for code that treats labels as numbers or positions, with the fix in its words.

Three errors a person fixes in seconds that kept a small model failing on scratch files
(a churn table and a headerless ``iris.data``, 2026-12-07):

- ``counts[1]`` on ``df['Churn'].value_counts()``: pandas 3 reads ``s[1]`` as the
  label 1, never the position, so a series labelled 'No'/'Yes' raises ``KeyError: 1``;
- ``df['Churn'].mean()`` on a column of 'No'/'Yes': "Cannot perform reduction 'mean'
  with string dtype". The share of one label is the mean of a comparison;
- ``df['3']`` on a file read with ``header=None``, whose columns are the numbers 0, 1 ...;
- ``df['Year'] == 1990`` on a wide table (World Bank's), whose years are its columns
  '1960' ... '2020', each holding that year's values (a long table was assumed).

Each reads only the cell's code, the error, the kernel's summary of its variables or
the data preview's "few distinct values" line the model was shown (kernel text: only
its first lines' first 2,000 characters are read, and the hint quotes five values at
most).
"""

from __future__ import annotations

import ast
import re
from collections.abc import Mapping

from ..kernel_state.namespace import VariableInfo
from .code_text import parse_python

__all__ = ["labelled_lookup", "labels_averaged", "quoted_number", "years_as_columns"]

#: reductions that need numbers
_REDUCTIONS = frozenset({"mean", "sum", "median", "std", "var"})
#: the preview's line of text columns with few values: 'Churn' 'No', 'Yes'; 'Contract' ...
_FEW = re.compile(r"few distinct values: (.+)")
#: how much of the preview's text is read: a line of kernel text full of unclosed quotes
#: costs the pattern time that grows with the square of its length (a real line is short)
_MAX_LINES, _MAX_LINE = 10, 2000
_COLUMN_VALUES = re.compile(r"'((?:[^'\\]|\\.)+)' ((?:'(?:[^'\\]|\\.)*'(?:, )?)+)(?:;|$)")


def labelled_lookup(key: str, code: str, namespace: Mapping[str, VariableInfo]) -> str:
    """``KeyError: 1`` from ``s[1]`` on a series labelled by values, not row numbers."""
    for match in re.finditer(rf"\b([A-Za-z_]\w*)\[\s*{re.escape(key)}\s*\]", code):
        info = namespace.get(match.group(1))
        if info is None or info.type != "Series" or info.row_numbers:
            continue
        name = info.name
        return (
            f"Hint: `{name}[{key}]` looks up the label {key}, not the position: {name} is "
            f"labelled by values (value_counts() and groupby results are). Use a label "
            f"as print({name}) shows it (`{name}['label']`), or the position "
            f"(`{name}.iloc[{key}]`)."
        )
    return ""


def quoted_number(evalue: str, namespace: Mapping[str, VariableInfo]) -> str:
    """``KeyError: '3'`` while a frame lists a column 3: its names are numbers (a file
    read with ``header=None``), which a quoted '3' does not find."""
    found = re.fullmatch(r"""\s*(['"])(-?\d+)\1\s*""", evalue)
    if found is None:
        return ""
    key = found.group(2)
    for info in namespace.values():
        if info.columns and key in info.columns:
            return (
                f"Hint: {info.name}'s columns are numbers (a file read with header=None), "
                f"not text: write {info.name}[{key}], without quotes. To name them, read "
                "the file with names=[...]."
            )
    return ""


def years_as_columns(key: str, namespace: Mapping[str, VariableInfo]) -> str:
    """``KeyError: 'Year'`` on a frame whose columns are the years themselves."""
    if not re.fullmatch(r"(?i)\s*(?:years?|yr|date|time|period|value|values)\s*", key):
        return ""
    for info in namespace.values():
        columns = info.columns or ()
        years = [c for c in columns if re.fullmatch(r"(?:1[89]|20)\d\d", c)]
        if len(years) >= 3:
            return (
                f"Hint: there is no column {key!r}: {info.name} is wide, one column per year "
                f"({years[0]!r} ... {years[-1]!r}, text names), each holding that year's "
                f"values, one row per {columns[0]!r} (if one). A year's values are "
                f"{info.name}[{years[-1]!r}]: filter with "
                f"{info.name}[{info.name}[{years[-1]!r}] > x], with no year condition."
            )
    return ""


def labels_averaged(code: str, told: str) -> str:
    """A mean or sum of a column whose values the preview listed as a few labels."""
    few = _few_values(told)
    tree = parse_python(code)
    if not few or tree is None:
        return ""
    for node in ast.walk(tree):
        if not (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in _REDUCTIONS
        ):
            continue
        column = _column_of(node.func.value)
        if column in few:
            values = few[column]
            one = values[-1]
            return (
                f"Hint: {column!r} holds labels ({', '.join(map(repr, values[:5]))}), not "
                f"numbers, so .{node.func.attr}() of it fails. The share of one label is the "
                f"mean of a comparison: `(df[{column!r}] == {one!r}).mean()` (times 100 for "
                f"a percentage); a count of it is `(df[{column!r}] == {one!r}).sum()`."
            )
    return ""


def _few_values(told: str) -> dict[str, list[str]]:
    """{column: its values} from the preview's "few distinct values" lines."""
    found: dict[str, list[str]] = {}
    for line in _FEW.findall(told)[:_MAX_LINES]:
        for column, listed in _COLUMN_VALUES.findall(line[:_MAX_LINE]):
            found.setdefault(column, re.findall(r"'((?:[^'\\]|\\.)*)'", listed))
    return found


def _column_of(node: ast.expr) -> str | None:
    """The column a reduction's receiver selects last: ``df[mask]['Churn']`` → 'Churn'."""
    if isinstance(node, ast.Subscript):
        index = node.slice
        if isinstance(index, ast.Constant) and isinstance(index.value, str):
            return index.value
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
        return node.attr  # df.Churn
    return None
