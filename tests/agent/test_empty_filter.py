"""empty_filter: each condition the cell tested a column against literals on, evaluated
again and held against the empty or zero result the cell printed. The probe's expressions
are evaluated here by Python itself, on real pandas objects, as the kernel evaluates them;
the lever in the loop on a real kernel: tests/agent/levers/test_pandas_pitfalls.py."""

from __future__ import annotations

import json
from datetime import datetime, timezone

import numpy as np
import pandas as pd
import pytest
from nbformat.v4 import new_output

from kernel_agent.agent.empty_filter import empty_filter, filter_probe, refiltered
from kernel_agent.results import CellResult

NOW = datetime.now(timezone.utc)
WIND = pd.DataFrame(
    {
        "Yr": np.repeat(np.arange(61, 79), 10),
        "RPT": np.linspace(2.0, 35.0, 180),
        "loc": ["SHA", "DUB", "CLA", " ROS", None] * 36,
        "day": pd.date_range("1961-01-01", periods=180),
    }
)


def ran(code: str, printed: str, namespace: dict | None = None) -> CellResult:
    """``code`` as a cell that printed ``printed``, with the answers to its probe evaluated
    in ``namespace`` the way a kernel evaluates user_expressions."""
    answers = {}
    for key, expression in filter_probe(code).items():
        value = eval(expression, dict(namespace or {"df": WIND, "pd": pd}))  # noqa: S307 (the test is the kernel)
        answers[key] = {"status": "ok", "data": {"text/plain": repr(value)}}
    outputs = [new_output("stream", name="stdout", text=printed)]
    return CellResult(code, "ok", 1, outputs, None, NOW, NOW, user_expressions=answers)


def noted(code: str, printed: str, namespace: dict | None = None) -> str | None:
    found = empty_filter(ran(code, printed, namespace))
    return found.note() if found else None


def test_a_year_written_with_four_digits_on_a_two_digit_column_is_told_the_range():
    code = "n = ((df['Yr'] == 1965) & (df['RPT'] > 20)).sum()\nprint(f'@days[{n}]')"
    note = noted(code, "@days[0]\n")
    assert note is not None and "no row meets `df['Yr'] == 1965` (0 of 180 rows)" in note
    assert "`df['Yr']` holds numbers from 61 to 78" in note
    assert "Rows do meet `df['Yr'] == 65`: the data writes the value so" in note


@pytest.mark.parametrize("held", [np.arange(1, 32), np.arange(1, 13), np.arange(1, 29) * 1.0])
def test_a_column_of_days_or_months_is_not_taken_for_two_digit_years(held):
    # "in 2019" on a column of days: 19 is a day, not the year (seen on a Netflix file)
    frame = pd.DataFrame({"day": np.resize(held, 180), "RPT": np.linspace(2.0, 35.0, 180)})
    code = "n = (frame['day'] == 2019).sum()\nprint(f'@titles[{n}]')"
    note = noted(code, "@titles[0]\n", {"frame": frame, "pd": pd})
    assert note is not None and "no row meets `frame['day'] == 2019`" in note
    assert "Rows do meet" not in note and f"from 1 to {int(held.max())}" in note


def test_a_value_spelt_otherwise_is_told_with_the_values_spelt_like_it():
    code = "sub = df[df['loc'] == 'ros']\nprint(sub['RPT'].corr(sub['Yr']))"
    note = noted(code, "nan\n")
    assert note is not None and "`df['loc']` holds the values 'SHA', 'DUB'" in note
    assert "36 missing values" in note and "spelt like the value asked: ' ROS'" in note
    assert "Rows do meet `df['loc'] == ' ROS'`" in note


def test_without_a_spelling_rows_meet_the_note_says_what_to_look_for():
    note = noted("print(df[df['Yr'] > 2100]['RPT'].mean())", "nan\n")
    assert note is not None and "Rows do meet" not in note and "two-digit year" in note
    note = noted("print((df['loc'] == 'Galway').sum())", "0\n")
    assert note is not None and "Rows do meet" not in note and "spelt like" not in note


