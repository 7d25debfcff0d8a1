"""What a cell's code says without running it (pure)."""

from __future__ import annotations

import pytest

from kernel_agent.agent.code_text import normalize_code, parse_python, typed_values_only


@pytest.mark.parametrize(
    "code",
    [
        "print(4.2)",
        "print('@days[' + str(0) + ']')\nprint('@start[2012-01-03]')",
        "print(f'@r[{0.348}]', sep='')",
        "# typed\nprint(round(3.14159, 2), -1)",
        "print(f'@d[' + str(5) + ']' + ' days')",
    ],
)
def test_prints_of_values_built_from_constants_are_typed(code: str) -> None:
    assert typed_values_only(code)


@pytest.mark.parametrize(
    "code",
    [
        "print(df['r'].mean())",
        "print(f'@r[{r:.3f}]')",
        "print('@n[' + str(len(df)) + ']')",
        "print(math.pi)",
        "print(abs(-3))",  # a call that computes: not a re-typing
        "print(365 + 1)",  # arithmetic on the task's numbers computes
        "print(round(22 / 7, 2))",
        "x = 4\nprint(4)",
        "print(*values)",
        "",
        "print(",  # not Python
    ],
)
def test_a_name_an_attribute_or_a_computing_call_is_not_typed(code: str) -> None:
    assert not typed_values_only(code)


def test_normalize_and_parse() -> None:
    assert normalize_code("a = 1\n\n   \nb = 2   \n") == "a = 1\nb = 2"
    assert parse_python("a = (") is None and parse_python("a = 1") is not None
