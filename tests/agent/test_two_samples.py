"""columns_for_groups: an independent two-sample test given two columns of one frame where
the task compares one column between groups (pure; the lever with a real kernel:
tests/agent/levers/test_pandas_pitfalls.py)."""

from __future__ import annotations

import pytest

from kernel_agent.agent.two_samples import columns_for_groups, kept_by_test

TASK = (
    "Compare Delta 15 N (o/oo) between the islands Dream and Torgersen with Welch's t-test. "
    "Is the difference significant at alpha = 0.05?"
)


@pytest.mark.parametrize(
    "code",
    [
        "stats.ttest_ind(d['Delta 15 N (o/oo)'], d['Flipper Length (mm)'], equal_var=False)",
        "ttest_ind(d['a'].dropna(), d['b'].dropna())",
        "scipy.stats.mannwhitneyu(d.loc[:, 'a'], d.loc[:, 'b'])",
        "stats.ttest_ind(d['a'].values, d['b'].astype(float))",
    ],
)
def test_two_columns_of_one_frame_for_groups_are_noted(code):
    note = columns_for_groups(TASK, code)
    assert note is not None and "two columns of d" in note and "group_column" in note


@pytest.mark.parametrize(
    "code",
    [
        "stats.ttest_ind(dream['Delta'], torgersen['Delta'], equal_var=False)",  # two groups
        "stats.ttest_ind(d.loc[d.Island == 'Dream', 'x'], d.loc[d.Island == 'Torgersen', 'x'])",
        "stats.ttest_rel(d['before'], d['after'])",  # paired: two columns is right
        "stats.ttest_ind(d['a'], d['a'])",
        "stats.ttest_ind(a, b)",
        "stats.ttest_ind(d['a'],",  # not Python
    ],
)
def test_groups_as_rows_a_paired_test_or_unknown_samples_are_left_alone(code):
    assert columns_for_groups(TASK, code) is None


@pytest.mark.parametrize(
    "task",
    [
        "Is there a correlation between a and b?",  # no two-sample test
        "Run a paired t-test between the before and after columns.",
        "Welch's t-test of a against b: significant?",  # no 'between'
        "Is the difference between the means of a and b significant (Welch's t-test)?",
    ],
)
def test_a_task_that_compares_no_groups_is_left_alone(task):
    assert columns_for_groups(task, "stats.ttest_ind(d['a'], d['b'])") is None


def test_the_note_runs_the_test_on_each_group_through_the_cells_own_filter():
    """The bundled model sent a generic note's cell back unchanged; where its code selects
    one of the groups the task names by a filter, the note writes that filter once with
    each group, and the test on the measure the task names."""
    code = (
        "d = df[(df['Species'] == 'Adelie') & (df['Island'] == 'Dream')]\n"
        "t, p = stats.ttest_ind(d['Flipper'], d['Delta 15 N (o/oo)'], equal_var=False)"
    )
    note = columns_for_groups(TASK, code)
    assert note is not None
    assert (
        "x = df[(df['Species'] == 'Adelie') & (df['Island'] == 'Dream')]"
        "['Delta 15 N (o/oo)'].dropna()\n"
        "y = df[(df['Species'] == 'Adelie') & (df['Island'] == 'Torgersen')]"
        "['Delta 15 N (o/oo)'].dropna()\n"
        "result = stats.ttest_ind(x, y, equal_var=False)"
    ) in note


def test_the_names_that_keep_the_tests_result_are_those_assigned_from_it():
    code = (
        "t, p = stats.ttest_ind(d['a'], d['b'])\np_rounded = round(p, 4)\n"
        "verdict = 'significant' if p_rounded < 0.05 else 'not'\nother = d['a'].mean()"
    )
    assert kept_by_test(code) == {"t", "p", "p_rounded", "verdict"}
