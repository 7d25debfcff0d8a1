"""stated_rule: the task's outlier rule, recomputed on the series the cell named and held
against the count and fences it printed. The probe's expressions are evaluated here by
Python itself, on real pandas objects, as the kernel evaluates them; the lever in the
loop on a real kernel: tests/agent/levers/test_pandas_pitfalls.py."""

from __future__ import annotations

import json
from datetime import datetime, timezone

import numpy as np
import pandas as pd
import pytest
from nbformat.v4 import new_output

from kernel_agent.agent.stated_rule import Rule, recounts_of, rule_note, rule_probe, stated_rule
from kernel_agent.results import CellResult

IQR_TASK = (
    "Using the IQR rule on wind (below Q1 - 1.5*IQR or above Q3 + 1.5*IQR), how many days "
    "are outliers, and what is the lower fence, rounded to 2 decimal places?\n"
    "Give the final answer in this format: @outliers[count] @lower_fence[value]"
)
Z_TASK = (
    "How many students have a Pulse whose z-score is above 2.5 in absolute value (z from "
    "the mean and the population standard deviation, ddof=0, missing values dropped)?\n"
    "Give the final answer in this format: @outliers[count] @mean_pulse[value]"
)
RNG = np.random.default_rng(7)
WIND = pd.Series(np.r_[RNG.normal(10, 2, 200), [25.0, 27.5, 1e-9 - 5, np.nan, np.nan]])
DF = pd.DataFrame({"wind": WIND, "Pulse": WIND * 7, "day": range(len(WIND))})


def _iqr(s: pd.Series, k: float = 1.5) -> tuple[int, float, float]:
    s = s.dropna()
    q1, q3 = s.quantile(0.25), s.quantile(0.75)
    lo, hi = q1 - k * (q3 - q1), q3 + k * (q3 - q1)
    return int(((s < lo) | (s > hi)).sum()), lo, hi


def ran(code: str, printed: str, task: str, namespace: dict | None = None) -> CellResult:
    """``code`` as a cell that printed ``printed``, with the answers to the probe the
    rule asks, evaluated in ``namespace`` the way a kernel evaluates user_expressions."""
    now = datetime.now(timezone.utc)
    rule = stated_rule(task)
    assert rule is not None
    answers = {}
    for key, expression in rule_probe(rule, code).items():
        value = eval(expression, dict(namespace or {"df": DF, "pd": pd}))  # noqa: S307 (the test is the kernel)
        answers[key] = {"status": "ok", "data": {"text/plain": repr(value)}}
    outputs = [new_output("stream", name="stdout", text=printed)]
    return CellResult(code, "ok", 1, outputs, None, now, now, user_expressions=answers)


def noted(task: str, cell: CellResult) -> str | None:
    """The note on ``cell`` for ``task``'s rule, or None."""
    rule = stated_rule(task)
    assert rule is not None
    found = rule_note(task, rule, cell)
    return found.note if found else None


@pytest.mark.parametrize(
    ("task", "rule"),
    [
        (IQR_TASK, Rule("iqr", (1.5,))),
        ("How many outliers has x by the interquartile range rule?", Rule("iqr", (1.5,))),
        ("Count the extreme values of x: beyond 3 times the IQR from the quartiles.",
         Rule("iqr", (3.0,))),
        (Z_TASK, Rule("z", (2.5,), (0,))),
        ("How many rows have a z-score greater than 3 (sample standard deviation)?",
         Rule("z", (3.0,), (1,))),
        ("How many values lie more than 2 standard deviations from the mean?",
         Rule("z", (2.0,), (0, 1))),
    ],
)  # fmt: skip
def test_the_rule_is_read_from_the_task(task, rule):
    assert stated_rule(task) == rule


@pytest.mark.parametrize(
    "task",
    [
        "What is the IQR of wind, rounded to 2 decimal places?",  # no count asked
        "How many days had wind above 12 mph?",  # no rule stated
        "How many rows have a z-score that is high?",  # a z-score with no threshold
        "How many values of x lie outside the IQR?",  # the IQR, not an outlier rule
    ],
)
def test_no_rule_is_read_where_the_task_states_none(task):
    assert stated_rule(task) is None


