"""An answer that names a label only the data preview's first rows show.

"Which shop has the highest sales?": the bundled model printed the highest sales alone,
then named 'Shop 02', the third row of the preview, as the shop (scratch, 2026-12-07). A
number it states is checked against the outputs; a label was not. The preview's facts
list the text values of the rows it shows (``FileFacts.shown``): an answer that names one
that the task does not name and that no cell printed or wrote in its code read it off the
preview. Pure.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

from ..kernel_state.preview_facts import FileFacts
from ..llm.view import render_cell
from ..results import CellResult

__all__ = ["preview_label", "preview_label_note"]

#: a label of 3 to 60 characters with a letter
_LABEL = re.compile(r"(?=.*[^\W\d_]).{3,60}", re.S)
#: a date, which a cell prints in another form ('April 30, 1992' as 1992-04-30)
_DATE = re.compile(
    r"\d{1,4}[-/.]\d{1,2}[-/.]\d{1,4}|[A-Za-z]{3,9}\.? \d{1,2},? \d{2,4}|"
    r"\d{1,2}[ -][A-Za-z]{3,9}\.?[ -]\d{2,4}|\d:\d\d"
)


def preview_label(
    task: str, answer: str, cells: Sequence[CellResult], facts: Mapping[str, FileFacts]
) -> str | None:
    """The first label of the preview's rows that ``answer`` names and no cell showed."""
    shown = [
        v for f in facts.values() for v in f.shown if _LABEL.fullmatch(v) and not _DATE.search(v)
    ]
    named = [v for v in shown if _names(answer, v) and not _names(task, v)]
    if not named:
        return None
    seen = "\n".join(
        [cell.code for cell in cells] + [render_cell(c, budget=4000).text for c in cells if c.ok]
    ).lower()
    return next((v for v in named if v.lower() not in seen), None)


#: a task that asks for the label of a group's total or mean, not of one row
_GROUPED = {
    "sum": re.compile(r"\b(?:total|sum|in all|altogether|combined)\b", re.I),
    "mean": re.compile(r"\b(?:average|mean)\b", re.I),
}


def preview_label_note(label: str, task: str = "") -> str:
    """The note, with an example of the kind of computation the task asks: a group's total
    or mean ("Which female name has the highest total Count?": the row example led a scratch
    run, 2026-12-07, to the single largest row), else the largest row."""
    how = next((how for how, asked in _GROUPED.items() if asked.search(task)), "")
    example = (
        f"for the group with the largest {how}: "
        f"df.groupby('label column')['value column'].{how}().idxmax()"
        if how
        else "for the row with the largest value: "
        "df.loc[df['value column'].idxmax(), ['label column', 'value column']]"
    )
    return (
        f"Note: the answer names {label[:60]!r}, which no cell printed: only the first rows "
        "of the data preview show it. Compute what the task asks in a cell that prints the "
        f"label with its value ({example}), then answer with what that cell prints."
    )


def _names(text: str, label: str) -> bool:
    """``label`` is a word or phrase of ``text`` (any case)."""
    return re.search(rf"(?<!\w){re.escape(label)}(?!\w)", text, re.I) is not None
