"""slot_kind: a number with a fraction in a slot whose placeholder asks a count (pure; the
lever with a real kernel: tests/agent/levers/test_pandas_pitfalls.py)."""

from __future__ import annotations

import pytest

from kernel_agent.agent.slot_kind import count_slots, not_a_count

TASK = "How many are outliers? Give the final answer in this format: @outliers[count] @fence[value]"


@pytest.mark.parametrize(
    ("task", "slots"),
    [
        (TASK, {"outliers"}),
        ("@n[number of rows] @days[integer] @x[value] @k[n]", {"n", "days", "k"}),
        ("@rows[row_count] @mean[mean_value] @name[name]", {"rows"}),
        ("What is the mean? @mean[value]", set()),
    ],
)
def test_count_slots_are_those_whose_placeholder_asks_a_whole_number(task, slots):
    assert count_slots(task) == slots


@pytest.mark.parametrize(
    ("text", "found"),
    [
        ("@outliers[166.14] @fence[3]", ("outliers", "166.14")),
        ("@outliers[0.5]", ("outliers", "0.5")),
        ("@outliers[12]", None),
        ("@outliers[12.0]", None),  # a whole number written as a float
        ("@outliers[1,234]", None),
        ("@fence[166.14]", None),  # a slot that asks a value
        ("@outliers[nan]", None),  # the empty-value note's, not this one's
        ("@outliers[many]", None),
        ("@outliers[0." + "1" * 100 + "]", None),  # too long to quote back
    ],
)
def test_a_fraction_in_a_count_slot_is_found_and_nothing_else_is(text, found):
    wrong = not_a_count(TASK, text)
    assert (None if wrong is None else (wrong.slot, wrong.value)) == found
    if wrong is not None:
        assert "@outliers[...]" in wrong.note() and "whole number" in wrong.note()