def test_a_zero_printed_from_zscores_of_a_column_with_missing_values_gets_the_rule_as_code():
    """``stats.zscore`` of a column with NaN is all NaN, so the model printed 0; the rule
    recomputed on the column it named, missing dropped, gives the count, and the note says
    it with the code."""
    code = (
        "from scipy import stats\nz = stats.zscore(df['Pulse'])\n"
        "print(f'@outliers[{(abs(z) > 2.5).sum()}]')"
    )
    s = DF["Pulse"].dropna()
    expected = int((((s - s.mean()) / s.std(ddof=0)).abs() > 2.5).sum())
    note = noted(Z_TASK, ran(code, "@outliers[0]\n", Z_TASK))
    assert note is not None and expected > 0
    assert "@outliers[...] printed 0, but |z| > 2.5, on `df['Pulse']`" in note
    assert f"gives {expected}" in note and "s.std(ddof=0)" in note and "```python" in note


def test_a_count_the_rule_gives_is_left_alone_by_any_quantile_method_or_bound():
    count, lo, _ = _iqr(DF["wind"])
    code = "q1, q3 = df['wind'].quantile([0.25, 0.75])\nprint(q1, q3)"
    printed = f"@outliers[{count}] @lower_fence[{lo:.2f}]\n"
    assert noted(IQR_TASK, ran(code, printed, IQR_TASK)) is None
    inclusive = int(((DF["wind"] <= lo) | (DF["wind"] >= _iqr(DF["wind"])[2])).sum())
    assert noted(IQR_TASK, ran(code, f"@outliers[{inclusive}]", IQR_TASK)) is None


def test_a_count_of_another_series_is_noted_and_one_of_any_named_series_is_not():
    """The rule on the subset the cell computed it on; the count of the whole file is not
    one of its counts; with both named, either count stands."""
    sub = DF[DF["day"] < 100]
    count, _, _ = _iqr(sub["wind"])
    whole, _, _ = _iqr(DF["wind"])
    assert count != whole
    code = "sub = df[df['day'] < 100]\nq = sub['wind'].quantile([0.25, 0.75])\nprint(q)"
    ns = {"df": DF, "sub": sub, "pd": pd}
    note = noted(IQR_TASK, ran(code, f"@outliers[{whole}]", IQR_TASK, ns))
    assert note is not None and "on `sub['wind']`" in note and f"gives {count}" in note
    both = code + "\nprint(df['wind'].quantile(0.25))"
    assert noted(IQR_TASK, ran(both, f"@outliers[{whole}]", IQR_TASK, ns)) is None


def test_a_wrong_fence_is_noted_and_a_rounded_right_one_is_not():
    count, lo, hi = _iqr(DF["wind"])
    code = "q1 = df['wind'].quantile(0.25)\nq3 = df['wind'].quantile(0.75)"
    wrong = ran(code, f"@outliers[{count}] @lower_fence[{lo - 1:.2f}]", IQR_TASK)
    note = noted(IQR_TASK, wrong)
    assert note is not None and "@lower_fence[...] printed" in note and f"{lo:.4g}" in note
    assert noted(IQR_TASK, ran(code, f"@lower_fence[{lo:.1f}]", IQR_TASK)) is None


def test_a_count_found_by_a_condition_alone_is_held_against_the_column_it_reads():
    """No statistic in the cell: the rule runs on the column its condition compares."""
    code = "print(f\"@outliers[{(df['Pulse'].abs() > 2.5).sum()}]\")"
    note = noted(Z_TASK, ran(code, f"@outliers[{DF['Pulse'].count()}]", Z_TASK))
    assert note is not None and "on `df['Pulse']`" in note


@pytest.mark.parametrize(
    "code",
    [
        "print(df.pop('wind').quantile(0.25))",  # a call that changes the frame
        "print(load().quantile(0.25))",  # any function
        "print(df.__class__.quantile(0.25))",  # a private attribute
        "print((df := df.head()).quantile(0.25))",  # an assignment
        "print(_['wind'].quantile(0.25))",  # a private name
        "print(df['wind'].quantile(0.25)",  # not Python
    ],
)
def test_an_expression_with_side_effects_is_never_sent_back(code):
    assert rule_probe(stated_rule(IQR_TASK), code) == {}


