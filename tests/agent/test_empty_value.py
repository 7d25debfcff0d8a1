"""empty_value: a value printed for the answer that is missing or empty (pure units on the
cell and the task; the lever with a real kernel: tests/agent/levers/test_pandas_pitfalls.py)."""

from __future__ import annotations

from datetime import datetime, timezone

import pytest
from nbformat.v4 import new_output

from kernel_agent.agent.empty_value import empty_note, empty_value
from kernel_agent.results import CellResult

TASK = "What is the correlation? Give the final answer in this format: @corr[value] @n[count]"


def printed(text: str) -> CellResult:
    now = datetime.now(timezone.utc)
    outputs = [new_output("stream", name="stdout", text=text)]
    return CellResult("print(x)", "ok", 1, outputs, None, now, now)


@pytest.mark.parametrize(
    ("task", "text", "label"),
    [
        (TASK, "@corr[nan] @n[0]\n", "@corr[...]"),
        (TASK, "@n[12]\n@corr[np.float64(nan)]\n", "@corr[...]"),
        (TASK, "@corr[<NA>]", "@corr[...]"),
        ("Which rows match?", "matches: Series([], Name: x, dtype: float64)", "`matches`"),
        ("Which rows match?", "result: Empty DataFrame", "`result`"),
        ("Which day had the most deaths?", "busiest day: NaT\n", "`busiest_day`"),
        ("What is the mean age of the others?", "mean age = None\n", "`mean_age`"),
        # a blank in an asked slot: a space counted as the most common letter (2026-12-07)
        ("Which letter occurs most often? @letter[name]", "@letter[ ]\n", "@letter[...]"),
        ("Which letter occurs most often? @letter[name]", "@letter['']\n", "@letter[...]"),
        # a sentence ending in no value: pearsonr over a column with gaps (scratch, 2026-12-07)
        (
            "What is the Pearson correlation between wait and rating?",
            "The Pearson correlation between wait and rating is nan\n",
            "`The Pearson correlation between wait and rating`",
        ),
        ("When was the peak?", "The peak day was NaT.\n", "`The peak day`"),
        ("What is the Pearson correlation?", "nan\n", "the cell's output"),  # printed alone
        ("What is the correlation?", "Correlation: nan, P-value: nan\n", "`Correlation`"),
        ("What is the correlation?", "n = 40; r = NaN\n", "`r`"),
        ("What is the mean?", "np.float64(nan)", "the cell's output"),
        ("What is the mean?", "Mean of the column equals np.float64(nan)", "`Mean of the column`"),
    ],
)
def test_a_missing_or_empty_value_for_the_answer_is_found(task, text, label):
    assert empty_value(task, printed(text)) == label
    assert empty_note(label).startswith(f"Note: {label} printed no value")


@pytest.mark.parametrize(
    ("task", "text"),
    [
        (TASK, "@corr[0.42] @n[0]"),  # a zero is a value
        (TASK, "@other[nan]\n@corr[0.1]"),  # not an asked slot
        (TASK, "corr    nan\nName: x"),  # a table's line, not a printed value
        ("What is the mean?", "mean: 3.5\nnanny: 2"),
        ("How many names start with N?", "names: Nancy, Nate"),
        ("What is the mean?", "Results:\nmean: 3.5"),  # a label heading what follows
        ("What is the mean?", "The mean is 3.5 and the spread is not nan"),  # words after
        ("Which names are there?", "The first name is Nan"),  # a name, not a missing value
        ("Which names are there?", "Nan\n"),  # a name alone
        ("What is the mean?", "nan\n3.5\n"),  # not alone
        ("What is the mean?", "mean: 3.5, note: nanny\n"),
        (TASK, "The correlation is nan"),  # slots asked: only the slots are read
    ],
)
def test_values_and_values_not_asked_are_not_questioned(task, text):
    assert empty_value(task, printed(text)) is None
