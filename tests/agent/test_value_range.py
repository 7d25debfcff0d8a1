"""value_range: a mean, median or extreme stated outside the values it was taken of (pure
units on the code, the kernel's reported ranges and the answer; the lever with a real
kernel: tests/agent/levers/test_pandas_pitfalls.py)."""

from __future__ import annotations

import json
from datetime import datetime, timezone

import pytest

from kernel_agent.agent.value_range import (
    ColumnRange,
    out_of_range,
    range_note,
    range_probe,
    ranges_of,
)
from kernel_agent.results import CellResult

MEAN = "What is the mean rating in percent, rounded to 2 decimals?"
RATING = {("df", "Rating"): ColumnRange("df", "Rating", 38.0, 99.0)}
SURVIVED = {("df", "Survived"): ColumnRange("df", "Survived", 0.0, 1.0)}


@pytest.mark.parametrize(
    ("code", "columns"),
    [
        ("print(df['Rating'].mean() * 100)", ["df['Rating']"]),
        ("m = df[df['Make'] == 'X']['Price'].median()", ["df['Price']"]),
        ("print(df.groupby('Make')['mpg'].max().idxmax())", ["df['mpg']"]),
        ("import numpy as np\nprint(np.mean(cars['Price']), np.nanmedian(cars['Price']))",
         ["cars['Price']"]),
        ("print(df['a'].std(), (df['a'] - df['b']).mean(), df.mean())", []),  # not a column's
        ("print(df['a'].mean(", []),  # does not parse
    ],
)  # fmt: skip
def test_the_probe_asks_the_range_of_each_column_a_mean_is_taken_of(code, columns):
    probe = range_probe(MEAN, code)
    assert len(probe) == len(columns)
    for expression, column in zip(probe.values(), columns, strict=True):
        frame, name = column.split("[")
        assert f"]({frame}, {name[:-1]})" in expression  # the frame's name, the column's repr


def test_no_probe_for_a_task_about_a_difference_or_no_mean():
    for task in ("What is the difference between the mean ratings?", "How many rows?"):
        assert range_probe(task, "print(df['Rating'].mean())") == {}


def _cell(code: str, *answers: object) -> CellResult:
    now = datetime.now(timezone.utc)
    expressions = {
        f"ka_range_{i}": {"status": "ok", "data": {"text/plain": repr(json.dumps(a))}}
        for i, a in enumerate(answers)
    }
    return CellResult(code, "ok", 1, [], None, now, now, user_expressions=expressions)


def test_the_kernels_ranges_are_read_and_a_forged_answer_is_none():
    code = "print(df['a'].mean(), df['b'].max(), df['c'].min(), df['d'].median())"
    cell = _cell(code, [1, 5.5], "1e400", [3, 2], [0, float("inf")])
    assert ranges_of(cell) == [ColumnRange("df", "a", 1.0, 5.5)]


@pytest.mark.parametrize(
    ("task", "answer", "ranges"),
    [
        (MEAN, "The mean rating in percent is 7256.00.", RATING),  # a percentage made twice
        ("What is the average price?", "@mean[1.2e+300]", {
            ("d", "Price"): ColumnRange("d", "Price", 100, 900)}),  # text summed
        ("Which make has the highest mean mpg?", "Citroën, 3304.0", {
            ("df", "mpg"): ColumnRange("df", "mpg", 18, 44)}),
    ],
)  # fmt: skip
def test_an_answer_outside_every_column_it_was_taken_of_is_found(task, answer, ranges):
    found = out_of_range(task, answer, ranges)
    assert found is not None
    note = range_note(*found)
    assert note.startswith("Note: the task asks for a mean") and found[0] in note


@pytest.mark.parametrize(
    ("task", "answer", "ranges"),
    [
        (MEAN, "The mean rating is 72.56%.", RATING),
        (MEAN, "The mean rating is 99.004.", RATING),  # rounded at an end
        ("What percentage of passengers survived (the mean of Survived)?", "38.38%", SURVIVED),
        ("How many cars, and their mean rating?", "61 cars, mean 72.5", RATING),  # one inside
        ("What is the mean rating? Use 1000 rows.", "1000", RATING),  # the task's own number
        ("What is the difference between the mean ratings?", "7256", RATING),  # derived
        ("What is the total rating?", "7256", RATING),  # not a mean
        (MEAN, "The mean is high.", RATING),  # no number
        (MEAN, "7256", {}),  # no range reported
    ],
)
def test_an_answer_inside_a_range_or_a_task_not_checked_is_not_questioned(task, answer, ranges):
    assert out_of_range(task, answer, ranges) is None
