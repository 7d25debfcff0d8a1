"""asked_parts: the parts of a task that each ask for a number, held against an answer."""

from __future__ import annotations

import pytest

from kernel_agent.agent.asked_parts import missing_parts, number_parts

IRIS = (
    "In iris.data the columns are, in order: sepal length, sepal width, petal length, "
    "petal width. How many flowers have a petal width greater than 1.5 cm, and what is "
    "their mean sepal length?"
)
WORLD = "Which country had the largest population in 2020, and what was it?"


@pytest.mark.parametrize(
    ("task", "parts"),
    [
        (
            IRIS,
            [
                "How many flowers have a petal width greater than 1.5 cm",
                "what is their mean sepal length",
            ],
        ),
        (WORLD, ["what was it"]),
        (
            "How many primes are there below 10000, and what is their sum?",
            ["How many primes are there below 10000", "what is their sum"],
        ),
        (
            "What percentage of male students failed once? Which school is larger?",
            ["What percentage of male students failed once"],
        ),
        ("Which region sold the most units?", []),  # a label: no number owed
        ("What is the name of the team with most goals?", []),
        ("Give @mean[value] and @count[value]. How many rows?", []),  # slots have their own
    ],
)
def test_each_part_that_asks_for_a_number_is_found(task, parts):
    assert number_parts(task) == parts


def test_an_answer_with_fewer_numbers_than_parts_left_one_out():
    one = "The output of cell [2] is 6.5817 (flowers with petal width greater than 1.5 cm)."
    assert missing_parts(IRIS, one, {"6.5817"}) == number_parts(IRIS)  # [2], 1.5: not its own
    assert missing_parts(IRIS, "82 flowers; their mean sepal length is 6.5817.") == []
    assert missing_parts(WORLD, "China, with 1402112000 people.") == []
    assert missing_parts(WORLD, "China.") == ["what was it"]


def test_a_bare_yes_answers_no_question_that_asks_which_or_how_many():
    assert missing_parts(WORLD, "Yes") == ["what was it"]
    asked = "Is the mean above 5? What is the mean?"
    assert missing_parts(asked, "Yes, 5.6") == [] and missing_parts(asked, "Yes.") != []
    yes_no = "How many rows are there? Answer yes if more than 10."
    assert missing_parts(yes_no, "Yes") == ["How many rows are there"]  # still no count


def test_a_task_number_the_cells_printed_counts_as_the_answers_own():
    task = "How many groups are there, rounded to 3 decimal places?"
    assert missing_parts(task, "There are 3 groups.", {"3"}) == []
    assert missing_parts(task, "There are 3 groups.") == [task[:-1]]


def test_a_long_task_is_read_in_bounded_time():
    task = ("how many " * 50_000) + "?"
    assert len(number_parts(task)) <= 250
