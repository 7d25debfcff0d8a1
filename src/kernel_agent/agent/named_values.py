"""Values the task names and the code leaves out: the task read as another task.

The task names groups by the values a column holds ("compare ... between the islands Dream
and Torgersen"); the preview's facts list each text column's few distinct values
(:attr:`FileFacts.values`). When the code writes some of the values the task names for one
column and never another, it answers a question about other rows: the messy tuned half,
2026-12-02, compared two columns within Dream (``Delta 15 N`` against ``Flipper Length``)
and printed a verdict.

Read from the code's string constants (``ast``), not its comments: a value counts as
written when a constant holds it (a filter, an ``isin`` list, an f-string part). Code that
negates a selection (``!=``, ``~``) may reach the other group without naming it, so it is
left alone, as is code that is not Python.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterable, Mapping

from ..kernel_state.preview_facts import FileFacts
from .code_text import parse_python

__all__ = ["omitted_values"]

_MIN_CHARS = 2


def omitted_values(
    task: str, codes: Iterable[str], facts: Mapping[str, FileFacts]
) -> tuple[str, list[str], list[str]] | None:
    """``(column, written, omitted)``: the task names two or more values of ``column``,
    and ``codes`` (the task's cells so far) write some of them and not the others."""
    groups = [
        (column, named)
        for file in facts.values()
        for column, values in file.values.items()
        if len(named := [v for v in values if len(v.strip()) >= _MIN_CHARS and _names(task, v)])
        >= 2
    ]
    if not groups:  # the common case: no code to parse
        return None
    written_text: list[str] = []
    for code in codes:
        tree = parse_python(code)
        if tree is None:
            continue
        for node in ast.walk(tree):
            if isinstance(node, (ast.NotEq, ast.Invert, ast.NotIn)):
                return None
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                written_text.append(node.value)
    for column, named in groups:
        written = [v for v in named if any(v in s for s in written_text)]
        omitted = [v for v in named if v not in written]
        # a value inside a written one ('USA' in 'non-USA') is not surely left out
        omitted = [v for v in omitted if not any(v in w or w in v for w in written)]
        if written and omitted:
            return column, written, omitted
    return None


def _names(task: str, value: str) -> bool:
    """The task writes ``value`` whole, as the column holds it (case and all)."""
    return re.search(rf"(?<!\w){re.escape(value)}(?!\w)", task) is not None
