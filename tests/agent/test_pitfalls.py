"""PandasPitfalls: a shown idxmax() of a row-numbered variable, a shown len() of a mask.
Pure units on the code's ast, then the loop with a real kernel (its namespace probe says
which index is row numbers, which series is a mask) and the scripted model server: the
note reaches the model, and the answer composed from printed slots waits for it."""

from __future__ import annotations

from datetime import datetime, timezone

import nbformat
import pytest
from fake_openai import run_cell, scripted_settings, text
from nbformat.v4 import new_output

from kernel_agent.agent import Agent
from kernel_agent.agent.levers.pandas_pitfalls import PandasPitfalls
from kernel_agent.agent.pitfalls import (
    all_rows_counts,
    asked_column,
    cut_edges,
    fraction_for_percentage,
    method_mismatch,
    normality_reversed,
    row_label_calls,
    shown_names,
)
from kernel_agent.agent.state import TaskState
from kernel_agent.events import RunFinished
from kernel_agent.kernel_state.namespace import VariableInfo
from kernel_agent.results import CellResult

NOW = datetime.now(timezone.utc)
NS = {
    "df": VariableInfo("df", "DataFrame", columns=("state", "murder"), row_numbers=True),
    "rolling": VariableInfo("rolling", "Series", row_numbers=True),
    "by_state": VariableInfo("by_state", "Series"),  # indexed by a named key
    "mask": VariableInfo("mask", "Series", row_numbers=True, dtype="bool"),
    "values": VariableInfo("values", "Series", row_numbers=True, dtype="float64"),
}


@pytest.mark.parametrize(
    "code",
    [
        "best = df['murder'].idxmax()\nv = df.loc[best, 'murder']\nprint(f'@state[{best}]', v)",
        "year = rolling.idxmax() + 1\nprint(year)",
        "print(df.murder.idxmin())",
        "print('state:', df[['murder']].idxmax())",
    ],
)
def test_a_shown_row_number_is_found(code):
    assert row_label_calls(code, NS)


@pytest.mark.parametrize(
    "code",
    [
        "print(df.loc[df['murder'].idxmax(), 'state'])",  # looked up: what the note asks for
        "i = df['murder'].idxmax()\nprint(df.loc[i, 'state'], df.at[i, 'murder'])",
        "print(by_state.idxmax())",  # a named index: the label is the key
        "print(df.groupby('state')['murder'].mean().idxmax())",  # not a variable's index
        "print(unknown.idxmax())",
        "print(df['murder'].idxmax(",  # not Python
    ],
)
def test_a_label_used_to_look_up_or_a_real_key_is_left_alone(code):
    assert row_label_calls(code, NS) == []


@pytest.mark.parametrize(
    ("code", "call"),
    [
        ("n = len(mask)\nprint('outliers:', n)", "len(mask)"),
        ("print(mask.count())", "mask.count()"),
        ("len(mask)", "len(mask)"),
    ],
)
def test_a_shown_count_of_a_whole_mask_is_found(code, call):
    assert [found[:2] for found in all_rows_counts(code, NS)] == [(call, "mask")]


@pytest.mark.parametrize(
    "code",
    [
        "print(mask.sum())",
        "print(len(df[mask]))",
        "print(len(values), values.count())",  # not a mask
        "n = len(mask)\nprint(df.iloc[:n])",  # used to select, not shown
    ],
)
def test_a_count_of_true_rows_or_of_a_non_mask_is_left_alone(code):
    assert all_rows_counts(code, NS) == []


# ---------------------------------------------------------------- the loop
TASK = (
    "Using the file crime.csv: which state has the highest murder rate?\n"
    "Give the final answer in this format: @state[name]"
)
CSV = "state,murder\nAlabama,7.1\nDistrict of Columbia,24.2\nMaine,1.6\n"


def test_the_note_reaches_the_model_and_the_printed_slot_waits_for_it(fake_llm, tmp_path):
    (tmp_path / "crime.csv").write_text(CSV)
    fake_llm.enqueue(
        run_cell(
            "import pandas as pd\ndf = pd.read_csv('crime.csv')\n"
            "best = df['murder'].idxmax()\nprint(f'@state[{best}]')"
        ),
        run_cell("print(f'@state[{best}]')"),  # the kept row number, printed again
        run_cell("print(f\"@state[{df.loc[best, 'state']}]\")"),
    )
    settings = scripted_settings(fake_llm, tmp_path, clean_notebook=False)
    with Agent(settings) as agent:
        events = list(agent.run(TASK))
    result = events[-1].result
    assert isinstance(events[-1], RunFinished)
    # the cells printed @state[1]: not composed into the answer; the model read the note
    first, again = fake_llm.requests[1].last_user_text, fake_llm.requests[2].last_user_text
    assert "holds row numbers" in first and "df.loc[df['murder'].idxmax(), 'state']" in first
    assert "`best` keeps a value an earlier note questioned" in again
    assert "df.loc[df['murder'].idxmax(), 'state']" in again
    assert result.status == "ok" and result.answer == "@state[District of Columbia]"
    assert len(fake_llm.requests) == 3, "the last cell's slot was composed, with no turn"
    nb = nbformat.read(result.notebook, as_version=4)
    levers = [c.metadata["kernel_agent"].get("lever") for c in nb.cells if c.cell_type == "code"]
    assert levers == ["pandas_pitfalls", "pandas_pitfalls", None]


