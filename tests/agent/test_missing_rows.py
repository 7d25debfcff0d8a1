"""one_column_missing: rows missing any value, counted in one column (pure; the lever with
a real kernel: tests/agent/levers/test_pandas_pitfalls.py)."""

from __future__ import annotations

import pytest

from kernel_agent.agent.missing_rows import one_column_missing

TASK = "How many days have at least one missing value? @incomplete_days[integer]"


@pytest.mark.parametrize(
    "task",
    [
        TASK,
        "How many rows have any missing value?",
        "Count the incomplete records.",
        "How many observations are not complete?",
        "How many rows are missing one or more fields?",
    ],
)
def test_one_columns_gaps_for_rows_missing_any_value_are_noted(task):
    note = one_column_missing(task, "n = df['Solar.R'].isna().sum()\nprint(n)")
    assert note is not None and "`df['Solar.R'].isna()`" in note
    assert "`df.isna().any(axis=1).sum()`" in note


@pytest.mark.parametrize(
    "code",
    [
        "print(df.isna().any(axis=1).sum())",
        "print(len(df) - len(df.dropna()))",
        "print(df[['Ozone', 'Solar.R']].isna().any(axis=1).sum())",
        "print((df.count(axis=1) < df.shape[1]).sum())",
        "print(df['Ozone'].isna().sum(), df.isnull().sum())",  # the frame's too
        "print(df['Ozone'].mean())",  # no missing values read
        "print(df['Ozone'].isna(",  # not Python
    ],
)
def test_a_count_across_the_row_or_no_count_of_gaps_is_left_alone(code):
    assert one_column_missing(TASK, code) is None


@pytest.mark.parametrize(
    "task",
    ["How many missing values does Ozone have?", "How many days have no Ozone recorded?"],
)
def test_a_task_about_one_columns_gaps_is_left_alone(task):
    assert one_column_missing(task, "print(df['Ozone'].isna().sum())") is None
