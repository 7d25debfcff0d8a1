"""rate_base: a share of a group divided by every row (pure; the note on a real kernel:
tests/agent/levers/test_pandas_pitfalls.py)."""

from __future__ import annotations

import pytest

from kernel_agent.agent.rate_base import whole_base

FEMALE = "What percentage of female passengers survived? Round to 1 decimal."


@pytest.mark.parametrize(
    ("task", "code", "subset"),
    [
        # the scratch run: female survivors out of every passenger
        (FEMALE, "p = (df[df['Sex'] == 'female']['Survived'].sum() / df['Survived'].count()) * 100",
         "df[df['Sex'] == 'female']"),
        (FEMALE, "f = df[df['Sex'] == 'female']\nprint(f['Survived'].sum() / len(df) * 100)",
         "df[df['Sex'] == 'female']"),
        (FEMALE, "print(len(df[(df.Sex == 'female') & (df.Survived == 1)]) / df.shape[0])",
         "df[df.Sex == 'female']"),
        ("What is the survival rate among males?", "print(df.loc[df.Sex == 'male', 'Survived'].sum() / df.Survived.size)",
         "df[df.Sex == 'male']"),
        # a one-letter code for the word (the scratch student file, 2026-12-08: 12.91 for 28.18)
        ("What percentage of male students have at least one past failure?",
         "m = df[(df['sex'] == 'M') & (df['failures'] >= 1)]\nprint(len(m) / len(df) * 100)",
         "df[df['sex'] == 'M']"),
    ],
)  # fmt: skip
def test_a_groups_share_out_of_every_row_is_found(task, code, subset):
    hit = whole_base(task, code)
    assert hit is not None and hit.subset == subset and hit.frame == "df"
    assert f"len({subset})" in hit.note() and len(hit.note()) < 700


@pytest.mark.parametrize(
    ("task", "code"),
    [
        (FEMALE, "f = df[df['Sex'] == 'female']\nprint(f['Survived'].sum() / len(f) * 100)"),
        (FEMALE, "print(df[df['Sex'] == 'female']['Survived'].mean() * 100)"),
        # the share of every passenger is what this task asks
        ("What percentage of passengers were female?", "print(len(df[df.Sex == 'female']) / len(df))"),
        ("What percentage of passengers were female survivors?",
         "print(len(df[(df.Sex == 'female') & (df.Survived == 1)]) / len(df))"),
        # no share asked
        ("How many female passengers survived?", "print(df[df.Sex == 'female'].Survived.sum() / 1)"),
        # another frame's rows
        (FEMALE, "print(df[df.Sex == 'female'].Survived.sum() / len(other))"),
        (FEMALE, "print(df[df.Sex == 'female'].Survived.sum() /"),
        # a one-letter code that starts no word the share is "of"
        ("What share of all students are male and failed?",
         "print(len(df[(df.sex == 'M') & (df.failures > 0)]) / len(df))"),
    ],
)  # fmt: skip
def test_a_share_out_of_the_groups_own_rows_or_of_every_row_asked_is_not(task, code):
    assert whole_base(task, code) is None
