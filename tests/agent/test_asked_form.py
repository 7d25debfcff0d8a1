"""asked_form: each value of the final answer in the form the task asks; then the loop
with a real kernel and the scripted model server (the answer the model wrote, and the one
composed from printed slots, both end in the asked form, and the transcript keeps what
was written)."""

from __future__ import annotations

import nbformat
import pytest
import scipy.stats
from fake_openai import run_cell, scripted_settings, text

from kernel_agent.agent import Agent
from kernel_agent.agent.asked_form import MAX_CHARS, in_asked_form

ISO = "On which date (YYYY-MM-DD) did the most deaths occur?"
MONTH = "In which month of 2015 (1-12) was the total precipitation largest?"
YEAR = "Which model year (as a four-digit year) has the highest mean mpg?"
ROUND = "What is the mean Pulse, rounded to 2 decimal places?"


def rewritten(task: str, answer: str) -> str:
    return in_asked_form(task, answer)[0]


@pytest.mark.parametrize(
    ("written", "asked"),
    [
        ("April 30, 1992", "1992-04-30"),
        ("Apr 30 1992", "1992-04-30"),
        ("Dec. 5th, 2012", "2012-12-05"),
        ("30 April 1992", "1992-04-30"),
        ("the 5th of September, 2012", "the 2012-09-05"),
        ("1992/4/30", "1992-04-30"),
        ("1992-04-30 00:00:00", "1992-04-30"),
        ("Timestamp('1992-04-30 00:00:00')", "1992-04-30"),
    ],
)
def test_a_date_is_written_as_the_iso_date_the_task_asks(written, asked):
    assert rewritten(ISO, f"It was {written}.") == f"It was {asked}."


@pytest.mark.parametrize(
    "answer",
    [
        "It was 04/05/1992.",  # day and month: either way round
        "It was February 30, 2012.",  # no such day
        "It was 1992-04-30.",  # already so
        "Mayor Bradley spoke in March of that year.",  # no date
    ],
)
def test_what_cannot_be_read_one_way_stays(answer):
    assert rewritten(ISO, answer) == answer


def test_a_date_stays_as_written_when_the_task_asks_no_form():
    assert rewritten("On which date did the most deaths occur?", "April 30, 1992") == (
        "April 30, 1992"
    )


def test_the_one_month_named_is_written_as_its_number():
    answer = "The month with the largest total precipitation is December."
    assert rewritten(MONTH, answer) == "The month with the largest total precipitation is 12."
    assert rewritten(MONTH, "@month[Dec]") == "@month[12]"


@pytest.mark.parametrize(
    "answer",
    [
        "November was wet, but December was wetter.",  # two months: which is the answer?
        "December (12) was the wettest.",  # its number is there already
        "It rained most on December 28, 2012.",  # a day, not a month
    ],
)
def test_a_month_that_is_not_the_one_answer_stays(answer):
    assert rewritten(MONTH, answer) == answer


def test_a_month_name_stays_when_the_task_asks_no_number():
    answer = "December had the most."
    assert rewritten("Which month had the most precipitation?", answer) == answer


def test_a_year_written_as_a_date_is_the_year():
    assert rewritten(YEAR, "@year[1980-01-01] @mean_mpg[33.70]") == "@year[1980] @mean_mpg[33.70]"
    assert rewritten(YEAR, "The year 1980-01-01 00:00:00 has the highest mean.") == (
        "The year 1980 has the highest mean."
    )
    assert rewritten(YEAR, "The year 1980.0 has the highest mean.") == (
        "The year 1980 has the highest mean."
    )


def test_a_date_in_prose_stays_when_the_task_asks_a_date_too():
    task = "Which year had the most rain, and on which date did it start?"
    assert rewritten(task, "1980-01-01, in 1980") == "1980-01-01, in 1980"


def test_a_date_in_a_slot_not_named_for_a_year_stays():
    assert rewritten(YEAR, "@start[1980-01-01]") == "@start[1980-01-01]"


