"""group_alignment: a groupby aggregate combined with a column of the same frame (pure;
the note on a real kernel: tests/agent/levers/test_pandas_pitfalls.py)."""

from __future__ import annotations

import pandas as pd
import pytest

from kernel_agent.agent.group_alignment import Misaligned, misaligned


@pytest.mark.parametrize(
    ("code", "found"),
    [
        ("t = df.groupby('order_id')['quantity'].sum() * df['item_price']\nprint(t.mean())",
         ("df", "'order_id'", "df['item_price']")),
        ("g = df.groupby('a').b.mean()\nprint(df['b'] - g)", ("df", "'a'", "df['b']")),
        ("print(df.price / df.groupby(['a', 'b'])['n'].count())", ("df", "['a', 'b']", "df.price")),
    ],
)  # fmt: skip
def test_a_group_aggregate_combined_with_a_column_is_found(code, found):
    hit = misaligned(code)
    assert hit is not None and (hit.frame, hit.key, hit.column) == found
    assert "pairs them by index label" in hit.note() and len(hit.note()) < 700


@pytest.mark.parametrize(
    "code",
    [
        "print(df['b'] / df.groupby('a')['b'].sum().sum())",  # a total of the totals: one number
        "print(df['b'] / df.groupby('a')['b'].transform('sum'))",  # one value per row
        "print(df.groupby('a')['b'].sum() / df.groupby('a')['c'].sum())",  # the same groups
        "print(df.groupby('a')['b'].sum() * 2)",
        "print(df.groupby('a')['b'].sum() * other['c'])",  # another frame's column
        "print(df['b'].map(df.groupby('a')['b'].sum()))",
        "t = df.groupby('a')['b'].sum() *",
    ],
)
def test_aligned_or_scalar_combinations_are_not(code):
    assert misaligned(code) is None


def test_what_the_note_warns_of_is_what_pandas_does():
    """The premise, on pandas itself: the per-order sums times the per-row prices pair
    order ids with row numbers, and the mean differs from the mean of the order totals."""
    df = pd.DataFrame({"order_id": [1, 1, 2, 3, 3, 3], "quantity": [1, 2, 1, 1, 1, 2],
                       "item_price": [2.0, 4.0, 5.0, 1.5, 1.0, 2.0]})  # fmt: skip
    wrong = (df.groupby("order_id")["quantity"].sum() * df["item_price"]).mean()
    right = df.assign(v=df["quantity"] * df["item_price"]).groupby("order_id")["v"].sum().mean()
    assert wrong != pytest.approx(right)
    assert isinstance(misaligned("df.groupby('order_id')['quantity'].sum() * df['item_price']"),
                      Misaligned)  # fmt: skip
