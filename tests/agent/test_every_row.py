"""every_row_counted: a printed count that is every row of what the cell's condition read
(pure units on the cell, the task and the namespace summary; the lever with a real kernel:
tests/agent/levers/test_pandas_pitfalls.py)."""

from __future__ import annotations

from datetime import datetime, timezone

import pytest
from nbformat.v4 import new_output

from kernel_agent.agent.every_row import every_row_counted
from kernel_agent.kernel_state.namespace import VariableInfo
from kernel_agent.results import CellResult

NS = {
    "df": VariableInfo(
        "df",
        "DataFrame",
        shape="(397, 6)",
        columns=("rank", "salary", "Pulse"),
        counts=(397, 397, 192),
    ),
    "full": VariableInfo("full", "DataFrame", shape="(266, 6)"),
    "s": VariableInfo("s", "Series", shape="(397,)", dtype="float64", counts=(350,)),
    "tiny": VariableInfo("tiny", "DataFrame", shape="(4, 2)"),
    "fence": VariableInfo("fence", "float", value="47317.38"),
}
TASK = (
    "Among full professors, use the IQR rule on salary. How many are outliers?\n"
    "Give the final answer in this format: @outliers[count]"
)


def cell(code: str, printed: str) -> CellResult:
    now = datetime.now(timezone.utc)
    outputs = [new_output("stream", name="stdout", text=printed)]
    return CellResult(code, "ok", 1, outputs, None, now, now)


@pytest.mark.parametrize(
    ("code", "printed", "what"),
    [
        (  # the scratch run: precedence made the mask hold everywhere
            "n = sum(df['rank'].str.startswith('Prof') & df['salary'] < fence)\n"
            "print(f'@outliers[{n}]')",
            "@outliers[397]\n",
            "`df` has 397 rows",
        ),
        ("print(f'@outliers[{(full.salary > -1e9).sum()}]')", "@outliers[266]\n", "`full` has 266 rows"),
        ("n = s.isna().sum() + s.notna().sum()\nprint(f'@outliers[{n}]')", "@outliers[397]", "`s` has 397 rows"),
        ("n = len(df[df.salary.between(0, 1e9)])\nprint('@outliers[', n, ']')", "@outliers[ 397 ]", "`df` has 397 rows"),
        (  # the tuned half's z-score task: the z never computed, every Pulse counted
            "hi = df[df['Pulse'].abs() > 2.5]\nprint(f'Number of students: {len(hi)}')",
            "Number of students with a Pulse above 2.5 in absolute value: 192", "`df['Pulse']` has 192 values (not missing)",
        ),
        ("print(f'@outliers[{(s > s.mean() - 1e9).sum()}]')", "@outliers[350]", "`s` has 350 values"),
    ],
)  # fmt: skip
def test_a_count_of_every_row_under_a_condition_is_found(code, printed, what):
    found = every_row_counted("How many are outliers?", cell(code, printed), NS)
    assert found is not None and found.whole.said().startswith(what)
    assert f"printed {found.whole.count}, and {found.whole.said()}" in found.note()


def test_the_note_names_the_precedence_fix_when_that_was_the_slip():
    code = "n = sum(df['rank'].str.startswith('Prof') & df['salary'] < fence)\nprint(n)"
    found = every_row_counted("How many are outliers?", cell(code, "outliers: 397\n"), NS)
    assert found is not None and found.precedence is not None
    assert "df['rank'].str.startswith('Prof') & (df['salary'] < fence)" in found.note()
    no_slip = every_row_counted(TASK, cell("n = (s > -1)\nprint(f'@outliers[{n.sum()}]')",
                                           "@outliers[397]"), NS)  # fmt: skip
    assert (
        no_slip is not None and no_slip.precedence is None and "Python reads" not in no_slip.note()
    )


@pytest.mark.parametrize(
    ("task", "code", "printed"),
    [
        (TASK, "print(f'@outliers[{(full.salary > 1e5).sum()}]')", "@outliers[12]"),  # a part
        (TASK, "print(f'@outliers[{len(df)}]')", "@outliers[397]"),  # no condition counted
        (TASK, "print(f'@outliers[{(tiny.a > 0).sum()}]')", "@outliers[4]"),  # too few rows
        ("What is the mean salary?", "print((df.salary > 0).sum())", "count: 397"),  # no count asked
        (TASK, "print(f'rows: {len(df)}')\nprint((df.salary > 1e5).sum())", "rows: 397\n@outliers[9]"),
        ("How many are outliers?", "print('shape', df[df.salary > 0].shape[0])", "shape: 397"),
        (TASK, "print(f'@other[{(df.salary > 0).sum()}]')", "@other[397]"),  # a slot not asked
        (TASK, "print(df[df.salary >", "@outliers[397]"),  # not Python
        (TASK, "print(f'@outliers[{df.Pulse.notna().sum()}]')", "@outliers[192]"),  # missingness asked
        (TASK, "print(f'@outliers[{(ghost.x > 0).sum()}]')", "@outliers[397]"),  # not in the kernel
    ],
)  # fmt: skip
def test_counts_of_a_part_sizes_and_other_tasks_are_not_questioned(task, code, printed):
    assert every_row_counted(task, cell(code, printed), NS) is None


def test_the_values_there_counted_for_the_missing_ones_are_found():
    """The tuned half's riots task: the ages there, counted for the people with none."""
    code = "n = df['Pulse'].dropna().count()\nprint(f'@no_pulse[{n}]')"
    asked = "How many students have no Pulse recorded? Answer as @no_pulse[count]"
    found = every_row_counted(asked, cell(code, "@no_pulse[192]"), NS)
    assert found is not None and found.present and "`df['Pulse'].isna().sum()`" in found.note()
    right = every_row_counted(asked, cell(code, "@no_pulse[205]"), NS)  # what isna() gives
    assert right is None
    for task in (
        "How many students have a Pulse? Answer as @no_pulse[count]",  # not about missing
        "How many rows are left after dropping the missing Pulse values? @no_pulse[count]",
    ):
        assert every_row_counted(task, cell(code, "@no_pulse[192]"), NS) is None
