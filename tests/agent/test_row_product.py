"""row_product: ``X['a'] * X['b'].sum()`` written as the sum of the product (pure; the
lever on a real kernel: tests/agent/levers/test_pandas_pitfalls.py)."""

from __future__ import annotations

import pytest

from kernel_agent.agent.row_product import summed_product


@pytest.mark.parametrize(
    ("code", "fixed"),
    [
        ("t = df['q'] * df['p'].sum()", "t = (df['q'] * df['p']).sum()"),
        ("print(df.p.sum() * df.q)", "print((df.q * df.p).sum())"),
        ("x = 1\nprint(round(d['q'] * d['p'].sum(), 2))", "x = 1\nprint(round((d['q'] * d['p']).sum(), 2))"),
    ],
)  # fmt: skip
def test_a_column_times_another_columns_sum_is_the_sum_of_the_product(code, fixed):
    assert summed_product(code) == fixed


@pytest.mark.parametrize(
    "code",
    [
        "t = (df['q'] * df['p']).sum()",  # already the product's sum
        "t = a['q'] * b['p'].sum()",  # two frames: a share of another table's total
        "t = df['q'] * df['p'].sum(axis=1)",  # a sum with arguments
        "t = df['q'] + df['p'].sum()",  # not a product
        "t = 2 * df['p'].sum()",  # a number times a total
        "t = df['q'] * df['p'].mean()",  # a mean, not a total
        "t = df['q'] *",  # does not parse
        "t = df[0] * df[1].sum()",  # not columns by name
    ],
)
def test_anything_else_is_left_as_it_is(code):
    assert summed_product(code) is None
