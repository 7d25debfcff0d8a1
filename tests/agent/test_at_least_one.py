"""at_least_one: rows with at least one of a thing counted as the column's sum (pure; the
note on a real kernel: tests/agent/levers/test_pandas_pitfalls.py)."""

from __future__ import annotations

import pytest

from kernel_agent.agent.at_least_one import summed_count

FAILURES = "What percentage of male students have at least one past failure?"


@pytest.mark.parametrize(
    ("task", "code", "total"),
    [
        # the scratch run: failures per student for the share of students with one
        (FAILURES, "m = df[df['sex'] == 'M']\nprint(m['failures'].sum() / len(m) * 100)",
         "m['failures'].sum()"),
        ("How many passengers had one or more siblings aboard (SibSp)?",
         "print(titanic.SibSp.sum())", "titanic.SibSp.sum()"),
        ("How many households have at least one child?", "print(h['children'].sum())",
         "h['children'].sum()"),
    ],
)  # fmt: skip
def test_a_summed_count_column_for_rows_with_at_least_one_is_found(task, code, total):
    hit = summed_count(task, code)
    assert hit is not None and hit.total == total
    assert f"({hit.frame}[{hit.column!r}] >= 1).sum()" in hit.note() and len(hit.note()) < 500


@pytest.mark.parametrize(
    ("task", "code"),
    [
        (FAILURES, "m = df[df['sex'] == 'M']\nprint((m['failures'] >= 1).mean() * 100)"),
        ("How many failures are there in total?", "print(df['failures'].sum())"),  # the sum asked
        (FAILURES, "print(df['absences'].sum())"),  # another column
        (FAILURES, "print(df['failures'].sum("),  # no Python
        ("How many students have at least one sibling?", "print(df['failures'].sum())"),
    ],
)  # fmt: skip
def test_a_count_of_rows_or_a_sum_the_task_asks_is_left_alone(task, code):
    assert summed_count(task, code) is None
