"""named_values: the groups a task names by a column's values, against the code's
constants (pure units; the lever's loop test is in levers/test_pandas_pitfalls.py)."""

from __future__ import annotations

import pytest

from kernel_agent.agent.named_values import omitted_values
from kernel_agent.kernel_state.preview_facts import FileFacts

FACTS = {
    "p.csv": FileFacts(
        columns=("Island", "Origin", "Sex"),
        values={
            "Island": ("Biscoe", "Dream", "Torgersen"),
            "Origin": ("USA", "non-USA"),
            "Sex": (".", "FEMALE", "MALE"),
        },
    )
}
TASK = "Compare Delta 15 N between the islands Dream and Torgersen (Dream first)."


def test_a_named_group_no_cell_selects_is_found():
    code = "d = df[df['Island'] == 'Dream']\nprint(d['a'].mean(), d['b'].mean())"
    assert omitted_values(TASK, [code], FACTS) == ("Island", ["Dream"], ["Torgersen"])


@pytest.mark.parametrize(
    "codes",
    [
        # both groups, however written
        ["a = df[df.Island == 'Dream']", "b = df[df.Island == 'Torgersen']"],
        ["two = df[df['Island'].isin(['Dream', 'Torgersen'])]"],
        ['print(f"{df.query(\'Island == \\"Dream\\" or Island == \\"Torgersen\\"\')}")'],
        # no value written: a groupby reaches every group
        ["print(df.groupby('Island')['a'].mean())"],
        # a negation may select the other group without naming it
        ["a = df[df.Island == 'Dream']", "b = df[df.Island != 'Dream']"],
        ["a = df[df.Island == 'Dream']", "b = df[~(df.Island == 'Dream')]"],
        # the value only in a comment is not written
        ["# Dream and Torgersen\nprint(df['a'].mean())"],
        # not Python
        ["d = df[df['Island'] == 'Dream'"],
    ],
)
def test_code_that_selects_every_named_group_or_may_is_left_alone(codes):
    assert omitted_values(TASK, codes, FACTS) is None


def test_values_only_as_the_column_holds_them_and_not_inside_a_written_one():
    # "dream" in lower case is not the value; one named value is no comparison
    assert omitted_values("Compare the dream islands and Torgersen.", ["x = 'Torgersen'"],
                          FACTS) is None  # fmt: skip
    # 'USA' is inside 'non-USA': the cell that writes one may mean both
    usa = "Compare MPG between USA and non-USA cars."
    assert omitted_values(usa, ["u = df[df.Origin == 'USA']"], FACTS) is None
    # a one-character value ('.') is no group a task names
    assert omitted_values("Sex is '.' or MALE.", ["m = 'MALE'"], FACTS) is None
