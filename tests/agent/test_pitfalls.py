"""The pandas pitfalls' detectors, pure units on the code's ast and the namespace: a shown
idxmax() of a row-numbered variable, a shown len() of a mask, a fraction for a percentage,
another statistic, a normality verdict read backwards, a bin edge. (The lever and the loop:
tests/agent/levers/test_pandas_pitfalls.py.)"""

from __future__ import annotations

from datetime import datetime, timezone

import pytest
from nbformat.v4 import new_output

from kernel_agent.agent.pitfalls import (
    all_rows_counts,
    asked_column,
    cut_edges,
    date_for_period,
    fraction_for_percentage,
    group_statistic_mismatch,
    method_mismatch,
    normality_reversed,
    row_label_calls,
    rows_for_one_value,
    shown_names,
    slot_holds_many,
)
from kernel_agent.kernel_state.namespace import VariableInfo
from kernel_agent.results import CellResult

NS = {
    "df": VariableInfo("df", "DataFrame", columns=("state", "murder"), row_numbers=True),
    "rolling": VariableInfo("rolling", "Series", row_numbers=True),
    "by_state": VariableInfo("by_state", "Series"),  # indexed by a named key
    "mask": VariableInfo("mask", "Series", row_numbers=True, dtype="bool"),
    "values": VariableInfo("values", "Series", row_numbers=True, dtype="float64"),
}


@pytest.mark.parametrize(
    "code",
    [
        "best = df['murder'].idxmax()\nv = df.loc[best, 'murder']\nprint(f'@state[{best}]', v)",
        "year = rolling.idxmax() + 1\nprint(year)",
        "print(df.murder.idxmin())",
        "print('state:', df[['murder']].idxmax())",
    ],
)
def test_a_shown_row_number_is_found(code):
    assert row_label_calls(code, NS)


@pytest.mark.parametrize(
    "code",
    [
        "print(df.loc[df['murder'].idxmax(), 'state'])",  # looked up: what the note asks for
        "i = df['murder'].idxmax()\nprint(df.loc[i, 'state'], df.at[i, 'murder'])",
        "print(by_state.idxmax())",  # a named index: the label is the key
        "print(df.groupby('state')['murder'].mean().idxmax())",  # not a variable's index
        "print(unknown.idxmax())",
        "print(df['murder'].idxmax(",  # not Python
    ],
)
def test_a_label_used_to_look_up_or_a_real_key_is_left_alone(code):
    assert row_label_calls(code, NS) == []


@pytest.mark.parametrize(
    ("code", "call"),
    [
        ("n = len(mask)\nprint('outliers:', n)", "len(mask)"),
        ("print(mask.count())", "mask.count()"),
        ("len(mask)", "len(mask)"),
    ],
)
def test_a_shown_count_of_a_whole_mask_is_found(code, call):
    assert [found[:2] for found in all_rows_counts(code, NS)] == [(call, "mask")]


@pytest.mark.parametrize(
    "code",
    [
        "print(mask.sum())",
        "print(len(df[mask]))",
        "print(len(values), values.count())",  # not a mask
        "n = len(mask)\nprint(df.iloc[:n])",  # used to select, not shown
    ],
)
def test_a_count_of_true_rows_or_of_a_non_mask_is_left_alone(code):
    assert all_rows_counts(code, NS) == []


@pytest.mark.parametrize(
    ("task", "column"),
    [
        ("In which year was the change largest?", "year"),
        ("Which State has the highest murder rate?", "state"),
        ("Which month had the most units?", "<column>"),  # no such column
        ("What is the mean murder rate?", "<column>"),  # no "which"/"what" + a column
    ],
)
def test_the_note_names_the_column_the_task_asks_for(task, column):
    assert asked_column(task, ("state", "murder", "year")) == column


def test_a_kept_noted_value_shown_again_is_found_unless_assigned_anew():
    kept = {"best"}
    assert shown_names("print(f'@state[{best}]')", kept) == ["best"]
    assert shown_names("print(df.loc[best, 'state'])", kept) == []
    assert shown_names("best = df.loc[best, 'state']\nprint(best)", kept) == []
    assert shown_names("print(best)", set()) == []