@pytest.mark.parametrize(
    ("code", "instead", "expected"),
    [
        ("n = ((df['Yr'] == 1965) & (df.RPT > 20)).sum()\nprint(n)",
         {"df['Yr'] == 1965": "df['Yr'] == 65"},
         "n = ((df['Yr'] == 65) & (df.RPT > 20)).sum()\nprint(n)"),
        ("a = df[df['loc'] == 'ros']; b = df[df['loc']  ==  'ros']\n",
         {"df['loc'] == 'ros'": "df['loc'] == ' ROS'"},
         "a = df[df['loc'] == ' ROS']; b = df[df['loc'] == ' ROS']\n"),
        ("print('é', (df['Yr'] == 1965).sum())", {"df['Yr'] == 1965": "df['Yr'] == 65"},
         "print('é', (df['Yr'] == 65).sum())"),
        ("print((df['Yr'] == 1966).sum())", {"df['Yr'] == 1965": "df['Yr'] == 65"}, None),
        ("print((df['Yr'] ==\n 1965).sum())", {"df['Yr'] == 1965": "df['Yr'] == 65"}, None),
        ("print((df['Yr'] == 1965).sum()", {"df['Yr'] == 1965": "df['Yr'] == 65"}, None),
    ],
)  # fmt: skip
def test_a_condition_sent_again_is_written_as_the_data_writes_its_value(code, instead, expected):
    assert refiltered(code, instead) == expected


@pytest.mark.parametrize(
    ("code", "printed"),
    [
        ("print(df[df.Yr.isin([1961, 1962])]['RPT'].mean())", "nan"),
        ("print(len(df[df['RPT'].between(100, 200)]))", "0"),
        ("print(df.loc[df['loc'].str.contains('Shannon'), 'RPT'].sum())", "0.0"),
        ("print(df[df['day'] > '1999-01-01'])", "Empty DataFrame\nColumns: [Yr]\nIndex: []"),
        ("print(df[-5 > df['RPT']].shape[0])", "Count: 0"),
    ],
)
def test_every_kind_of_test_on_a_literal_is_probed(code, printed):
    assert noted(code, printed) is not None


@pytest.mark.parametrize(
    ("code", "printed"),
    [
        # the condition holds for some rows: the zero is the conjunction's, maybe the answer
        ("print(((df['Yr'] == 65) & (df['RPT'] > 30)).sum())", "0"),
        # no row meets it, but the cell printed a result that is not empty
        ("print(len(df), (df['Yr'] == 1965).sum(), df['RPT'].mean())", "180 0 18.5"),
        # a column against a column, and a column against a computed value: not literals
        ("print((df['Yr'] > df['RPT'] * 100).sum())", "0"),
        ("print((df['RPT'] > df['RPT'].max()).sum())", "0"),
    ],
)
def test_no_note_where_a_condition_holds_or_nothing_printed_is_empty(code, printed):
    assert noted(code, printed) is None


@pytest.mark.parametrize(
    "code",
    [
        "print((df.pop('Yr') == 1965).sum())",  # a call that changes the frame
        "print((load()['Yr'] == 1965).sum())",  # any function
        "print((df.__dict__['Yr'] == 1965).sum())",  # a private attribute
        "print(((df := df.head())['Yr'] == 1965).sum())",  # an assignment
        "print((df['Yr'] == 1965).sum()",  # not Python
    ],
)
def test_an_expression_with_side_effects_is_never_sent_back(code):
    assert filter_probe(code) == {}


def test_the_probe_tests_at_most_three_conditions_of_bounded_length():
    code = "\n".join(
        [f"print((df['{'f' * 400}'] == 1).sum())"]
        + [f"print((df['{c}'] == 1).sum())" for c in "abcd"]
    )
    probe = filter_probe(code)
    assert len(probe) == 3 and not any("f" * 400 in e for e in probe.values())


