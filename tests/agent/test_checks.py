"""The one answer check: plain strings for the task, the answer and the printed outputs."""

from __future__ import annotations

from datetime import datetime, timezone

from nbformat.v4 import new_output

from kernel_agent.agent.checks import Facts, answer_problems, table_rows
from kernel_agent.agent.levers.answer_check import AnswerCheck
from kernel_agent.agent.state import TaskState
from kernel_agent.results import CellResult

NOW = datetime.now(timezone.utc)
PREVIEW = (
    "Files in the working directory (a preview; column names are exact):\n"
    "spotify.csv (102.5 KB)\n  953 rows x 24 columns\n"
    "  columns: 'track_name' str, 'artist(s)_name' str, 'streams' str, 'bpm' int64\n"
    "  missing values: 'key' 95\n"
    "     track_name artist(s)_name    streams  bpm\n"
    "  0  Seven (feat. Latto)  Latto, Jung Kook  141381703  125\n"
)


def kinds(task: str, answer: str, outputs: tuple[str, ...] = (), **kw: object) -> list[str]:
    facts = Facts(task, answer, outputs, **kw)  # type: ignore[arg-type]
    return [name for name, _ in answer_problems(facts)]


def test_a_sum_of_text_has_an_impossible_magnitude():
    mean = "141381703" * 34  # 306 digits: the strings of a text column, joined
    task = "Which artist has the most songs, and what is their average number of streams?"
    answer = f"Taylor Swift, with an average of {mean} streams."
    assert kinds(task, answer, preview=PREVIEW) == ["magnitude"]
    assert kinds(task, "@avg[" + "9" * 40 + ".5]", preview=PREVIEW) == ["magnitude"]
    # right figures, a big but possible one, and a task about big numbers: nothing
    assert kinds(task, "Taylor Swift, 413,342,891 streams on average.", preview=PREVIEW) == []
    assert kinds(task, "The total is 489,014,575,390,128 streams.", preview=PREVIEW) == []
    assert (
        kinds("What is 30 factorial?", "265252859812191058636308480000000", preview=PREVIEW) == []
    )
    assert kinds(task, answer) == []  # no data file: a generic task may have big numbers


def test_nan_inf_or_an_empty_result_is_not_a_value():
    task = "What is the correlation between price and rating for cars made after 2030?"
    for answer in ("@corr[nan]", "The correlation is NaN.", "@r[inf]", "It is -inf", "@r[]",
                   "Result: Empty DataFrame", "The list is []"):  # fmt: skip
        assert kinds(task, answer) == ["empty"], answer
    for answer in ("@corr[0.42]", "Nancy has the highest", "information gain is 0.3",
                   "df.info() shows 3 columns"):  # fmt: skip
        assert kinds(task, answer) == [], answer


def test_a_count_of_rows_that_meet_a_condition_equal_to_all_rows():
    task = "How many outliers are there in the income column (outside 1.5 IQR)?"
    assert kinds(task, "There are 235 outliers.", rows=frozenset({235})) == ["all_rows"]
    assert kinds(task, "@outliers[1,235]", rows=frozenset({1235})) == ["all_rows"]
    assert kinds(task, "There are 12 outliers.", rows=frozenset({235})) == []
    # the task asks for rows, or the number is in the task, or small: not this check
    rows = frozenset({235})
    assert kinds("How many rows have missing values?", "235", rows=rows) == []
    assert kinds("How many of the 235 households are above 1000?", "235 of them", rows=rows) == []
    assert kinds("How many passengers are there?", "235", rows=rows) == []  # no condition
    assert kinds("How many values are above 3?", "12", rows=frozenset({12})) == []
    assert kinds(task, "There are 235.5 outliers", rows=rows) == []  # not a count
    # the condition belongs to another part of the task (a right count of the file's women)
    two = (
        "Say a woman had an affair when affairs is greater than 0. What percentage of the "
        "women had an affair, and how many women are in the file?"
    )
    assert kinds(two, "@percent[32.25] @women[6366]", rows=frozenset({6366})) == []
    both = "What share of the women had an affair (affairs greater than 0), and how many women?"
    assert kinds(both, "@percent[32.25] @women[6366]", rows=frozenset({6366})) == []


def test_a_verdict_that_contradicts_the_printed_p_value():
    task = "Is there a significant difference in price between the groups (alpha 0.05)?"
    printed = ("t = 2.91, p = 0.0041",)
    assert kinds(task, "The difference is not significant.", printed) == ["verdict"]
    assert kinds(task, "We fail to reject the null hypothesis.", printed) == ["verdict"]
    assert kinds(task, "@significant[no]", printed) == ["verdict"]
    assert kinds(task, "Yes, the difference is significant (p = 0.0041).", printed) == []
    late = ("TtestResult(statistic=0.61, pvalue=0.54, df=98.0)",)
    assert kinds(task, "The difference is significant.", late) == ["verdict"]
    assert kinds(task, "There is no significant difference.", late) == []
    # the task's own alpha, and a percent
    strict = "Test at a significance level of 0.001 whether the means differ significantly."
    assert kinds(strict, "The means differ significantly.", printed) == ["verdict"]
    assert kinds("Significant at 1%?", "It is significant", ("p-value: 0.03",)) == ["verdict"]
    # several p-values, or none printed: which one is meant is not known
    two = ("p = 0.01", "p = 0.4")
    assert kinds(task, "not significant", two) == [] and kinds(task, "not significant") == []
    assert kinds("What is the mean price?", "not significant", printed) == []
    assert kinds(task, "@p_value[0.0041] @significant[no]", ("@p_value[0.0041]",)) == ["verdict"]