def _printed(text: str) -> CellResult:
    now = datetime.now(timezone.utc)
    return CellResult("print(x)", "ok", 1, [new_output("stream", name="stdout", text=text)],
                      None, now, now)  # fmt: skip


SHARE = (
    "Which class has the highest survival rate, and what is that rate as a percentage?\n"
    "Give the final answer in this format: @pclass[integer] @rate[value]"
)


@pytest.mark.parametrize(
    ("task", "printed", "found"),
    [
        (SHARE, "@pclass[1] @rate[0.45]\n", ("rate", "0.45")),
        (SHARE, "@pclass[1] @rate[45.16]\n", None),  # already a percentage
        (SHARE, "@pclass[1] @rate[0.45%]\n", None),  # said to be a percentage
        ("What percentage of women had an affair?", "percent: 0.3225\n", ("percent", "0.3225")),
        ("What percentage of women had an affair?", "mean: 0.3225\n", None),  # not labelled
        ("By what percentage change did the close move?\n@c[value]", "@c[0.15]\n", None),
        ("Daily returns as a fraction, as a percentage too?\n@r[value]", "@r[0.01]\n", None),
    ],
)
def test_a_fraction_printed_for_an_asked_percentage_is_found(task, printed, found):
    assert fraction_for_percentage(task, _printed(printed)) == found


VOTES = "What is Coderre's share of all votes?\nGive the final answer in this format: "


def _reprs() -> dict[str, str]:
    """What pandas and numpy really print (not reprs typed here)."""
    import numpy as np
    import pandas as pd

    shares = pd.Series([33.83, 39.68, 38.71, 19.2])
    return {
        "series": str(shares),
        "named": str(pd.Series([1.5, 2.5], index=["a", "b"], name="share")),
        "long": str(pd.Series(np.arange(100.0))),  # cut with "..." and a Length footer
        "frame": str(pd.DataFrame({"d": ["x", "y"], "share": [1.0, 2.0]})),
        "big": str(pd.DataFrame({"share": np.arange(70.0)})),
        "array": str(np.array([33.83, 39.68, 38.71])),
        "list": str([1, 2, 3]),
        "one": str(shares.sum()),
        "label": "Joly",
    }


@pytest.mark.parametrize(
    ("placeholder", "printed", "count"),
    [
        ("value", "series", 4),
        ("value", "named", 2),
        ("value", "long", 100),  # pandas shows 10 of the 100, and says 100
        ("float", "frame", 3),  # the header line and two rows
        ("float", "big", 70),  # pandas says how many rows it cut
        ("value", "array", 3),
        ("integer", "list", 3),
        # one value, or a slot that asks several: nothing to note
        ("value", "one", 0),
        ("name", "label", 0),
        ("value", "2012-01-01", 0),  # one date, one number with its separators, an exponent
        ("value", "1,234,567", 0),
        ("value", "1.2E-05", 0),
        ("value", "(1.2, 3.4)", 0),
        ("comma-separated list", "series", 0),
        ("values", "array", 0),
    ],
)
def test_many_values_in_a_slot_that_asks_one_are_found(placeholder, printed, count):
    text = _reprs().get(printed, printed)
    found = slot_holds_many(VOTES + f"@share[{placeholder}]", _printed(f"@share[{text}]\n"))
    assert (found[1] if found else 0) == count, (text, found)
    # another slot's values, or the slot in the task only: nothing
    assert slot_holds_many(VOTES + "@share[value]", _printed(f"@other[{text}]\n")) is None


@pytest.mark.parametrize(
    ("task", "code", "says"),
    [
        ("Pearson correlation of a and b?", "df['a'].corr(df['b'], method='spearman')", "Pearson"),
        ("Pearson correlation of a and b?", "df['a'].corr(df['b'])", ""),
        ("Spearman and Pearson correlations?", "df.a.corr(df.b, method='spearman')", ""),
        ("Spearman rank correlation of a and b?", "df['a'].corr(df['b'])", "Spearman"),
        ("Spearman rank correlation?", "stats.spearmanr(df.a, df.b)", ""),
        ("Run Welch's t-test", "stats.ttest_ind(a, b)", "equal_var=False"),
        ("t-test with unequal variances", "stats.ttest_ind(a, b, equal_var=False)", ""),
    ],
)
def test_a_statistic_other_than_the_asked_one_is_named(task, code, says):
    note = method_mismatch(task, code)
    assert (says in note) if says else note == ""


