"""Columns the task names that no cell read: a condition of the task the answer leaves out.

A task that names a column ("among chicks on Diet 1", "per Species") makes that column a
condition of its answer; a run whose cells never write its name (as a key, an attribute,
in a query string) answered without it. Pure: built from the task's words, the columns the
data preview listed, and the cells' code.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

__all__ = ["named_columns", "unread_columns"]

#: a bracketed unit at a name's end: 'Flipper Length (mm)' is named by 'flipper length'
_UNIT = re.compile(r"\s*[(\[][^)\]]*[)\]]\s*$")
_SEPARATORS = re.compile(r"[._]+")
#: code that renames columns: its later names are not the file's
_RENAMES = re.compile(r"\.columns\s*=|\.rename\s*\(|\bnames\s*=|\.columns\.str\.|header\s*=\s*None")


def named_columns(task: str, columns: Iterable[str], files: Iterable[str] = ()) -> list[str]:
    """The columns ``task`` names, loosely: any case, dots and underscores read as spaces,
    a bracketed unit left out; a name of fewer than three letters is not looked for, nor
    one inside the name of a data file (``files``: 'chick.csv' names no column 'chick')."""
    for file in files:
        task = task.replace(file, " ")
    text = _SEPARATORS.sub(" ", task.lower())
    found = []
    for column in columns:
        name = column.lower().strip()
        bare = _UNIT.sub("", name)
        keys = {name, bare, _SEPARATORS.sub(" ", name), _SEPARATORS.sub(" ", bare)}
        if any(
            len(key) >= 3 and re.search(rf"(?<!\w){re.escape(key)}(?!\w)", text) for key in keys
        ):
            found.append(column)
    return found


def unread_columns(
    task: str, columns: Sequence[str], codes: Sequence[str], files: Iterable[str] = ()
) -> list[str]:
    """The columns the task names that no code of ``codes`` writes (as written in the file);
    none when the code renames columns, or when no code ran."""
    if not codes or any(_RENAMES.search(code) for code in codes):
        return []
    code = "\n".join(codes)
    return [column for column in named_columns(task, columns, files) if column not in code]