def test_a_word_where_a_number_is_asked_reprs_and_a_slot_given_twice():
    task = "Report @mean_age[value] and @top_city[name]."
    assert kinds(task, "@mean_age[unknown] @top_city[Oslo]") == ["kind"]
    assert kinds(task, "@mean_age[34.5] @top_city[Oslo]") == []
    assert kinds(task, "@mean_age[34.5] @top_city[12]") == []  # a label may be a number
    assert kinds(task, "@mean_age[np.float64(34.5)] @top_city[Oslo]") == ["repr"]
    listed = "List the columns with missing values as @cols[a, b, c]."
    assert kinds(listed, "@cols[age] @cols[cabin] @cols[embarked]") == ["repeated_slot"]
    assert kinds(listed, "@cols[age, cabin, embarked]") == []


def test_an_answer_that_copies_the_preview():
    task = "Which artist has the most songs?"
    copied = PREVIEW.split("\n", 2)[2]
    assert kinds(task, copied, preview=PREVIEW) == ["preview_copy"]
    own = "Latto has the most songs, 12; the track 'Seven (feat. Latto)' is first."
    assert kinds(task, own, preview=PREVIEW) == []


def cell(printed: str) -> CellResult:
    out = [new_output("stream", name="stdout", text=printed)]
    return CellResult("print(x)", "ok", 1, out, None, NOW, NOW)


def test_the_row_count_is_the_whole_tables_not_a_filtered_frames():
    # a right count of a filter (3952 women with children) is a frame's row count too: only
    # the data file's rows, as the preview read them, count as "all rows"
    task = "How many women have children greater than 0, and their mean yrs_married?"
    state = TaskState(task, told=[PREVIEW.replace("953 rows", "6366 rows")])
    state.cells.append(cell("Number: 3952\nMean: 12.5\n"))
    assert AnswerCheck().on_answer(state, "3952 women; mean 12.50") is None
    assert table_rows(PREVIEW + "  sheet 'b': 12 rows x 3 columns\n") == {953, 12}
    task = "How many of them have more than 2 children?"
    state = TaskState(task, told=[PREVIEW.replace("953 rows", "6366 rows")])
    ask = AnswerCheck().on_answer(state, "All 6,366 of them.")
    assert ask is not None and "6366, the number of rows of the whole table" in ask.message


def test_a_whether_question_answered_without_a_verdict():
    task = "Is there a significant correlation between age and income?"
    printed = ("r = 0.43, p = 0.002",)
    assert kinds(task, "The correlation is 0.43 with a p-value of 0.002.", printed) == [
        "no_verdict"
    ]
    assert kinds(task, "Yes: r = 0.43, p = 0.002.", printed) == []
    assert kinds(task, "The correlation (0.43) is significant, p = 0.002.", printed) == []
    slots = "Is there a significant correlation? Answer @r[value] @significant[yes/no]."
    assert kinds(slots, "@r[0.43]", printed) == []  # slots: the format lever's to judge
    assert kinds("What is the correlation between age and income?", "0.43", printed) == []


def test_a_verdict_slot_against_a_p_value_the_kernel_kept_but_did_not_print():
    task = "Is the difference significant at alpha = 0.05? Answer significant or not significant."
    kept = {"t_statistic": "np.float64(-1.754)", "p_value": "np.float64(0.0837)"}
    assert kinds(task, "@verdict[significant] @t[-1.754]", variables=kept) == ["verdict"]
    assert kinds(task, "@verdict[not significant] @t[-1.754]", variables=kept) == []
    low = {"p": "0.0001"}
    assert kinds(task, "@verdict[not significant]", variables=low) == ["verdict"]
    assert kinds(task, "@verdict[insignificant]", variables=low) == ["verdict"]
    # a printed p-value comes first; a nan p-value is the empty check's
    assert kinds(task, "@verdict[significant]", ("p = 0.01",), variables=kept) == []
    assert kinds(task, "@verdict[significant]", variables={"p_value": "nan"}) == []
    assert kinds(task, "@verdict[significant]", variables={"speed": "0.5"}) == []


def test_code_text_in_a_slot_is_not_a_value():
    task = "What is r, and is it significant at alpha = 0.001? @r[value] @verdict[name]"
    answer = "@r[0.348] @verdict[significant if p < 0.001 else not significant]"
    assert kinds(task, answer) == ["code_in_slot"]
    assert kinds(task, "@r[0.348] @verdict[{verdict}]") == ["code_in_slot"]
    assert kinds(task, "@r[round(r, 3)] @verdict[significant]") == ["code_in_slot"]
    assert kinds(task, "@r[100 * 0.34] @verdict[significant]") == ["code_in_slot"]
    for fine in ("@r[0.348] @verdict[significant]", "@range[10-20]", "@p[< 0.001]",
                 "@name[Adelie Penguin (Pygoscelis adeliae)]", "@pct[12.5%]", "@ratio[3/4 of them]", "@start[2012/07/23]"):  # fmt: skip
        assert "code_in_slot" not in kinds(task, fine), fine


def test_every_count_zero_is_a_filter_that_matched_nothing():
    task = "In 2008, on how many distinct days was an egg observed, and how many penguins?"
    assert kinds(task, "@days[0] @penguins[0]", preview=PREVIEW) == ["all_zero"]
    assert kinds(task, "No egg was seen in 2008: 0 days.", preview=PREVIEW) == ["all_zero"]
    assert kinds(task, "@days[16] @penguins[0]", preview=PREVIEW) == []
    assert kinds(task, "@days[0] @penguins[0]") == []  # no data file
    missing = "How many missing values does the Ozone column have?"
    assert kinds(missing, "@missing[0]", preview=PREVIEW) == []
    assert kinds("What is the mean change?", "@change[0.0]", preview=PREVIEW) == []
