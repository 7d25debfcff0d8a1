"""A value printed for the answer that is no value: ``nan``, ``NaT``, ``<NA>``, an empty table.

The issue's hidden sets saw a correlation of ``nan`` reported as the answer, where a filter
had left nothing; small models restate what the cell printed. The composed answer already
refuses such a value (:mod:`.composed`), but the model's own answer did not: it wrote
"the correlation is nan". One check, whatever the statistic: a printed value for an
asked slot (or, with no slots asked, for a labelled line, a sentence that ends in the
value, or an output that is that value alone) that is missing or empty gets a
note saying what usually empties it and how to find the step. Pure.
"""

from __future__ import annotations

import re

from ..llm.view import render_cell
from ..results import CellResult
from .answers import FormatSpec
from .composed import printed_values
from .slots import quoted

__all__ = ["empty_note", "empty_value"]

#: how pandas and numpy print no value, and an empty Series or DataFrame
_NO_VALUE = re.compile(
    r"(?:np\.float64\()?(?:nan|NaT|<NA>|None)\)?|"
    r"Series\(\[\].*|Empty DataFrame.*",
    re.I,
)
#: an output that is no value and nothing else
_ALONE = re.compile(r"(?:np\.float64\()?(?:nan|NaN|NaT|<NA>)\)?")
#: one of several labelled values on a line that is no value: "Correlation: nan, P-value: nan"
_PAIR = re.compile(
    r"(?:^|[,;]\s*)(?P<label>[A-Za-z][\w .()-]{0,40}?)\s*[:=]\s*"
    r"(?:np\.float64\()?(?:nan|NaN|NaT|<NA>)\)?(?=\s*(?:[,;]|$))"
)
#: a sentence that ends in no value: "The correlation between a and b is nan."
_SENTENCE = re.compile(
    r"^\s*(?P<label>[A-Za-z][^\n]{2,160}?)\s+(?:is|are|was|were|of|equals)\s*:?\s*"
    r"(?:np\.float64\()?(?:nan|NaN|NaT|<NA>)\)?\s*\.?\s*$"
)


def empty_value(task: str, cell: CellResult) -> str | None:
    """The label (``@slot[...]`` or ``label``) of the first asked value ``cell`` printed
    as missing or empty, or None."""
    asked = set(FormatSpec.of(task).slots)
    for label, values in printed_values(render_cell(cell, budget=4000).text).items():
        if asked and label not in asked:
            continue
        if any(_no_value(value, blank=label in asked) for value in values):
            return quoted(label, slot=label in asked)
    if not asked:
        text = render_cell(cell, budget=4000).text
        if _ALONE.fullmatch(text.strip()):
            return "the cell's output"  # print(round(r, 2)) of a correlation over gaps
        for line in text.splitlines():
            if m := _SENTENCE.match(line) or _PAIR.search(line):
                return f"`{m.group('label').strip()[:80]}`"
    return None


def _no_value(printed: str, *, blank: bool) -> bool:
    """``printed`` is missing or empty: nan, an empty table, or (with ``blank``: in an asked
    slot, not after a label that may head a table) nothing but blanks, such as a space
    counted as the most common letter."""
    text = printed.strip().strip("'\"`")
    return (blank and not text) or _NO_VALUE.fullmatch(text) is not None


def empty_note(label: str) -> str:
    return (
        f"Note: {label} printed no value (nan, NaT, blank or empty), and that is not an answer: "
        "a blank is a space or an empty text the cell counted as a value; otherwise the "
        "values it came from are all missing, or a step before left none (a filter on a "
        "value spelt otherwise, a subset of another case, a merge or a groupby on keys that "
        "differ, a cast that made everything NaN), or one of them is: scipy's tests and "
        "correlations (pearsonr, ttest_ind...) and numpy give nan when any input is nan, so "
        "drop the rows missing a value in the columns used, together (df[[a, b]].dropna()). "
        "Print len() and .head() of each step, find the one that emptied it, and fix that step."
    )
