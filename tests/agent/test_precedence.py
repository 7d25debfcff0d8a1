"""precedence_slip: conditions combined against Python's precedence, read from the ast and
given back as written, as read and as meant (pure units)."""

from __future__ import annotations

import ast

import pytest

from kernel_agent.agent.precedence import precedence_slip


@pytest.mark.parametrize(
    ("code", "read", "meant"),
    [
        (  # the scratch run's count of every row
            "n = sum(df['rank'].str.startswith('Prof') & df['salary'] < fence)",
            "(df['rank'].str.startswith('Prof') & df['salary']) < fence",
            "df['rank'].str.startswith('Prof') & (df['salary'] < fence)",
        ),
        ("x = s < lo | hi", "s < (lo | hi)", "(s < lo) | hi"),
        ("d = df[df.a > 1 & df.b < 2]", "df.a > (1 & df.b) < 2", "(df.a > 1) & (df.b < 2)"),
        ("print((s >= q | s <= r).sum())", "s >= (q | s) <= r", "(s >= q) | (s <= r)"),
    ],
)
def test_a_bitwise_operator_inside_a_comparison_is_read_and_mended(code, read, meant):
    slip = precedence_slip(code)
    assert slip is not None and slip.read == read and slip.meant == meant
    assert f"`{meant}`" in slip.sentence() and f"`{read}`" in slip.sentence()
    ast.parse(slip.meant)  # the fix is Python


def test_and_between_masks_becomes_an_ampersand_with_each_side_in_parentheses():
    slip = precedence_slip("d = df[(df.a > 1) and (df.b < 2) or (df.c == 3)]")
    assert slip is not None and slip.read is None
    assert slip.meant in ("(df.a > 1) & (df.b < 2) | (df.c == 3)", "(df.a > 1) & (df.b < 2)")
    assert "`&` and `|`" in slip.sentence()


@pytest.mark.parametrize(
    "code",
    [
        "d = df[(df.a > 1) & (df.b < 2)]",  # written as meant
        "print((s < lo) | (s > hi))",
        "flags = x & 1",  # no comparison
        "y = 3 + 4 < z",  # not a bitwise operator
        "if a in b and c:\n    pass",  # not comparisons throughout
        "print(df[df.a > 1 &",  # not Python
    ],
)
def test_conditions_written_as_meant_are_no_slip(code):
    assert precedence_slip(code) is None


def test_quoted_code_is_bounded_whatever_the_cells_length():
    long = " & ".join(f"df['c{i}']" for i in range(300))
    slip = precedence_slip(f"n = ({long} < 3).sum()")
    assert slip is not None
    assert max(len(slip.written), len(slip.read or ""), len(slip.meant)) <= 100