def test_numbers_are_rounded_to_the_one_rounding_asked():
    assert rewritten(ROUND, "The mean Pulse is 74.15104166666667.") == "The mean Pulse is 74.15."
    assert rewritten(ROUND, "57.142857% of 1,234.5678") == "57.14% of 1,234.57"


@pytest.mark.parametrize(
    ("task", "answer"),
    [
        (ROUND, "p = 0.0000123"),  # it would round to zero
        (ROUND, "Python 3.11.7"),  # a version, not a number
        (ROUND + " Use alpha 0.0125.", "at alpha 0.0125"),  # the task's own number
        ("The mean to 2 decimal places, the p-value to 4 decimal places?", "3.14159, 0.12345"),
        ("The mean to 3 significant figures and 2 decimal places", "3.14159"),
        ("What is the mean Pulse?", "74.15104166666667"),  # no rounding asked
    ],
)
def test_a_number_stays_where_the_rounding_is_not_one_clear_rule(task, answer):
    assert rewritten(task, answer) == answer


def test_numpy_reprs_are_their_values_whatever_the_task():
    task = "What are the counts?"
    answer = "{'a': np.int64(0), 'b': np.float64(0.5), 'c': np.str_('x'), 'd': np.True_}"
    assert rewritten(task, answer) == "{'a': 0, 'b': 0.5, 'c': x, 'd': True}"


def test_a_number_misgrouped_is_written_as_the_cell_printed_it():
    """A generic question: the cell printed 2992 full weeks, and the bundled model wrote
    "29,92" (2026-12-07). Only where a cell printed those digits as one number."""
    answer = "It is 20,949 days, and there are 29,92 full weeks."
    assert in_asked_form("How many days?", answer, "20949\n2992\n")[0] == (
        "It is 20,949 days, and there are 2,992 full weeks."
    )
    assert in_asked_form("How many?", "1,2345 rows", "rows: 12,345")[0] == "12,345 rows"
    for kept, printed in [
        (answer, ""),  # nothing printed: a decimal comma reads so too
        ("The mean is 29,92.", "29.92"),  # a decimal comma, the cell's 29.92
        ("There are 29,92 weeks.", "2992.5"),
        ("0,12 of them", "012"),
        ("It is 2,992 weeks.", "2992"),  # grouped as it should be
    ]:
        assert in_asked_form("How many?", kept, printed) == (kept, []), kept


def test_a_slot_the_answer_left_out_is_added_as_a_cell_last_printed_it():
    """The held-out msleep IQR run printed the fence with a wrong count, then fixed the
    count in cells that printed it alone, and answered "@outliers[11]" (2026-12-07)."""
    task = "How many outliers, and the upper fence?\n@outliers[integer] @upper_fence[value]"
    printed = "@outliers[13789]\n@upper_fence[104.11]\n@outliers[11]\n"
    out, done = in_asked_form(task, "@outliers[11]", printed)
    assert out == "@outliers[11] @upper_fence[104.11]"
    assert [r.describe() for r in done] == [
        "'' as @upper_fence[104.11] (an asked slot the answer left out, as a cell printed it)"
    ]
    later = printed + "@upper_fence[104.114]\n"  # the last printed value
    assert in_asked_form(task, "@outliers[11]", later)[0] == "@outliers[11] @upper_fence[104.114]"


@pytest.mark.parametrize(
    ("answer", "printed"),
    [
        ("@outliers[11]", "@outliers[11]\n"),  # never printed
        ("@outliers[11]", "@upper_fence[nan]\n"),  # printed as no value
        ("@outliers[11]", "@upper_fence[]\n"),  # printed empty
        ("@outliers[11]", "@upper_fence[" + "1" * 101 + "]\n"),  # no single value
        ("There are 11 outliers.", "@upper_fence[104.11]\n"),  # not an answer in slots
        ("@outliers[11] @upper_fence[99]", "@upper_fence[104.11]\n"),  # given: kept
    ],
)
def test_a_left_out_slot_is_added_only_from_a_printed_value(answer, printed):
    task = "How many outliers, and the upper fence?\n@outliers[integer] @upper_fence[value]"
    assert in_asked_form(task, answer, printed) == (answer, [])


