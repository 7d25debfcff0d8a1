"""day_as_weekday: a day-of-month column compared with weekday numbers (pure; the lever
with a real kernel: tests/agent/levers/test_pandas_pitfalls.py)."""

from __future__ import annotations

import pytest

from kernel_agent.agent.weekday import day_as_weekday

TASK = "The year is 1973. How many days fell on a Saturday or a Sunday?"


@pytest.mark.parametrize(
    "code",
    [
        "print(((df['Day'] == 6) | (df['Day'] == 7)).sum())",
        "print(df[df['Day'].isin([5, 6])].shape[0])",
        "print((df.Day >= 6).sum())",
    ],
)
def test_a_day_column_compared_with_weekday_numbers_is_noted(code):
    note = day_as_weekday(TASK, code, ["Ozone", "Month", "Day"])
    assert note is not None and "day of the month" in note
    assert "pd.to_datetime(dict(year=1973, month=df['Month'], day=df['Day']))" in note


@pytest.mark.parametrize(
    "code",
    [
        "d = pd.to_datetime(dict(year=1973, month=df.Month, day=df.Day))\n"
        "print((d.dt.dayofweek >= 5).sum())",
        "print(df['date'].dt.day_name().isin(['Saturday', 'Sunday']).sum())",
        "print(df['date'].dt.strftime('%a').isin(['Sat', 'Sun']).sum())",
        "print((df['Day'] > 15).sum())",  # not a weekday number
        "print((df['weekday'] == 'Saturday').sum())",  # a column of names, not day numbers
        "print(df['Day'] == ",  # not Python
    ],
)
def test_a_weekday_computed_or_no_day_number_compared_is_left_alone(code):
    assert day_as_weekday(TASK, code, ["Month", "Day"]) is None


def test_a_task_about_no_weekday_is_left_alone():
    task = "How many measurements were taken on day 6 of a month?"
    assert day_as_weekday(task, "print((df['Day'] == 6).sum())") is None


def test_the_note_corrects_the_cells_own_statement_with_the_days_the_task_names():
    """The bundled model sent a generic note's cell back unchanged; the note rewrites its
    own statement, each whole day comparison replaced by the weekday test."""
    code = (
        "df = pd.read_csv('a.csv')\n"
        "n = df[(df['Temp'] > 85) & ((df['Day'] == 6) | (df['Day'] == 7))].shape[0]\nprint(n)"
    )
    note = day_as_weekday(TASK, code, ["Month", "Day"])
    assert note is not None
    assert "n = df[(df['Temp'] > 85) & dates.dt.day_of_week.isin([5, 6])].shape[0]" in note
    monday = day_as_weekday("In 1973, how many Mondays?", "print((df.Day == 1).sum())")
    assert monday is not None and "print(dates.dt.day_of_week.isin([0]).sum())" in monday
