"""A hint for a column given more rows than its frame has: an exploded Series put back.

"Which genre in listed_in appears most often?": the bundled model wrote
``df['listed_in'] = df['listed_in'].str.split(',').explode().str.strip()`` and pandas
refused (``ValueError: cannot reindex on an axis with duplicate labels``); it sent the
same line four times and gave up (scratch, 2026-12-07). ``explode`` gives one row per
value, more rows than ``df``, sharing their row's label. Pure.
"""

from __future__ import annotations

import re

__all__ = ["reindexed_hint"]

_DUPLICATE = re.compile(r"cannot reindex on an axis with duplicate labels|duplicate labels")
#: ``frame['column'] = ...`` on one line, the right side exploded
_EXPLODED = re.compile(r"^\s*(\w+)\[(['\"])([^'\"\n]{1,80})\2\]\s*=.*\.explode\(", re.M)


def reindexed_hint(evalue: str, code: str) -> str:
    """The hint, or "" when ``evalue`` is not pandas' duplicate-label refusal."""
    if not _DUPLICATE.search(evalue):
        return ""
    found = _EXPLODED.search(code)
    if found is None:
        return (
            "Hint: the right side of the assignment has repeated index labels (one row per "
            "value after explode, or rows repeated by a join), so pandas cannot line it up "
            "with the frame's rows. Keep it in a name of its own instead of a column."
        )
    frame, column = found.group(1), found.group(3)
    key = repr(column)
    return (
        f"Hint: .explode() gives one row per value, more rows than {frame}, so it cannot be "
        f"put back as {frame}[{key}]. Keep it in a name of its own: `values = "
        f"{frame}[{key}].str.split(',').explode().str.strip()`, then `values.value_counts()`; "
        f"or make the frame one row per value: `{frame}[{key}] = {frame}[{key}].str.split(',')` "
        f"then `{frame} = {frame}.explode({key})`."
    )
