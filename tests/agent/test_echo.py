"""What counts as an echo of our own instructions: pure units of :func:`echo_share`.

(The ``prompt_echo`` lever and the loop: tests/agent/levers/test_prompt_echo.py.)
"""

from __future__ import annotations

from datetime import datetime, timezone

import pytest

from kernel_agent.agent.echo import WINDOW, echo_share
from kernel_agent.agent.state import TaskState
from kernel_agent.prompts import prompt, templates
from kernel_agent.results import CellError, CellResult

NOW = datetime.now(timezone.utc)
TASK = "What is the mean of column x in data.csv?"
HINT = "Hint: the name 'dff' is not defined; did you mean 'df'?"
PUSH = prompt("nudge_after_error")
#: the small model's reply seen in an eval: our push, cut short
SEEN = "The last cell failed, so the task is not done yet. Do not give up ..."


def failed(code: str = "print(dff.x.mean())") -> CellResult:
    error = CellError("NameError", "name 'dff' is not defined", [])
    return CellResult(code, "error", 1, [], error, NOW, NOW)


def pushed() -> TaskState:
    """A task whose last cell failed, after push_after_error's push with its hint."""
    return TaskState(TASK, cells=[failed()], told=[f"{PUSH}\n{HINT}"])


# ---------------------------------------------------------------- echo_share
@pytest.mark.parametrize(
    "answer",
    [
        PUSH,
        SEEN,
        f"{PUSH}\n{HINT}",  # the push with its hint: the hint is ours too, but not counted
        "The last cell failed, so the task is not done yet.",
        "do not give up and DO NOT ASK THE USER",  # shorter than the window: judged whole
        f"`{PUSH}` The mean is 4.2.",  # mostly our words
    ],
)
def test_an_answer_that_repeats_a_prompt_we_sent_is_an_echo(answer: str) -> None:
    st = pushed()
    assert echo_share(answer, st.told, [TASK, st.cells[0].code]) >= 0.5


@pytest.mark.parametrize(
    "answer",
    [
        "The final answer is 4.2.",  # a short phrase in common is not a run
        "The mean of x is 4.2, so that is the final answer.",
        "The last cell failed, so I could not compute the mean of x.",
        "Do not give up: the mean of column x is 4.2, from the 120 rows of data.csv after "
        "dropping the missing values, and the task is done.",
        HINT,  # the hint restated: no words of a prompt file
        "",
    ],
)
def test_an_answer_sharing_a_short_phrase_or_a_hint_is_not_an_echo(answer: str) -> None:
    st = pushed()
    assert echo_share(answer, st.told, [TASK, st.cells[0].code]) < 0.5


def test_a_prompt_counts_only_when_it_was_sent_in_the_task() -> None:
    other = prompt("nudge_no_code")
    assert echo_share(other, [f"{PUSH}\n{HINT}"], [TASK]) == 0.0, "not sent: the model's own"
    assert echo_share(other, [other], [TASK]) == 1.0
    assert echo_share(PUSH, [], [TASK]) == 0.0


def test_values_filled_into_a_prompt_are_not_our_words() -> None:
    printed = "year 1982 mean 9.70\nyear 1983 mean 9.60"
    check = prompt("answer_check", numbers="9.7", printed=printed)
    given = [TASK, "print(by_year)", printed]
    assert echo_share(f"The highest is 1982:\n{printed}", [check], given) == 0.0
    assert echo_share(check, [check], given) == 1.0, "the whole ask sent back"
    # the task's own words are the user's, even where they match a prompt of ours
    task = f"Explain this sentence: {PUSH}"
    assert echo_share(f"It says: {PUSH}", [PUSH], [task]) == 0.0


def test_every_prompt_file_with_a_long_fixed_part_is_caught() -> None:
    caught = []
    for name, template in templates().items():
        values = {k: f"<{k} value>" for k in ("error", "printed", "numbers", "problems")}
        sent = prompt(name, **values)
        fixed = [p for p in template.split("$") if len(p.strip()) >= 2 * WINDOW]
        if fixed:
            assert echo_share(sent, [sent], [TASK]) >= 0.5, name
            caught.append(name)
    assert {"nudge_after_error", "answer_check", "repeated_cell", "prompt_echo"} <= set(caught)


#: the preview the bundled model copied under a question of its own (2026-12-07)
PREVIEW = (
    "Files in the working directory (a preview; column names are exact):\n"
    "drinks.csv (555 B)\n  19 rows x 6 columns\n"
    "  columns: 'country' str, 'beer_servings' int64, 'continent' str\n"
    "  few distinct values: 'continent' 'AF', 'AS', 'EU', 'OC', 'SA'\n"
    "    country  beer_servings continent\n  0  Canada            339       NaN\n"
)


def test_the_preview_sent_with_the_task_is_ours_whole() -> None:
    """A made-up next turn (a question of the model's own, the preview under it) is not an
    answer; an answer that quotes a value or a column name of the preview is one."""
    task = "How many countries are in North America (continent code NA)?"
    made_up = f"How many countries are in Europe (continent code EU)?\n\n{PREVIEW}"
    assert echo_share(made_up, [PREVIEW], [task], [PREVIEW]) >= 0.5
    assert echo_share(made_up, [PREVIEW], [task]) == 0.0, "without it: values are not ours"
    for answer in (
        "There are 4 countries in North America: Canada, USA, Mexico and Cuba.",
        "The column 'beer_servings' has 19 rows; Canada has the most, 339.",
    ):
        assert echo_share(answer, [PREVIEW], [task], [PREVIEW]) < 0.5, answer
    # what a cell printed of the file is the cell's, even where the preview shows it too
    printed = PREVIEW.split("\n", 4)[-1]
    assert echo_share(printed, [PREVIEW], [task, printed], [PREVIEW]) == 0.0