TTEST = (
    "Is the wait significantly different between the branches? Use a t-test at alpha 0.05, "
    "and give the p-value rounded to 4 decimals and a yes/no verdict."
)


def test_a_value_the_task_names_is_added_to_a_prose_answer_that_states_none():
    """The scratch hotel run printed "P-value: 0.7455" and answered the verdict alone,
    also when asked again (2026-12-07)."""
    printed = "t-statistic: 0.3252\nP-value: 0.74551\nNo, not significantly different.\n"
    out, done = in_asked_form(TTEST, "The wait is not significantly different.", printed)
    assert out == "The wait is not significantly different. (P-value: 0.7455)"
    assert [r.describe() for r in done][0] == (
        "'' as P-value: 0.74551 (a value the task names, as a cell printed it)"
    )


@pytest.mark.parametrize(
    ("task", "answer", "printed"),
    [
        (TTEST, "No: the p-value is 0.7455.", "P-value: 0.7455\n"),  # states a number
        (TTEST, "No.", "t-statistic: 0.3252\n"),  # a value the task does not name
        (TTEST, "No.", "the p-value: high\n"),  # no number under the name
        (TTEST + " @p[value]", "@p[0.7]", "P-value: 0.7455\n"),  # slots: _completed's
        ("Which make is cheapest?", "Toyota", "Toyota: 12000\n"),  # a group, not a name
    ],
)
def test_a_prose_answer_is_completed_only_with_a_value_printed_under_a_name_the_task_says(
    task, answer, printed
):
    assert in_asked_form(task, answer, printed) == (answer, [])


def test_each_rewrite_is_reported():
    _, done = in_asked_form(ISO + " " + ROUND, "April 30, 1992 with 3.14159")
    assert [(r.written, r.asked) for r in done] == [
        ("April 30, 1992", "1992-04-30"),
        ("3.14159", "3.14"),
    ]
    assert all(r.why for r in done)


