"""Rows with at least one of a thing, counted as the sum of a column that counts it.

"What percentage of male students have at least one past failure?": the bundled model
wrote ``male_students['failures'].sum() / len(male_students)``, the failures per
student, and answered 40.88% for 28.18% (scratch, 2026-12-08). A column of counts
(``failures``, ``SibSp``, ``children``) summed gives how many things, not how many rows
have one. The check reads the task and the cell's code: the task counts rows with "at
least one" (or "one or more") of a word, and the code sums a column named by that word.
Pure.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass

from .code_text import frame_column, parse_python

__all__ = ["SummedCount", "summed_count"]

_TASK_CHARS = 2_000
_AT_LEAST_ONE = re.compile(r"\b(?:at least one|one or more|1 or more)\b(.{0,60})", re.I)


@dataclass(frozen=True)
class SummedCount:
    """``total`` sums ``column`` of ``frame`` where the task counts rows with one or more."""

    total: str
    frame: str
    column: str

    def note(self) -> str:
        kept = f"({self.frame}[{self.column!r}] >= 1)"
        return (
            f"Note: the task counts the rows with at least one, and `{self.total[:120]}` adds "
            f"up {self.column!r}: a row with 3 counts 3. The rows with at least one are "
            f"`{kept}.sum()`, and their share `{kept}.mean()`."
        )


def summed_count(task: str, code: str) -> SummedCount | None:
    """The first ``X['c'].sum()`` of ``code`` on a column the task counts "at least one" of."""
    # the words after the phrase: "at least one past failure", "one or more siblings (SibSp)"
    words = {
        _singular(w)
        for m in _AT_LEAST_ONE.finditer(task[:_TASK_CHARS])
        for w in re.findall(r"[a-z][a-z_]{2,}", m.group(1).lower())
    }
    if not words:
        return None
    tree = parse_python(code)
    if tree is None:
        return None
    for node in ast.walk(tree):
        if not (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "sum"
            and not node.args
        ):
            continue
        found = frame_column(node.func.value)
        if found and _named(_singular(found[1].lower()), words):
            return SummedCount(ast.unparse(node), *found)
    return None


def _named(column: str, words: set[str]) -> bool:
    """A word names the column: the same, or one begins the other ('child', 'children')."""
    return any(
        w == column
        or (min(len(w), len(column)) >= 4 and (w.startswith(column) or column.startswith(w)))
        for w in words
    )


def _singular(word: str) -> str:
    return word[:-1] if word.endswith("s") and len(word) > 3 else word