LARGEST_MEAN = "Which island has the largest mean Flipper Length (mm), rounded to 2 decimals?"


@pytest.mark.parametrize(
    ("task", "code", "says"),
    [
        # the tuned half's cell, and shapes of it the fix was not written for
        (LARGEST_MEAN, "m = df.groupby('Island')['Flipper Length (mm)'].max()", "each group's max"),
        (  # words are not code: a comment and a label that say "mean" compute none
            LARGEST_MEAN,
            "# the mean Flipper Length per island\nm = df.groupby('Island')['F'].max()\n"
            "print(f'largest mean: {m.max():.2f}')",
            "computed no mean",
        ),
        (LARGEST_MEAN, "df.groupby(['Island', 'Sex']).agg('sum')", "each group's sum"),
        ("Lowest average price by region?", "x = df.groupby('r').price.min().idxmin()", "min"),
        ("Median salary per department?", "df.groupby('dept')['salary'].mean()", "no median"),
        ("Mean score per class?", "df.groupby('c')['s'].transform('count')", "count"),
        (  # a dict and a named aggregation; the corrected statement keeps the rest
            LARGEST_MEAN,
            "df.groupby('Island').agg({'F': 'max', 'Island': 'count'})",
            "agg({'F': 'mean', 'Island': 'count'})",
        ),
        (LARGEST_MEAN, "df.groupby('Island').agg(top=('F', 'max'))", "agg(top=('F', 'mean'))"),
        # a mean is computed somewhere, or none is asked, or both are: no note
        (LARGEST_MEAN, "m = df.groupby('Island')['Flipper Length (mm)'].mean()", ""),
        (LARGEST_MEAN, "g = df.groupby('Island')['F'].agg(['mean', 'max'])", ""),
        (LARGEST_MEAN, "df.groupby('Island').describe()", ""),
        (LARGEST_MEAN, "df.groupby('Island')['F'].agg(np.mean).max()", ""),
        ("Which island has the longest flipper?", "df.groupby('Island')['F'].max()", ""),
        ("Mean and median age per class?", "df.groupby('c')['age'].max()", ""),
        ("Median salary per department?", "df.groupby('dept')['salary'].quantile(0.5)", ""),
        (LARGEST_MEAN, "df['F'].max()", ""),  # no groups
        (LARGEST_MEAN, "df.groupby('Island'", ""),  # not Python
    ],
)
def test_a_group_statistic_other_than_the_asked_one_is_named(task, code, says):
    note = group_statistic_mismatch(task, code)
    assert (says in note) if says else note == ""


AGES = "Label each as child (under 18), adult (18 to 59) or senior (60 and over)."


@pytest.mark.parametrize(
    ("task", "code", "edge"),
    [
        (AGES, "df['g'] = pd.cut(df['Age'], bins=[0, 18, 60, np.inf], labels=l)", "18"),
        (AGES, "g = pd.cut(df.Age, [0, 17.5, 60, 120])", "60"),  # 60 and over: 60 is an edge
        (AGES, "g = pd.cut(df.Age, [0, 18, 60, np.inf], right=False)", ""),
        (AGES, "g = pd.cut(df.Age, [0, 17, 59, 120])", ""),  # right edges 17 and 59: right
        (AGES, "g = pd.cut(df.Age, bins=4)", ""),  # no edges written
        ("Ages 18 or younger are minors.", "g = pd.cut(df.Age, [0, 18, 99])", ""),
        (
            "Incomes below 1000.5 are low; 5000+ are high.",
            "cut(x, (0, 1000.5, 5000, 1e9))",
            "1000.5",
        ),
        ("Group under 30 and 30 and over", "g = df.Age.between(0, 30)", ""),
    ],
)
def test_a_bin_edge_the_task_bounds_in_the_wrong_bin_is_noted(task, code, edge):
    note = cut_edges(task, code)
    assert (f"exactly {edge} " in note and "right=False" in note) if edge else note == ""


