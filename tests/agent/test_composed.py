"""The final answer composed from the last cell's printed slots: the pure rule. (The
printed_answer lever in the loop: tests/agent/levers/test_printed_answer.py.)"""

from __future__ import annotations

from datetime import datetime, timezone

import pytest
from nbformat.v4 import new_output

from kernel_agent.agent.composed import compose_answer, printed_values
from kernel_agent.results import CellResult

NOW = datetime.now(timezone.utc)
TASK = (
    "Using the file macrodata.csv: Which year had the highest average unemp, and what was "
    "that average, rounded to 2 decimals?\n"
    "Give the final answer in this format: @year[integer] @mean_unemp[value]"
)


def ok(printed: str, code: str = "print(x)") -> CellResult:
    outputs = [new_output("stream", name="stdout", text=printed)] if printed else []
    return CellResult(code, "ok", 1, outputs, None, NOW, NOW)


def test_printed_values_reads_slots_and_labelled_lines() -> None:
    found = printed_values("@year[1982]\nmean unemp: 9.7\nn = 6\nnoise line 3\n")
    assert found == {"year": {"1982"}, "mean_unemp": {"9.7"}, "n": {"6"}}


@pytest.mark.parametrize(
    ("printed", "answer"),
    [
        ("@year[1982]\n@mean_unemp[9.70]\n", "@year[1982] @mean_unemp[9.70]"),
        ("year: 1982.0\nmean_unemp: 9.7033333\n", "@year[1982] @mean_unemp[9.70]"),
        ("year = np.int64(1982)\nmean_unemp = np.float64(9.7)\n", "@year[1982] @mean_unemp[9.7]"),
        ("@year[1982]\n", None),  # a slot not printed
        ("@year[1982]\n@mean_unemp[9.70]\n@mean_unemp[10.70]\n", None),  # two values
        ("@year[1982]\n@mean_unemp[nan]\n", None),
        ("@year[1982]\n@mean_unemp[value]\n", None),  # the placeholder, not a value
        ("year: 1982\nmean_unemp: [9.7, 10.7]\n", None),  # not one value
    ],
)
def test_compose_answer_only_from_one_clear_value_per_slot(printed, answer) -> None:
    cell = ok(printed)
    assert compose_answer(TASK, cell, [cell]) == answer


def test_a_printed_bool_is_said_in_the_words_the_task_asks_for() -> None:
    asked = (
        "Is the association significant at the 0.05 level (yes/no)?\n"
        "Give the final answer in this format: @chi2[value] @significant[yes/no]"
    )
    cell = ok("@chi2[48.8]\n@significant[True]\n")
    assert compose_answer(asked, cell, [cell]) == "@chi2[48.8] @significant[yes]"
    cell = ok("@chi2[1.2]\n@significant[False]\n")
    assert compose_answer(asked, cell, [cell]) == "@chi2[1.2] @significant[no]"
    as_bool = "Is it significant?\nGive the final answer in this format: @significant[true/false]"
    cell = ok("@significant[True]\n")
    assert compose_answer(as_bool, cell, [cell]) == "@significant[True]"  # as asked


def test_a_printed_midnight_timestamp_is_stated_as_its_date() -> None:
    """The synthetic held-out and follow-up tuned runs: a Timestamp printed in a slot
    ('2023-12-15 00:00:00') where a date was asked."""
    asked = (
        "On which date (YYYY-MM-DD) was the rolling mean highest, and what was it?\n"
        "Give the final answer in this format: @date[name] @rolling_mean[value]"
    )
    cell = ok("@date[2023-12-15 00:00:00]\n@rolling_mean[103.89]\n")
    assert compose_answer(asked, cell, [cell]) == "@date[2023-12-15] @rolling_mean[103.89]"
    cell = ok("@date[2023-12]\n@rolling_mean[103.89]\n")  # a month
    assert compose_answer(asked, cell, [cell]) == "@date[2023-12] @rolling_mean[103.89]"
    cell = ok("@date[2023-12-15 09:30:00]\n@rolling_mean[103.89]\n")  # a time of day
    assert compose_answer(asked, cell, [cell]) is None  # the model answers


def test_compose_needs_slots_a_successful_cell_one_rounding_and_a_plot_if_asked() -> None:
    printed = ok("@a[1.23456]\n@b[2.5]\n")
    assert compose_answer("What are a and b?", printed, [printed]) is None  # no slots asked
    failed = CellResult("x", "error", 1, printed.outputs, None, NOW, NOW)
    assert compose_answer("@a[value] @b[value]", failed, [failed]) is None
    mixed = "a to 2 decimal places, b to 4 decimal places. @a[value] @b[value]"
    assert compose_answer(mixed, printed, [printed]) is None  # which rounding is a's?
    assert compose_answer("a and b to 4 decimal places. @a[value] @b[value]", printed,
                          [printed]) == "@a[1.2346] @b[2.5]"  # fmt: skip
    plot = "Plot a histogram of a. @a[value] @b[value]"
    assert compose_answer(plot, printed, [printed]) is None  # no image yet
    image = CellResult(
        "plt.hist(a)", "ok", 1,
        [new_output("display_data", data={"image/png": "iVBORw0KGgo=", "text/plain": "<Figure>"})],
        None, NOW, NOW,
    )  # fmt: skip
    assert compose_answer(plot, printed, [image, printed]) == "@a[1.23456] @b[2.5]"


def test_values_typed_into_a_print_after_a_failure_are_not_composed_into_the_answer() -> None:
    failed = CellResult("x = df['a'].astype(int)", "error", 1, [], None, NOW, NOW)
    typed = ok("@year[1982]\n@mean_unemp[9.7]\n", "print('@year[1982]')\nprint('@mean_unemp[9.7]')")
    assert compose_answer(TASK, typed, [failed, typed]) is None  # the model answers, checked
    assert compose_answer(TASK, typed, [typed]) == "@year[1982] @mean_unemp[9.7]"  # no failure
    computed = ok("@year[1982]\n@mean_unemp[9.7]\n", "print(f'@year[{y}]')\nprint(m)")
    assert compose_answer(TASK, computed, [failed, computed]) == "@year[1982] @mean_unemp[9.7]"