def test_without_the_lever_the_row_number_is_the_answer(fake_llm, tmp_path):
    """What the lever prevents, on the same script (so the test above can fail)."""
    (tmp_path / "crime.csv").write_text(CSV)
    fake_llm.enqueue(
        run_cell(
            "import pandas as pd\ndf = pd.read_csv('crime.csv')\n"
            "print(f\"@state[{df['murder'].idxmax()}]\")"
        ),
        text("unused"),
    )
    settings = scripted_settings(
        fake_llm, tmp_path, clean_notebook=False, levers=("printed_answer",)
    )
    with Agent(settings) as agent:
        result = list(agent.run(TASK))[-1].result
    assert result.answer == "@state[1]"


def test_a_mask_counted_whole_is_noted_and_an_answer_restating_it_is_sent_back_once(
    fake_llm, tmp_path
):
    (tmp_path / "crime.csv").write_text(CSV)
    fake_llm.enqueue(
        run_cell(
            "import pandas as pd\ndf = pd.read_csv('crime.csv')\n"
            "high = df['murder'] > 5\nprint('high:', len(high))"
        ),
        text("3 states have a murder rate above 5."),  # restates the note's value
        run_cell("print('high:', high.sum())"),
        text("2 states have a murder rate above 5."),
    )
    settings = scripted_settings(fake_llm, tmp_path, clean_notebook=False)
    with Agent(settings) as agent:
        result = list(agent.run("How many states have a murder rate above 5 in crime.csv?"))[
            -1
        ].result
    seen = fake_llm.requests[1].last_user_text
    assert "high: 3" in seen and "`len(high)` counts every row of high" in seen
    assert "`high.sum()`" in seen
    asked = fake_llm.requests[2].last_user_text
    assert "restates a value" in asked and "`len(high)` counts every row" in asked
    assert "high: 2" in fake_llm.requests[3].last_user_text
    assert result.status == "ok" and result.answer.startswith("2 states")
    nb = nbformat.read(result.notebook, as_version=4)
    notes = [c.metadata["kernel_agent"] for c in nb.cells if c.cell_type == "markdown"]
    assert [n.get("lever") for n in notes if n.get("role") == "note"] == ["pandas_pitfalls"]


@pytest.mark.parametrize(
    ("task", "column"),
    [
        ("In which year was the change largest?", "year"),
        ("Which State has the highest murder rate?", "state"),
        ("Which month had the most units?", "<column>"),  # no such column
        ("What is the mean murder rate?", "<column>"),  # no "which"/"what" + a column
    ],
)
def test_the_note_names_the_column_the_task_asks_for(task, column):
    assert asked_column(task, ("state", "murder", "year")) == column


def test_a_kept_noted_value_shown_again_is_found_unless_assigned_anew():
    kept = {"best"}
    assert shown_names("print(f'@state[{best}]')", kept) == ["best"]
    assert shown_names("print(df.loc[best, 'state'])", kept) == []
    assert shown_names("best = df.loc[best, 'state']\nprint(best)", kept) == []
    assert shown_names("print(best)", set()) == []


def _printed(text: str) -> CellResult:
    now = datetime.now(timezone.utc)
    return CellResult("print(x)", "ok", 1, [new_output("stream", name="stdout", text=text)],
                      None, now, now)  # fmt: skip


SHARE = (
    "Which class has the highest survival rate, and what is that rate as a percentage?\n"
    "Give the final answer in this format: @pclass[integer] @rate[value]"
)


@pytest.mark.parametrize(
    ("task", "printed", "found"),
    [
        (SHARE, "@pclass[1] @rate[0.45]\n", ("rate", "0.45")),
        (SHARE, "@pclass[1] @rate[45.16]\n", None),  # already a percentage
        (SHARE, "@pclass[1] @rate[0.45%]\n", None),  # said to be a percentage
        ("What percentage of women had an affair?", "percent: 0.3225\n", ("percent", "0.3225")),
        ("What percentage of women had an affair?", "mean: 0.3225\n", None),  # not labelled
        ("By what percentage change did the close move?\n@c[value]", "@c[0.15]\n", None),
        ("Daily returns as a fraction, as a percentage too?\n@r[value]", "@r[0.01]\n", None),
    ],
)
def test_a_fraction_printed_for_an_asked_percentage_is_found(task, printed, found):
    assert fraction_for_percentage(task, _printed(printed)) == found