NORMAL = "Run a Shapiro-Wilk test on x. Is it normally distributed at the 0.05 level (yes/no)?"
SHAPIRO = "w, p = stats.shapiro(df['x'])\n"


@pytest.mark.parametrize(
    ("task", "code", "printed", "noted"),
    [
        (NORMAL, SHAPIRO + "print(f'@normal[{p < 0.05}]')", "@normal[True]\n", True),
        (NORMAL, SHAPIRO + "print('normal:', p_value <= alpha)", "normal: False\n", True),
        (NORMAL, SHAPIRO + "print('normal:', p >= 0.05)", "normal: True\n", False),
        (NORMAL, SHAPIRO + "print('yes' if p > 0.05 else 'no')", "@normal[no]\n", False),
        (NORMAL, SHAPIRO + "a = 'no' if p < 0.05 else 'yes'\nprint(a)", "@normal[no]\n", False),
        (
            "Is the t-test significant (yes/no)?",
            "t, p = stats.ttest_ind(a, b)\nprint('sig:', p < 0.05)",
            "sig: True\n",
            False,
        ),
    ],
)
def test_a_normality_verdict_printed_as_p_below_the_level_is_noted(task, code, printed, noted):
    cell = _printed(printed)
    cell.code = code
    assert normality_reversed(task, cell) is noted


SERIES = (
    "Total Revenue: 0      104568.84\n1      104568.84\n         ...    \n404    104568.84\n"
    "Name: Quantity Ordered, Length: 405, dtype: float64\n"
)


def _printed(text: str) -> CellResult:
    now = datetime.now(timezone.utc)
    return CellResult("print(x)", "ok", 1, [new_output("stream", name="stdout", text=text)],
                      None, now, now)  # fmt: skip


@pytest.mark.parametrize(
    ("task", "text", "rows"),
    [
        ("What is the total revenue (quantity times price, summed over all orders)?", SERIES, 405),
        ("Compute the average price.", SERIES, 405),
        ("What is the total revenue per month?", SERIES, None),  # one per group
        ("Which month had the highest total?", SERIES, None),
        ("What is the total revenue?", SERIES.replace("405", "12"), None),  # a short table
        ("What is the total revenue?", "104568.84\n", None),
        ("What is the total? @total[value]", SERIES, None),  # slots: slot_holds_many's
    ],
)
def test_a_row_wise_series_printed_for_one_total_is_found(task, text, rows):
    assert rows_for_one_value(task, _printed(text)) == rows


@pytest.mark.parametrize(
    ("task", "code", "printed", "found"),
    [
        # the scratch TMDB run: grouped by the date, answered the busiest day's year
        ("In which release year were the most movies released?",
         "g = df.groupby('release_date').size()\nprint(g.idxmax())", "2005-04-25 00:00:00",
         ("year", "2005-04-25 00:00:00")),
        ("Which month had the most sales?", "print(df['d'].value_counts().idxmax())",
         "2019-03-02", ("month", "2019-03-02")),
        ("In which year were the most movies released?",
         "print(df.groupby(df['d'].dt.year).size().idxmax())", "2013", None),
        ("In which year were the most movies released?",
         "df['year'] = df['d'].dt.year\nprint(df.groupby('year').size().idxmax())", "2013", None),
        ("Which day had the most sales?", "print(df.groupby('d').size().idxmax())",
         "2019-03-02", None),  # a day asked: a date is right
        ("In which year were most movies released?", "print(df['d'].max())", "2019-03-02",
         None),  # nothing grouped
    ],
)  # fmt: skip
def test_a_full_date_printed_for_a_year_or_month_from_groups_of_days(task, code, printed, found):
    now = datetime.now(timezone.utc)
    outputs = [new_output("stream", name="stdout", text=printed + "\n")]
    assert date_for_period(task, CellResult(code, "ok", 1, outputs, None, now, now)) == found