def test_an_answer_longer_than_the_bound_is_left_alone():
    long = "April 30, 1992 " * (MAX_CHARS // 10)
    assert in_asked_form(ISO, long) == (long, [])


CSV = "death_date,age\n1992-04-29,20\n1992-04-30,31\n1992-04-30,44\n1992-05-01,19\n"
TASK = "Using the file riots.csv: " + ISO
READ = "import pandas as pd\ndf = pd.read_csv('riots.csv', parse_dates=['death_date'])\n"
TOP_DATE = READ + "print(df['death_date'].value_counts().idxmax())"
PROSE = "The most deaths occurred on April 30, 1992."


def _run(fake_llm, tmp_path, task, code, reply):
    """``task`` on riots.csv with a real kernel: one cell of ``code``, then ``reply``."""
    (tmp_path / "riots.csv").write_text(CSV)
    fake_llm.enqueue(run_cell(code), text(reply))
    with Agent(scripted_settings(fake_llm, tmp_path, clean_notebook=False)) as agent:
        result = list(agent.run(task))[-1].result
    return result, nbformat.read(result.notebook, as_version=4).cells[-1]


def test_the_models_answer_goes_out_in_the_asked_form(fake_llm, tmp_path):
    result, answer = _run(fake_llm, tmp_path, TASK, TOP_DATE, PROSE)
    assert result.status == "ok"
    assert result.answer == "The most deaths occurred on 1992-04-30."
    assert answer.source == result.answer
    meta = answer.metadata["kernel_agent"]
    assert meta["as_answered"] == "The most deaths occurred on April 30, 1992."
    assert meta["reformed"] == ["'April 30, 1992' as 1992-04-30 (the task asks YYYY-MM-DD)"]


def test_the_same_answer_stays_as_written_when_the_task_asks_no_form(fake_llm, tmp_path):
    """The run above without the form in the task (so the test above can fail)."""
    task = "Using the file riots.csv: on which date did most deaths occur?"
    result, answer = _run(fake_llm, tmp_path, task, TOP_DATE, PROSE)
    assert result.answer == "The most deaths occurred on April 30, 1992."
    assert "as_answered" not in answer.metadata["kernel_agent"]


def test_a_composed_answer_goes_out_in_the_asked_form(fake_llm, tmp_path):
    """A printed Timestamp in the year's slot, composed with no model turn, is the year."""
    code = READ + "year = df['death_date'].min().replace(month=1, day=1)\nprint(f'@year[{year}]')"
    task = (
        "Using the file riots.csv: in which year (as a four-digit year) did the first death "
        "occur?\nGive the final answer in this format: @year[integer]"
    )
    result, answer = _run(fake_llm, tmp_path, task, code, "unused")
    assert result.answer == "@year[1992]"
    assert len(fake_llm.requests) == 1, "composed from the printed slot, with no turn"
    meta = answer.metadata["kernel_agent"]
    assert meta["composed_by"] == "printed_answer"
    assert meta["as_answered"] == "@year[1992-01-01]"


def test_a_misgrouped_number_in_the_models_answer_goes_out_as_printed(fake_llm, tmp_path):
    """With no levers (grounding_check would send back a number no cell printed: the asked
    form is not a lever), on a real kernel; the same reply after a cell that printed other
    digits stays as written, so the test can fail."""
    task = "How many full weeks are there from 20 July 1969 to 27 November 2026?"
    settings = scripted_settings(fake_llm, tmp_path, clean_notebook=False, levers="none")
    answers = []
    for code in ("print(20949 // 7)", "print(20949 / 7)"):
        fake_llm.enqueue(run_cell(code), text("There are 29,92 weeks."))
        with Agent(settings) as agent:
            result = list(agent.run(task))[-1].result
        cell = nbformat.read(result.notebook, as_version=4).cells[-1]
        answers.append((result.answer, cell.metadata["kernel_agent"].get("as_answered")))
    assert answers == [
        ("There are 2,992 weeks.", "There are 29,92 weeks."),
        ("There are 29,92 weeks.", None),
    ]


def test_a_slot_the_models_answer_left_out_goes_out_as_a_cell_printed_it(fake_llm, tmp_path):
    """On a real kernel, with the levers on: the cell printed the date in its slot and not
    the count, the model answered the count alone; the answer goes out with the date, and
    the transcript keeps the answer as written."""
    code = READ + "print(f\"@date[{df['death_date'].value_counts().idxmax():%Y-%m-%d}]\")"
    task = (
        "Using the file riots.csv: on which date did most deaths occur, and how many rows "
        "are there?\nGive the final answer in this format: @date[YYYY-MM-DD] @rows[integer]"
    )
    result, answer = _run(fake_llm, tmp_path, task, code, "@rows[4]")
    assert result.answer == "@rows[4] @date[1992-04-30]"
    assert answer.metadata["kernel_agent"]["as_answered"] == "@rows[4]"


def test_a_verdict_answered_alone_goes_out_with_the_p_value_a_cell_printed(fake_llm, tmp_path):
    """On a real kernel, with the levers on: the cell printed the p-value and the verdict;
    the model answered the verdict alone, and again when asked for the values; the answer
    goes out with the p-value, rounded as asked, and the transcript keeps it as written."""
    (tmp_path / "riots.csv").write_text(CSV)
    code = READ + "from scipy import stats\np = stats.ttest_1samp(df['age'], 20).pvalue\n"
    code += "print(f'P-value: {p}')\nprint('No, not significant.' if p >= 0.05 else 'Yes.')"
    task = "Using the file riots.csv: " + TTEST.replace("the wait", "the age")
    verdict = "The age is not significantly different."
    fake_llm.enqueue(run_cell(code), text(verdict), text(verdict))
    with Agent(scripted_settings(fake_llm, tmp_path, clean_notebook=False)) as agent:
        result = list(agent.run(task))[-1].result
    p = scipy.stats.ttest_1samp([20, 31, 44, 19], 20).pvalue
    assert result.status == "ok" and result.answer == f"{verdict} (P-value: {p:.4f})"
    cell = nbformat.read(result.notebook, as_version=4).cells[-1]
    assert cell.metadata["kernel_agent"]["as_answered"] == verdict
    fake_llm.assert_drained()