@pytest.mark.parametrize(
    ("task", "code", "says"),
    [
        ("Pearson correlation of a and b?", "df['a'].corr(df['b'], method='spearman')", "Pearson"),
        ("Pearson correlation of a and b?", "df['a'].corr(df['b'])", ""),
        ("Spearman and Pearson correlations?", "df.a.corr(df.b, method='spearman')", ""),
        ("Spearman rank correlation of a and b?", "df['a'].corr(df['b'])", "Spearman"),
        ("Spearman rank correlation?", "stats.spearmanr(df.a, df.b)", ""),
        ("Run Welch's t-test", "stats.ttest_ind(a, b)", "equal_var=False"),
        ("t-test with unequal variances", "stats.ttest_ind(a, b, equal_var=False)", ""),
    ],
)
def test_a_statistic_other_than_the_asked_one_is_named(task, code, says):
    note = method_mismatch(task, code)
    assert (says in note) if says else note == ""


AGES = "Label each as child (under 18), adult (18 to 59) or senior (60 and over)."


@pytest.mark.parametrize(
    ("task", "code", "edge"),
    [
        (AGES, "df['g'] = pd.cut(df['Age'], bins=[0, 18, 60, np.inf], labels=l)", "18"),
        (AGES, "g = pd.cut(df.Age, [0, 17.5, 60, 120])", "60"),  # 60 and over: 60 is an edge
        (AGES, "g = pd.cut(df.Age, [0, 18, 60, np.inf], right=False)", ""),
        (AGES, "g = pd.cut(df.Age, [0, 17, 59, 120])", ""),  # right edges 17 and 59: right
        (AGES, "g = pd.cut(df.Age, bins=4)", ""),  # no edges written
        ("Ages 18 or younger are minors.", "g = pd.cut(df.Age, [0, 18, 99])", ""),
        (
            "Incomes below 1000.5 are low; 5000+ are high.",
            "cut(x, (0, 1000.5, 5000, 1e9))",
            "1000.5",
        ),
        ("Group under 30 and 30 and over", "g = df.Age.between(0, 30)", ""),
    ],
)
def test_a_bin_edge_the_task_bounds_in_the_wrong_bin_is_noted(task, code, edge):
    note = cut_edges(task, code)
    assert (f"exactly {edge} " in note and "right=False" in note) if edge else note == ""


NORMAL = "Run a Shapiro-Wilk test on x. Is it normally distributed at the 0.05 level (yes/no)?"
SHAPIRO = "w, p = stats.shapiro(df['x'])\n"


@pytest.mark.parametrize(
    ("task", "code", "printed", "noted"),
    [
        (NORMAL, SHAPIRO + "print(f'@normal[{p < 0.05}]')", "@normal[True]\n", True),
        (NORMAL, SHAPIRO + "print('normal:', p_value <= alpha)", "normal: False\n", True),
        (NORMAL, SHAPIRO + "print('normal:', p >= 0.05)", "normal: True\n", False),
        (NORMAL, SHAPIRO + "print('yes' if p > 0.05 else 'no')", "@normal[no]\n", False),
        (NORMAL, SHAPIRO + "a = 'no' if p < 0.05 else 'yes'\nprint(a)", "@normal[no]\n", False),
        (
            "Is the t-test significant (yes/no)?",
            "t, p = stats.ttest_ind(a, b)\nprint('sig:', p < 0.05)",
            "sig: True\n",
            False,
        ),
    ],
)
def test_a_normality_verdict_printed_as_p_below_the_level_is_noted(task, code, printed, noted):
    cell = _printed(printed)
    cell.code = code
    assert normality_reversed(task, cell) is noted


def test_a_count_kept_in_a_name_and_printed_by_a_later_cell_is_noted_again():
    lever, st = PandasPitfalls(), TaskState("How many outliers?")
    st.namespace = dict(NS)
    counted = CellResult("n = len(mask)\nprint('outliers:', n)", "ok", 1, [], None, NOW, NOW)
    first = lever.after_cell(st, counted, "")
    assert first is not None and "`len(mask)` counts every row" in first
    later = CellResult("print('outliers:', n)", "ok", 2, [], None, NOW, NOW)
    again = lever.after_cell(st, later, "")
    assert again is not None and again.startswith("Note: `n` keeps a value an earlier note")
    assert "counts every row" in again
    fixed = CellResult("n = mask.sum()\nprint('outliers:', n)", "ok", 3, [], None, NOW, NOW)
    assert lever.after_cell(st, fixed, "") is None


def test_a_statistic_of_the_wrong_kind_kept_in_a_name_is_noted_again():
    lever, st = PandasPitfalls(), TaskState("What is the Pearson correlation of a and b?")
    code = "r = df['a'].corr(df['b'], method='spearman')\nn = len(df)\nprint(r, n)"
    first = lever.after_cell(st, CellResult(code, "ok", 1, [], None, NOW, NOW), "")
    assert first is not None and "Pearson" in first and set(lever.noted) == {"r"}
    again = lever.after_cell(st, CellResult("print(f'@r[{r}]')", "ok", 2, [], None, NOW, NOW), "")
    assert again is not None and again.startswith("Note: `r` keeps a value")
    assert lever.after_cell(st, CellResult("print(n)", "ok", 3, [], None, NOW, NOW), "") is None
