"""preview_label: an answer that names a label only the data preview's first rows show
(pure units; the lever with a real kernel: tests/agent/levers/test_pandas_pitfalls.py)."""

from __future__ import annotations

from datetime import datetime, timezone

import pytest
from nbformat.v4 import new_output

from kernel_agent.agent.preview_label import preview_label, preview_label_note
from kernel_agent.kernel_state.preview_facts import FileFacts
from kernel_agent.results import CellResult

FACTS = {"s.csv": FileFacts(columns=("Shop", "Sales"), shown=("Shop 00", "Shop 01", "Shop 02"))}
MAX_ONLY = "df = pd.read_csv('s.csv')\nprint(df['Sales'].max())"


def cell(code: str, printed: str = "", status: str = "ok") -> CellResult:
    now = datetime.now(timezone.utc)
    outputs = [new_output("stream", name="stdout", text=printed)] if printed else []
    return CellResult(code, status, 1, outputs, None, now, now)


@pytest.mark.parametrize(
    ("task", "answer", "cells", "found"),
    [
        ("Which shop sold most?", "It is Shop 02.", [cell(MAX_ONLY, "89303")], "Shop 02"),
        ("Which shop sold most?", "It is shop 02.", [cell(MAX_ONLY, "89303")], "Shop 02"),
        ("Which shop sold most?", "It is Shop 12.", [cell(MAX_ONLY, "89303")], None),
        ("Which shop sold most?", "It is Shop 02.", [cell(MAX_ONLY, "Shop 02  89303")], None),
        ("What did Shop 02 sell?", "Shop 02 sold 88186.", [cell(MAX_ONLY, "88186")], None),
        # the code names it: a row selected by it
        ("Which shop sold most?", "Shop 02", [cell("print(df[df.Shop == 'Shop 02'])", "x")], None),
        # printed only by a failed cell: not shown
        ("Which shop sold most?", "Shop 02", [cell(MAX_ONLY, "Shop 02", "error")], "Shop 02"),
        ("Which shop sold most?", "It is Shop 020.", [cell(MAX_ONLY, "1")], None),  # a word
    ],
)
def test_a_label_of_the_previews_rows_no_cell_showed_is_found(task, answer, cells, found):
    assert preview_label(task, answer, cells, FACTS) == found


@pytest.mark.parametrize(
    "date", ["April 30, 1992", "30 Apr 1992", "1992-04-30", "4/30/92", "12:30"]
)
def test_a_date_of_the_rows_is_not_a_label(date):
    """The held-out riots run (2026-12-07): the cell printed 1992-04-30 and the answer wrote
    'April 30, 1992', as the preview's rows do; the answer was right, the check sent it back
    and the run lost it."""
    facts = {"r.csv": FileFacts(columns=("death_date",), shown=(date,))}
    answer = f"The most deaths were on {date}."
    assert preview_label("On which date?", answer, [cell("x", "1992-04-30")], facts) is None


def test_short_or_numeric_values_of_the_rows_are_not_labels():
    facts = {"s.csv": FileFacts(columns=("a",), shown=("No", "12", "1.5 L", "x" * 61))}
    assert preview_label("Which?", "No, 12, 1.5 L " + "x" * 61, [cell("", "")], facts) == "1.5 L"


def test_the_note_is_bounded_and_names_the_fix():
    note = preview_label_note("y" * 500)
    assert len(note) < 500 and "idxmax()" in note


@pytest.mark.parametrize(
    ("task", "example"),
    [
        ("Which female name has the highest total Count?", "groupby('label column')['value column'].sum().idxmax()"),
        ("Which shop has the highest average sales?", "groupby('label column')['value column'].mean().idxmax()"),
        ("Which shop has the highest sales?", "df.loc[df['value column'].idxmax()"),
    ],
)  # fmt: skip
def test_the_example_computes_a_group_total_or_mean_where_the_task_asks_one(task, example):
    """A scratch run (2026-12-07) followed the row example for a name's total count."""
    assert example in preview_label_note("Olivia", task)
