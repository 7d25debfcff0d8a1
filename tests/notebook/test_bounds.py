"""json_size and RunBudget: pure units."""

from __future__ import annotations

import json
import time

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_notebook, new_output

from kernel_agent.notebook.bounds import MAX_COUNT, RunBudget, json_size, sane_count

VALUES = [
    "",
    "plain",
    'quote " and backslash \\',
    "control \x01\x1b and é and 😀",
    {"a": [1, 2.5, None, True, {"b": "c"}], "d": {}},
    [[[[]]]],
    {"k" * 10: ["v"] * 10},
    10**30,
    -7,
]


@pytest.mark.parametrize("value", VALUES, ids=range(len(VALUES)))
def test_json_size_is_at_least_the_json_encoding(value: object) -> None:
    assert json_size(value) >= len(json.dumps(value, separators=(",", ":")))
    assert json_size(value) >= len(json.dumps(value, ensure_ascii=False).encode())


def test_json_size_is_an_upper_bound_of_the_notebook_nbformat_writes() -> None:
    # newlines become one list item each: the per-line overhead is counted
    for text in ("line\n" * 10_000, "\n" * 10_000, "x" * 10_000, "\x01\n" * 5000):
        output = new_output("stream", name="stdout", text=text)
        bare = nbformat.writes(new_notebook(cells=[new_code_cell(outputs=[])]))
        full = nbformat.writes(new_notebook(cells=[new_code_cell(outputs=[output])]))
        assert json_size(output) >= len(full.encode()) - len(bare.encode())


def test_json_size_stops_at_its_limit_on_huge_and_deep_values() -> None:
    deep: object = "x"
    for _ in range(100_000):  # deeper than any recursion limit
        deep = [deep]
    huge = {"m": ["y" * 1000] * 1_000_000, "n": "z" * 50_000_000}
    started = time.monotonic()
    assert json_size(huge, 10_000) > 10_000
    assert json_size([0] * 10_000_000, 10_000) > 10_000
    assert json_size(deep) > 200_000
    assert time.monotonic() - started < 2


def test_sane_counts() -> None:
    assert sane_count(0) == 0 and sane_count(MAX_COUNT) == MAX_COUNT
    for forged in (MAX_COUNT + 1, 10**30, -1, True, 1.0, "1", None):
        assert sane_count(forged) is None
    assert sane_count(10**30, 7) == 7


def test_run_budget_counts_what_is_charged() -> None:
    budget = RunBudget.for_outputs(1000)
    assert budget.left == 32_000
    budget.charge(30_000)
    budget.charge(5_000)
    assert budget.left == 0 and budget.spent == 35_000
