"""dated_filter: an ISO date condition written again on dates in ISO form (pure; on a real
kernel: tests/agent/levers/test_pandas_pitfalls.py)."""

from __future__ import annotations

import pandas as pd
import pytest

from kernel_agent.agent.dated_filter import dated_condition

US = {"date": "%m/%d/%Y"}


@pytest.mark.parametrize(
    ("condition", "column"),
    [
        ("df['date'].str.contains('2020-03')", "df['date']"),
        ("df['date'] == '2020-03-15'", "df['date']"),
        ("df.date.str.startswith('2020-03')", "df.date"),
    ],
)
def test_the_condition_runs_on_the_dates_in_iso_form_and_finds_the_rows(condition, column):
    fixed = dated_condition(condition, column, US)
    assert fixed is not None and "format='%m/%d/%Y').dt.strftime('%Y-%m-%d')" in fixed
    df = pd.DataFrame({"date": ["02/29/2020", "03/15/2020", "04/01/2020"]})
    assert eval(fixed, {"df": df, "pd": pd}).tolist() == [False, True, False]  # noqa: S307


@pytest.mark.parametrize(
    ("condition", "column", "dates"),
    [
        ("df['date'].str.contains('03/')", "df['date']", US),  # the data's own form
        ("df['date'].str.contains('2020-03')", "df['date']", {"date": "%Y-%m-%d"}),  # ISO
        ("df['date'].str.contains('2020-03')", "df['date']", {"date": "mixed"}),
        ("df['when'].str.contains('2020-03')", "df['when']", US),  # no format known
        ("df['date'].str.contains(", "df['date']", US),
    ],
)
def test_anything_else_is_left_alone(condition, column, dates):
    assert dated_condition(condition, column, dates) is None
