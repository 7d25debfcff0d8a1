"""Numbers in an answer vs numbers the cells printed (pure units)."""

from kernel_agent.agent.grounding import numbers_in, ungrounded_numbers


def test_numbers_are_canonical():
    assert numbers_in("1,307,674,368,000 and 2.50 and −4.5") == {"1307674368000", "2.5", "-4.5"}


def test_an_answer_with_a_typo_of_the_output_is_ungrounded():
    assert ungrounded_numbers("The sum is 255.", ["2550\n"]) == ["255"]


def test_roundings_task_numbers_and_small_counts_are_grounded():
    assert ungrounded_numbers("Pi is 3.14; the mean of 3 values is 10.5", ["3.14159\n10.5"]) == []
    assert (
        ungrounded_numbers("15! = 1307674368000", ["1307674368000"], given="What is 15 factorial?")
        == []
    )