def test_the_probe_names_at_most_three_series_of_bounded_length():
    names = ["f" * 400, "a", "b", "c", "d"]
    code = "\n".join(f"print(df['{name}'].quantile(0.5))" for name in names)
    probe = rule_probe(stated_rule(IQR_TASK), code)
    assert len(probe) == 3 and not any("f" * 400 in e for e in probe.values())
    assert all("df['a']" in e or "df['b']" in e or "df['c']" in e for e in probe.values())


@pytest.mark.parametrize(
    "answer",
    [
        None,
        "not json",
        json.dumps([1, 2]),
        json.dumps({"n": 5, "found": "x"}),
        json.dumps({"n": True, "found": [{"counts": [1], "fences": [0, 1]}]}),
        json.dumps({"n": 5, "found": [{"counts": [9], "fences": [0, 1]}]}),  # more than n
        json.dumps({"n": 5, "found": [{"counts": [1, 2, 3], "fences": [0, 1]}]}),
        json.dumps({"n": 5, "found": [{"counts": [1], "fences": [0, "1"]}]}),
        json.dumps({"n": 5, "found": [{"counts": [1], "fences": [0]}]}),
        json.dumps({"n": 5, "found": [{"counts": [1], "fences": [0, 1]}] * 21}),
        '{"n": 5, "found": [{"counts": [1], "fences": [0, Infinity]}]}',
        json.dumps({"n": 5, "found": [{"counts": [1], "fences": [0, 1]}], "pad": "x" * 30_000}),
        "[" * 100_000,
    ],
)
def test_a_forged_answer_from_the_kernel_gives_no_note(answer):
    code = "print(df['wind'].quantile(0.25))"
    now = datetime.now(timezone.utc)
    bundle = {"status": "ok", "data": {"text/plain": repr(answer)}}
    outputs = [new_output("stream", name="stdout", text="@outliers[3]")]
    cell = CellResult(
        code, "ok", 1, outputs, None, now, now, user_expressions={"stated_rule_0": bundle}
    )
    assert noted(IQR_TASK, cell) is None


def test_the_kernel_side_skips_what_is_not_one_numeric_series():
    """A frame of two columns, dates, a scalar and too few values answer None."""
    rule = stated_rule(IQR_TASK)
    ns = {
        "two": DF[["wind", "day"]],
        "dates": pd.Series(pd.date_range("2020-01-01", periods=30)),
        "one": 3.0,
        "few": pd.Series([1.0, None, 2.0]),
        "words": pd.Series(["a", "b", "c", "d"]),
    }
    for name in ns:
        (expression,) = rule_probe(rule, f"print({name}.quantile(0.5))").values()
        assert json.loads(eval(expression, dict(ns))) is None, name  # noqa: S307


def test_the_series_a_quantile_is_computed_on_comes_before_one_a_mean_is():
    """The note names the series the rule's own statistic read, not the one a mean of
    another column read first in the code."""
    code = (
        "print(df['Pulse'].mean())\nlo, hi = np.quantile(df['wind'], [0.25, 0.75])\n"
        "print(df['day'].quantile(0.5))"
    )
    probe = rule_probe(stated_rule(IQR_TASK), code)
    assert [("df['wind']" in e, "df['day']" in e, "df['Pulse']" in e) for e in probe.values()] == [
        (True, False, False), (False, True, False), (False, False, True)
    ]  # fmt: skip


def test_a_count_printed_by_a_cell_that_names_no_series_is_held_against_the_last_recount():
    """The model computed the fences on a column, then printed a count kept in a name (the
    held-out msleep run printed a sum of the column as the count): the recount of the
    cell that named the series is what the later count is held against."""
    fences = ran("q1, q3 = df['wind'].quantile(0.25), df['wind'].quantile(0.75)", "", IQR_TASK)
    later = ran("print(f'@outliers[{total}]')", "@outliers[13789]\n", IQR_TASK)
    rule = stated_rule(IQR_TASK)
    assert rule is not None and rule_note(IQR_TASK, rule, later) is None  # nothing to hold
    found = rule_note(IQR_TASK, rule, later, recounts_of(fences))
    assert found is not None and found.printed == "13789"
    assert f"gives {_iqr(DF['wind'])[0]}" in found.note and "on `df['wind']`" in found.note
    right = ran("print(f'@outliers[{n}]')", f"@outliers[{_iqr(DF['wind'])[0]}]\n", IQR_TASK)
    assert rule_note(IQR_TASK, rule, right, recounts_of(fences)) is None