def test_the_kernel_side_skips_what_is_not_a_mask_of_one_series():
    """A frame, a scalar, a mask of another length or type answer None; a mask some rows
    meet answers only its count."""
    ns = {"df": WIND, "x": 3, "frame": WIND[["Yr"]]}
    for code in ["print(x == 3)", "print(frame == 3)", "print(df['loc'].str.len() == 'a')"]:
        for expression in filter_probe(code).values():
            answer = json.loads(eval(expression, dict(ns)))  # noqa: S307
            assert answer is None or answer["hits"] >= 0, code
    (expression,) = filter_probe("print((df['Yr'] == 61).sum())").values()
    assert json.loads(eval(expression, dict(ns))) == {"n": 180, "hits": 10}  # noqa: S307


@pytest.mark.parametrize(
    "answer",
    [
        None,
        "not json",
        json.dumps([1, 2]),
        json.dumps({"n": 5, "hits": 0}),  # no kind
        json.dumps({"n": 5, "hits": 0, "missing": 9, "kind": "number", "low": 1, "high": 2}),
        json.dumps({"n": True, "hits": 0, "missing": 0, "kind": "number", "low": 1, "high": 2}),
        json.dumps({"n": 5, "hits": 0, "missing": 0, "kind": "number", "low": "1", "high": 2}),
        '{"n": 5, "hits": 0, "missing": 0, "kind": "number", "low": 1, "high": Infinity}',
        json.dumps({"n": 5, "hits": 0, "missing": 0, "kind": "text", "distinct": 2,
                    "values": ["a" * 41], "near": []}),
        json.dumps({"n": 5, "hits": 0, "missing": 0, "kind": "text", "distinct": 9,
                    "values": ["a"] * 9, "near": []}),
        json.dumps({"n": 5, "hits": 0, "missing": 0, "kind": "date", "low": 3, "high": "x"}),
        json.dumps({"n": 5, "hits": 0, "missing": 0, "kind": "number", "low": 1, "high": 2,
                    "pad": "x" * 5_000}),
        "[" * 100_000,
    ],
)  # fmt: skip
def test_a_forged_answer_from_the_kernel_gives_no_note(answer):
    code = "print((df['Yr'] == 1965).sum())"
    bundle = {"status": "ok", "data": {"text/plain": repr(answer)}}
    outputs = [new_output("stream", name="stdout", text="0")]
    cell = CellResult(
        code, "ok", 1, outputs, None, NOW, NOW, user_expressions={"empty_filter_0": bundle}
    )
    assert empty_filter(cell) is None


@pytest.mark.parametrize(
    ("code", "instead"),
    [
        ("print((df['Yr'] == 1965).sum())", 1),  # not the year's two digits
        ("print((df['Yr'] == 1965).sum())", True),
        ("print((df['Yr'] == 1965).sum())", "65"),
        ("print((df['Yr'] == 1865).sum())", 65),  # no year of 19xx or 20xx
        ("print((df['loc'] == 'ros').sum())", "ros; import os"),  # not the same word
        ("print((df['loc'] == 'ros').sum())", "ros"),  # the same text
        ("print((df['loc'] == 'ros').sum())", " ROS" * 20),  # too long
        ("print(df['loc'].isin(['ros']).sum())", " ROS"),  # no single compared literal
    ],
)
def test_the_kernel_cannot_make_a_condition_the_host_would_not_write(code, instead):
    """The kernel answers the spelling; the host takes it only where it is the rule's own
    (a year's last two digits, the same text in another case or with spaces)."""
    answer = {"n": 5, "hits": 0, "missing": 0, "kind": "number", "low": 1, "high": 2}
    if isinstance(instead, str):
        answer = {"n": 5, "hits": 0, "missing": 0, "kind": "text", "distinct": 1,
                  "values": ["x"], "near": []}  # fmt: skip
    bundle = {
        "status": "ok",
        "data": {"text/plain": repr(json.dumps({**answer, "instead": instead}))},
    }
    outputs = [new_output("stream", name="stdout", text="0")]
    cell = CellResult(
        code, "ok", 1, outputs, None, NOW, NOW, user_expressions={"empty_filter_0": bundle}
    )
    found = empty_filter(cell)
    assert found is not None and found.instead is None
