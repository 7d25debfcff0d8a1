"""pandas_pitfalls: the note under a cell and its memory of noted names; then the loop with
a real kernel and the scripted model server (the note reaches the model, and the answer
composed from printed slots waits for it)."""

from __future__ import annotations

from datetime import datetime, timezone

import nbformat
import pandas as pd
import pytest
from fake_openai import run_cell, scripted_settings, text

from kernel_agent.agent import Agent
from kernel_agent.agent.levers.pandas_pitfalls import PandasPitfalls
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


PENGUINS = "Island,Flipper\nBiscoe,230\nBiscoe,190\nDream,200\nDream,198\nTorgersen,195\n"


def test_a_group_max_for_an_asked_mean_is_noted_and_its_answer_waits(fake_llm, tmp_path):
    """The tuned half's cell: each island's max for its mean; the note reaches the model
    under the cell, the answer restating it goes back once, the corrected cell answers."""
    result = _run_on(
        fake_llm,
        tmp_path / "penguins.csv",
        PENGUINS,
        "Using the file penguins.csv: which island has the largest mean Flipper, and "
        "what is that mean?",
        run_cell(
            "import pandas as pd\ndf = pd.read_csv('penguins.csv')\n"
            "by_island = df.groupby('Island')['Flipper'].max()\n"
            "print(by_island.idxmax(), by_island.max())"
        ),
        text("Biscoe has the largest mean flipper length, 230."),
        run_cell("m = df.groupby('Island')['Flipper'].mean()\nprint(m.idxmax(), m.max())"),
        text("Biscoe, with a mean flipper length of 210.0."),
    )
    under_cell = fake_llm.requests[1].last_user_text
    assert "Biscoe 230" in under_cell and "this cell computed no mean" in under_cell
    assert "takes each group's max" in under_cell
    assert "computed no mean" in fake_llm.requests[2].last_user_text  # the answer sent back
    assert "computed no mean" not in fake_llm.requests[3].last_user_text  # a mean now
    assert result.status == "ok" and "210.0" in result.answer
    fake_llm.assert_drained()


VOTES = "district,Coderre,total\na,20,100\nb,30,60\nc,50,90\n"


def test_a_series_printed_in_a_slot_for_one_value_is_noted_and_its_answer_waits(fake_llm, tmp_path):
    """The tuned half's cell: each district's share printed into the one slot of the
    city's share; the note reaches the model under the cell (with pandas' real repr),
    the answer restating it goes back once, the corrected cell's slot is the answer."""
    result = _run_on(
        fake_llm,
        tmp_path / "votes.csv",
        VOTES,
        "Using the file votes.csv: what was Coderre's share of all votes in the city, in "
        "percent, rounded to 2 decimals?\nGive the final answer in this format: @share[value]",
        run_cell(
            "import pandas as pd\ndf = pd.read_csv('votes.csv')\n"
            "share = round(df['Coderre'] / df['total'] * 100, 2)\nprint(f'@share[{share}]')"
        ),
        text("@share[0 20.0 1 50.0 2 55.56]"),
        run_cell("print(f\"@share[{df['Coderre'].sum() / df['total'].sum() * 100:.2f}]\")"),
    )
    under_cell = fake_llm.requests[1].last_user_text
    assert "dtype: float64" in under_cell and "printed 3 values there" in under_cell
    assert "printed 3 values there" in fake_llm.requests[2].last_user_text  # sent back
    assert result.status == "ok" and result.answer == "@share[40.00]"  # composed, no turn
    fake_llm.assert_drained()


def _run_on(fake_llm, path, body, task, *replies, **settings):
    """``task`` on a real kernel, with ``body`` in the file ``path`` and the model's
    replies scripted (``settings``: overrides, such as ``levers``)."""
    path.write_text(body)
    fake_llm.enqueue(*replies)
    with Agent(scripted_settings(fake_llm, path.parent, clean_notebook=False, **settings)) as agent:
        return agent.run_to_end(task)


SALARIES = "rank,salary\n" + "".join(
    f"{'Prof' if i % 3 else 'AsstProf'},{60000 + 7919 * i}\n" for i in range(30)
)
PROFS = (
    "How many professors (rank Prof) earn less than 150000?\n"
    "Give the final answer in this format: @count[number]"
)
SLIPPED = (
    "import pandas as pd\ndf = pd.read_csv('salaries.csv')\n"
    "n = sum(df['rank'] == 'Prof' & df['salary'] < 150000)\nprint(f'@count[{n}]')"
)


def test_a_count_of_every_row_is_noted_with_the_precedence_fix_and_waits(fake_llm, tmp_path):
    """On a real kernel: ``a == 'Prof' & b < c`` is chained (``'Prof' & b`` first), pandas
    refuses it, and the hint names the fix; written ``(a == 'Prof') & b < c`` it runs and counts all 30 rows, the
    note says so with the fix, and the printed slot is not composed into the answer."""
    slipped = SLIPPED.replace("df['rank'] == 'Prof' &", "(df['rank'] == 'Prof') &")
    result = _run_on(
        fake_llm, tmp_path / "salaries.csv", SALARIES, PROFS,
        run_cell(SLIPPED),
        run_cell(slipped),
        run_cell("n = ((df['rank'] == 'Prof') & (df['salary'] < 150000)).sum()\n"
                 "print(f'@count[{n}]')"),
    )  # fmt: skip
    refused = fake_llm.requests[1].last_user_text
    assert "Cannot perform 'rand_'" in refused and "Hint: Python reads" in refused
    assert "(df['rank'] == 'Prof') & (df['salary'] < 150000)" in refused
    seen = fake_llm.requests[2].last_user_text
    assert "@count[30]" in seen and "`df` has 30 rows" in seen
    assert "(df['rank'] == 'Prof') & (df['salary'] < 150000)" in seen
    expected = sum(1 for i in range(30) if i % 3 and 60000 + 7919 * i < 150000)
    assert result.status == "ok" and result.answer == f"@count[{expected}]"
    assert expected != 30
    fake_llm.assert_drained()


GROUPS = "x,y\n" + "".join(f"{i},{i * i % 7} kg\n" for i in range(20))
CORR = (
    "What is the Pearson correlation of x and y (a weight in kg)?\n"
    "Give the final answer in this format: @corr[value]"
)
EMPTIED = (
    "import pandas as pd\ndf = pd.read_csv('groups.csv')\n"
    "a = df.assign(y=pd.to_numeric(df['y'], errors='coerce'))\n"
    "print(f\"@corr[{a['x'].corr(a['y'])}]\")"
)


def test_a_nan_printed_for_the_answer_is_noted_and_an_answer_stating_it_goes_back(
    fake_llm, tmp_path
):
    """On a real kernel: the cast of '3 kg' makes every y NaN, the correlation prints
    nan, the note says what empties a value, and the model's answer "nan" is sent back
    once with it."""
    result = _run_on(
        fake_llm, tmp_path / "groups.csv", GROUPS, CORR,
        run_cell(EMPTIED),
        text("@corr[nan]"),
        run_cell("a = df.assign(y=df['y'].str.extract(r'(\\d+)')[0].astype(float))\n"
                 "print(f\"@corr[{a['x'].corr(a['y']):.4f}]\")"),
    )  # fmt: skip
    seen = fake_llm.requests[1].last_user_text
    assert "@corr[nan]" in seen and "@corr[...] printed no value" in seen
    assert "printed no value" in fake_llm.requests[2].last_user_text  # the answer sent back
    rows = [(i, i * i % 7) for i in range(20)]
    expected = pd.DataFrame(rows, columns=["x", "y"]).corr().iloc[0, 1]
    assert result.status == "ok" and result.answer == f"@corr[{expected:.4f}]"
    fake_llm.assert_drained()


WAITS = "wait,rating\n" + "".join(
    f"{'N/A' if i % 6 == 0 else 10 + i % 9},{90 - 2 * (i % 9) - i % 3}\n" for i in range(40)
)
PEARSON = "What is the Pearson correlation between the wait and the rating? Round to 2 decimals."
GAPS = (  # numpy's corrcoef: preflight mends scipy's pearsonr of two columns with gaps
    "import pandas as pd\nimport numpy as np\ndf = pd.read_csv('waits.csv')\n"
    "r = np.corrcoef(df['wait'], df['rating'])[0, 1]\n"
    "print(f'The Pearson correlation between the wait and the rating is {round(r, 2)}')"
)


def _waits_corr() -> float:
    rows = [(10 + i % 9, 90 - 2 * (i % 9) - i % 3) for i in range(40) if i % 6]
    return round(pd.DataFrame(rows, columns=["w", "r"]).corr().iloc[0, 1], 2)


@pytest.mark.parametrize(
    ("code", "said"),
    [(GAPS, "is nan"), (GAPS.replace("print(f'The Pearson correlation between the wait and "
                                     "the rating is {round(r, 2)}')", "print(round(r, 2))"),
                        "the cell's output printed no value")],
    ids=["sentence", "alone"],
)  # fmt: skip
def test_a_sentence_ending_in_nan_is_noted_with_the_gaps_and_its_answer_goes_back(
    fake_llm, tmp_path, code, said
):
    """On a real kernel: a correlation over a column with one gap is nan, printed in a
    sentence with no slot (scratch hotel data, 2026-12-07). The note says that any gap
    makes it nan and how to drop them; the prose answer "nan" goes back once."""
    fixed = GAPS.replace("df['wait'], df['rating']", "*df[['wait', 'rating']].dropna().T.values")
    result = _run_on(
        fake_llm, tmp_path / "waits.csv", WAITS, PEARSON,
        run_cell(code),
        text("The Pearson correlation between the wait and the rating is nan."),
        run_cell(fixed),
        text(f"The Pearson correlation is {_waits_corr()}."),
    )  # fmt: skip
    seen = fake_llm.requests[1].last_user_text
    assert said in seen and "any input is nan" in seen and ".dropna()" in seen
    assert "printed no value" in fake_llm.requests[2].last_user_text  # the answer sent back
    assert result.status == "ok" and result.answer == f"The Pearson correlation is {_waits_corr()}."
    fake_llm.assert_drained()


CARS = "Make|Price\n" + "".join(
    f"{('Citroën', 'Toyota', 'Peugeot')[i % 3]}|{10000 + 1000 * i}\n" for i in range(30)
)
CITROEN = "What is the average price of the Citroën cars?"
EVERY_CAR = (
    "import pandas as pd\ndf = pd.read_csv('cars.txt', sep='|')\n"
    "print(f\"The average price of the Citroën cars is {df['Price'].mean()}\")"
)


def test_an_answer_with_no_cell_selecting_the_value_the_task_names_goes_back_once(
    fake_llm, tmp_path
):
    """On a real kernel, with the preview's facts: the model printed every car's mean in a
    sentence naming Citroën (scratch, 2026-12-07); the answer goes back once with the
    selection to make, and the answer after the selecting cell is taken."""
    selected = EVERY_CAR.replace("df['Price']", "df[df['Make'] == 'Citroën']['Price']")
    mean = sum(10000 + 1000 * i for i in range(0, 30, 3)) / 10
    result = _run_on(
        fake_llm, tmp_path / "cars.txt", CARS, CITROEN,
        run_cell(EVERY_CAR),
        text("The average price of the Citroën cars is 24500.0."),
        run_cell(selected),
        text(f"The average price of the Citroën cars is {mean}."),
    )  # fmt: skip
    sent_back = fake_llm.requests[2].last_user_text
    assert "the task names 'Citroën' (a value of the column 'Make')" in sent_back
    assert "df[df['Make'] == 'Citroën']" in sent_back
    assert (
        result.status == "ok"
        and result.answer == f"The average price of the Citroën cars is {mean}."
    )
    fake_llm.assert_drained()


BIRDS = "Species,Flipper\n" + "".join(
    f"{('Adelie Penguin (P. adeliae)', 'Gentoo penguin (P. papua)')[i % 2]},{170 + i * 7 % 31 + 20 * (i % 2)}\n"
    for i in range(40)
)
BIRDS_MAX = (
    "What is the longest flipper among Adelie penguins?\n"
    "Give the final answer in this format: @longest[value]"
)
EVERY_BIRD = "import pandas as pd\ndf = pd.read_csv('birds.csv')\nprint(f\"@longest[{df['Flipper'].max()}]\")"


def test_slots_printed_with_no_cell_selecting_the_named_value_wait_for_the_note(fake_llm, tmp_path):
    """On a real kernel, with the preview's facts: the task names 'Adelie', the first word
    of one species' label; the cell printed the asked slot from every bird (the held-out
    penguin IQR run, 2026-12-07). The note comes under the cell, with the selection by the
    first word, and the printed slot is not composed into the answer."""
    fixed = EVERY_BIRD.replace(
        "df['Flipper']", "df[df['Species'].str.startswith('Adelie')]['Flipper']"
    )
    longest = max(170 + i * 7 % 31 for i in range(0, 40, 2))
    result = _run_on(
        fake_llm, tmp_path / "birds.csv", BIRDS, BIRDS_MAX, run_cell(EVERY_BIRD), run_cell(fixed)
    )
    seen = fake_llm.requests[1].last_user_text
    assert "the task names 'Adelie' ('Adelie Penguin (P. adeliae)' value of the column" in seen
    assert "df[df['Species'].str.startswith('Adelie')]" in seen
    assert result.status == "ok" and result.answer == f"@longest[{longest}]"
    fake_llm.assert_drained()


ORDERS = "qty,price\n" + "".join(f"{1 + i % 3},{10 + i % 7}.5\n" for i in range(30))
REVENUE = "What is the total revenue (qty times price, summed over all orders)?"
PRECEDENCE = (
    "import pandas as pd\ndf = pd.read_csv('orders.csv')\n"
    "print('Total revenue:', df['qty'] * df['price'].sum())"
)


def test_a_row_wise_series_printed_for_one_total_is_noted_and_its_answer_goes_back(
    fake_llm, tmp_path
):
    """On a real kernel: ``a * b.sum()`` prints 30 values where the task asks one total
    (the scratch sales run, 2026-12-07, answered its first row); the note says so with
    the parentheses, and the answer restating the first row goes back once."""
    total = sum((1 + i % 3) * (10 + i % 7 + 0.5) for i in range(30))
    first = 1 * sum(10 + i % 7 + 0.5 for i in range(30))
    result = _run_on(
        fake_llm, tmp_path / "orders.csv", ORDERS, REVENUE,
        run_cell(PRECEDENCE),
        text(f"The total revenue is {first}."),
        run_cell(PRECEDENCE.replace("df['qty'] * df['price'].sum()",
                                    "(df['qty'] * df['price']).sum()")),
        text(f"The total revenue is {total}."),
    )  # fmt: skip
    seen = fake_llm.requests[1].last_user_text
    assert "this cell printed 30 values (a Series, one per row)" in seen
    assert "`(a * b).sum()`" in seen
    assert result.status == "ok" and result.answer == f"The total revenue is {total}."
    fake_llm.assert_drained()


def test_the_row_wise_product_sent_again_under_the_note_runs_as_the_sum_of_the_product(
    fake_llm, tmp_path
):
    """The scratch chipotle run (2026-12-07) sent ``a * b.sum()`` again under the note,
    twice, and ended with no answer. Sent again, it runs as ``(a * b).sum()``, and the
    notebook says which lever changed it."""
    total = sum((1 + i % 3) * (10 + i % 7 + 0.5) for i in range(30))
    again = "print('Total revenue:', df['qty'] * df['price'].sum())"
    result = _run_on(
        fake_llm, tmp_path / "orders.csv", ORDERS, REVENUE,
        run_cell(PRECEDENCE),
        run_cell(again),
        text(f"The total revenue is {total}."),
    )  # fmt: skip
    assert f"Total revenue: {total}" in fake_llm.requests[2].last_user_text
    assert result.status == "ok" and result.answer == f"The total revenue is {total}."
    nb = nbformat.read(result.notebook, as_version=4)
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert code[1].source == "print('Total revenue:', (df['qty'] * df['price']).sum())"
    assert "pandas_pitfalls" in code[1].metadata["kernel_agent"]["lever"]
    fake_llm.assert_drained()


def test_a_group_total_times_a_column_is_noted_with_the_per_row_way(fake_llm, tmp_path):
    """On a real kernel: the per-order quantity times the per-row price (the scratch
    chipotle run, 2026-12-07) prints a mean from misaligned rows with no error; the note
    names the pairing by index label and the per-row formula grouped after."""
    paired = (
        "import pandas as pd\ndf = pd.read_csv('orders.csv')\n"
        "per_order = df.groupby('qty')['qty'].sum() * df['price']\nprint(per_order.mean())"
    )
    grouped = (
        "print(round(df.assign(v=df['qty'] * df['price']).groupby('qty')['v'].sum().mean(), 2))"
    )
    rows = [(1 + i % 3, 10 + i % 7 + 0.5) for i in range(30)]
    right = round(sum(q * p for q, p in rows) / 3, 2)
    result = _run_on(
        fake_llm, tmp_path / "orders.csv", ORDERS, "What is the average revenue per order?",
        run_cell(paired),
        run_cell(grouped),
        text(f"The average revenue per order is {right}."),
    )  # fmt: skip
    seen = fake_llm.requests[1].last_user_text
    assert "combines a Series of one value per 'qty' group" in seen
    assert "df.assign(v=<the per-row formula>).groupby('qty')['v'].sum()" in seen
    assert "combines a Series" not in fake_llm.requests[2].last_user_text
    assert result.status == "ok" and result.answer == f"The average revenue per order is {right}."
    fake_llm.assert_drained()


def test_a_groups_share_out_of_every_row_is_noted_with_its_own_count(fake_llm, tmp_path):
    """On a real kernel: female survivors out of every passenger (the scratch titanic run,
    2026-12-07, answered 31.7 for 77.3); the note names the group's own count, and the
    share out of it goes out."""
    rows = [("female" if i % 3 == 0 else "male", int(i % 3 == 0 and i % 4 != 0 or i % 7 == 0))
            for i in range(60)]  # fmt: skip
    body = "Sex,Survived\n" + "".join(f"{s},{v}\n" for s, v in rows)
    females = [v for s, v in rows if s == "female"]
    right = round(100 * sum(females) / len(females), 1)
    wrong = (
        "import pandas as pd\ndf = pd.read_csv('titanic.csv')\n"
        "print(round(df[df['Sex'] == 'female']['Survived'].sum() / df['Survived'].count() * 100, 1))"
    )
    result = _run_on(
        fake_llm, tmp_path / "titanic.csv", body,
        "What percentage of female passengers survived? Round to 1 decimal.",
        run_cell(wrong),
        run_cell("print(round(df[df['Sex'] == 'female']['Survived'].mean() * 100, 1))"),
        text(f"{right}% of female passengers survived."),
    )  # fmt: skip
    seen = fake_llm.requests[1].last_user_text
    assert "the task asks for a share of the 'female' rows" in seen
    assert "len(df[df['Sex'] == 'female'])" in seen
    assert "share of the 'female' rows" not in fake_llm.requests[2].last_user_text
    assert result.status == "ok" and result.answer == f"{right}% of female passengers survived."
    fake_llm.assert_drained()


def test_a_summed_count_for_rows_with_at_least_one_is_noted_with_the_comparison(fake_llm, tmp_path):
    """On a real kernel: failures per male student for the share with one (scratch,
    2026-12-08, answered 40.88 for 28.18)."""
    rows = [("M" if i % 2 else "F", (i * 7) % 4 if i % 3 == 0 else 0) for i in range(60)]
    body = "sex,failures\n" + "".join(f"{s},{f}\n" for s, f in rows)
    males = [f for s, f in rows if s == "M"]
    right = round(100 * sum(f >= 1 for f in males) / len(males), 2)
    wrong = (
        "import pandas as pd\ndf = pd.read_csv('students.csv')\nm = df[df['sex'] == 'M']\n"
        "print(round(m['failures'].sum() / len(m) * 100, 2))"
    )
    result = _run_on(
        fake_llm, tmp_path / "students.csv", body,
        "What percentage of male students have at least one past failure? Round to 2 decimals.",
        run_cell(wrong),
        run_cell("print(round((m['failures'] >= 1).mean() * 100, 2))"),
        text(f"{right}% of male students have at least one past failure."),
    )  # fmt: skip
    seen = fake_llm.requests[1].last_user_text
    assert "adds up 'failures': a row with 3 counts 3" in seen, seen
    assert "(m['failures'] >= 1).mean()" in seen
    assert "adds up" not in fake_llm.requests[2].last_user_text
    assert result.status == "ok" and str(right) in result.answer
    fake_llm.assert_drained()


RATINGS = "Branch,Rating\n" + "".join(f"{'NS'[i % 2]},{40 + i * 7 % 59}%\n" for i in range(30))
RATING_MEAN = "What is the mean rating in percent, rounded to 2 decimals?"
TWICE = (
    "import pandas as pd\ndf = pd.read_csv('ratings.csv')\n"
    "df['Rating'] = pd.to_numeric(df['Rating'].str.rstrip('%'))\n"
    "print(round(df['Rating'].mean() * 100, 2))"
)


def test_a_mean_stated_outside_the_column_it_was_taken_of_goes_back_once(fake_llm, tmp_path):
    """On a real kernel: a column of percentages (written '71%'), made a percentage again
    (scratch hotel data, 2026-12-07: 7256.0); the kernel reports the column's range after
    the cell, and the answer goes back once with it."""
    raw = sum(40 + i * 7 % 59 for i in range(30)) / 30
    mean, twice = round(raw, 2), round(raw * 100, 2)
    result = _run_on(
        fake_llm, tmp_path / "ratings.csv", RATINGS, RATING_MEAN,
        run_cell(TWICE),
        text(f"The mean rating in percent is {twice}."),
        run_cell(TWICE.replace(" * 100", "")),
        text(f"The mean rating in percent is {mean}."),
    )  # fmt: skip
    sent_back = fake_llm.requests[2].last_user_text
    assert f"the answer states {twice}" in sent_back
    assert "'Rating' runs from 40 to 97" in sent_back
    assert result.status == "ok" and result.answer == f"The mean rating in percent is {mean}."
    fake_llm.assert_drained()


PULSE = "Pulse\n" + "".join(
    f"{'NA' if i % 9 == 0 else 70 + (i * 37 % 23) - (40 if i in (5, 50) else 0)}\n"
    for i in range(60)
)
PULSE_IQR = (
    "Using the IQR rule on Pulse (outliers are below Q1 - 1.5*IQR or above Q3 + 1.5*IQR), "
    "how many students are outliers?\nGive the final answer in this format: @outliers[count]"
)
PERCENTILES = (
    "import numpy as np\nimport pandas as pd\ndf = pd.read_csv('pulse.csv')\n"
    "q1, q3 = np.percentile(df['Pulse'], [25, 75])\nlow, high = q1 - 1.5 * (q3 - q1), q3 + 1.5 * (q3 - q1)\n"
    "print(f\"@outliers[{((df['Pulse'] < low) | (df['Pulse'] > high)).sum()}]\")"
)


def _pulse_fences() -> tuple[float, float]:
    s = pd.Series([70 + (i * 37 % 23) - (40 if i in (5, 50) else 0) for i in range(60) if i % 9])
    q1, q3 = s.quantile(0.25), s.quantile(0.75)
    return q1 - 1.5 * (q3 - q1), q3 + 1.5 * (q3 - q1)


def _pulse_outliers() -> int:
    s = pd.Series([70 + (i * 37 % 23) - (40 if i in (5, 50) else 0) for i in range(60) if i % 9])
    q1, q3 = s.quantile(0.25), s.quantile(0.75)
    return int(((s < q1 - 1.5 * (q3 - q1)) | (s > q3 + 1.5 * (q3 - q1))).sum())


def test_a_count_the_stated_rule_does_not_give_is_noted_with_the_kernels_recount(
    fake_llm, tmp_path
):
    """On a real kernel: ``np.percentile`` of a column with missing values is ``nan``, so
    no value is outside the fences and the cell printed 0; the rule, recomputed in the
    kernel on ``df['Pulse']`` after the cell, gives the count, the note says it with the
    code, and the slot waits."""
    expected = _pulse_outliers()
    result = _run_on(
        fake_llm, tmp_path / "pulse.csv", PULSE, PULSE_IQR,
        run_cell(PERCENTILES),
        run_cell("s = df['Pulse'].dropna()\nq1, q3 = s.quantile(0.25), s.quantile(0.75)\n"
                 "print(f'@outliers[{((s < q1 - 1.5 * (q3 - q1)) | (s > q3 + 1.5 * (q3 - q1))).sum()}]')"),
    )  # fmt: skip
    seen = fake_llm.requests[1].last_user_text
    assert "@outliers[0]" in seen and "on `df['Pulse']` (53 numeric values" in seen
    assert f"gives {expected}" in seen and "s.quantile(0.25)" in seen
    assert expected > 0 and result.status == "ok" and result.answer == f"@outliers[{expected}]"
    fake_llm.assert_drained()


def test_a_count_kept_in_a_name_is_held_against_the_recount_of_an_earlier_cell(fake_llm, tmp_path):
    """On a real kernel: the first cell computed the quartiles of the column (the rule is
    recounted there); the next printed a sum as the count, from names only: it is held
    against that recount, noted, and the count of the cell after is the answer."""
    expected = _pulse_outliers()
    total = sum(70 + (i * 37 % 23) - (40 if i in (5, 50) else 0) for i in range(60) if i % 9)
    result = _run_on(
        fake_llm, tmp_path / "pulse.csv", PULSE, PULSE_IQR,
        run_cell("import pandas as pd\ndf = pd.read_csv('pulse.csv')\ns = df['Pulse'].dropna()\n"
                 "q1, q3 = s.quantile(0.25), s.quantile(0.75)\nprint(q1, q3)"),
        run_cell("total = s.sum()\nprint(f'@outliers[{int(total)}]')"),
        run_cell("print(f'@outliers[{((s < q1 - 1.5 * (q3 - q1)) | (s > q3 + 1.5 * (q3 - q1))).sum()}]')"),
    )  # fmt: skip
    seen = fake_llm.requests[2].last_user_text
    assert f"@outliers[{total}]" in seen and f"gives {expected}" in seen
    assert result.answer == f"@outliers[{expected}]"
    fake_llm.assert_drained()


def test_an_answer_stating_the_questioned_count_after_a_recount_goes_back_once(fake_llm, tmp_path):
    """The model ran the rule the note gave, which printed the right count, and then
    answered with the count the note questioned (the bundled model did, on the eval's
    tuned half): the answer goes back once with the note; the next one is taken."""
    expected = _pulse_outliers()
    result = _run_on(
        fake_llm, tmp_path / "pulse.csv", PULSE, PULSE_IQR,
        run_cell(PERCENTILES),
        run_cell("s = df['Pulse'].dropna()\nq1, q3 = s.quantile(0.25), s.quantile(0.75)\n"
                 "print(((s < q1 - 1.5 * (q3 - q1)) | (s > q3 + 1.5 * (q3 - q1))).sum())"),
        text("@outliers[0]"),
        text(f"@outliers[{expected}]"),
    )  # fmt: skip
    refused = fake_llm.requests[3].last_user_text
    assert "Your answer states 0, a value an earlier cell printed" in refused
    assert f"gives {expected}" in refused
    assert result.status == "ok" and result.answer == f"@outliers[{expected}]"
    fake_llm.assert_drained()


FENCE_IN_COUNT = (
    "import pandas as pd\ndf = pd.read_csv('pulse.csv')\ns = df['Pulse'].dropna()\n"
    "q1, q3 = s.quantile(0.25), s.quantile(0.75)\nprint(f'@outliers[{q1 - 1.5 * (q3 - q1):.2f}]')"
)


def test_a_fraction_printed_in_a_count_slot_is_noted_and_waits(fake_llm, tmp_path):
    """On a real kernel: the cell printed the lower fence in the slot that asks a count;
    the note says a count is a whole number, and the slot is not composed into the
    answer; the next cell's count is."""
    expected = _pulse_outliers()
    result = _run_on(
        fake_llm, tmp_path / "pulse.csv", PULSE, PULSE_IQR,
        run_cell(FENCE_IN_COUNT),
        run_cell("low, high = q1 - 1.5 * (q3 - q1), q3 + 1.5 * (q3 - q1)\n"
                 "print(f'@outliers[{((s < low) | (s > high)).sum()}]')"),
    )  # fmt: skip
    seen = fake_llm.requests[1].last_user_text
    assert "asks a count in @outliers[...], a whole number" in seen
    assert result.status == "ok" and result.answer == f"@outliers[{expected}]"
    fake_llm.assert_drained()


def test_without_the_lever_the_fence_is_the_count(fake_llm, tmp_path):
    """What the note prevents, on the same kernel code (so the test above can fail)."""
    result = _run_on(
        fake_llm, tmp_path / "pulse.csv", PULSE, PULSE_IQR, run_cell(FENCE_IN_COUNT),
        text("unused"), levers=("printed_answer",),
    )  # fmt: skip
    low = _pulse_fences()[0]
    assert low != int(low) and result.answer == f"@outliers[{round(low)}]"  # composed as a count


def test_an_answer_written_with_a_fraction_for_a_count_goes_back_once(fake_llm, tmp_path):
    """The model wrote its answer itself, with the fence for the count: sent back once
    with the note; the count the next cell prints is the answer."""
    result = _run_on(
        fake_llm, tmp_path / "pulse.csv", PULSE, PULSE_IQR,
        run_cell(FENCE_IN_COUNT.replace("@outliers", "lower fence")),
        text(f"@outliers[{_pulse_fences()[0]:.2f}]"),
        run_cell("low, high = q1 - 1.5 * (q3 - q1), q3 + 1.5 * (q3 - q1)\n"
                 "print(f'@outliers[{((s < low) | (s > high)).sum()}]')"),
    )  # fmt: skip
    assert "asks a count in @outliers[...]" in fake_llm.requests[2].last_user_text
    assert result.answer == f"@outliers[{_pulse_outliers()}]"
    fake_llm.assert_drained()


READINGS = "Ozone,Solar,Temp\n" + "".join(
    f"{'' if i % 4 == 0 else i},{'' if i % 7 == 0 else 2 * i},{60 + i}\n" for i in range(1, 41)
)
INCOMPLETE = (
    "How many days have at least one missing value?\n"
    "Give the final answer in this format: @incomplete_days[integer]"
)
ONE_COLUMN = (
    "import pandas as pd\ndf = pd.read_csv('readings.csv')\n"
    "print(f\"@incomplete_days[{df['Ozone'].isna().sum()}]\")"
)


def test_rows_missing_any_value_counted_in_one_column_are_noted_and_wait(fake_llm, tmp_path):
    """On a real kernel: the cell counted Ozone's gaps where the task asks for the days
    missing any value; the note gives the row-wise count, and the next cell's is the
    answer."""
    expected = sum(1 for i in range(1, 41) if i % 4 == 0 or i % 7 == 0)
    result = _run_on(
        fake_llm, tmp_path / "readings.csv", READINGS, INCOMPLETE,
        run_cell(ONE_COLUMN),
        run_cell("print(f'@incomplete_days[{df.isna().any(axis=1).sum()}]')"),
    )  # fmt: skip
    seen = fake_llm.requests[1].last_user_text
    assert "@incomplete_days[10]" in seen and "`df.isna().any(axis=1).sum()`" in seen
    assert expected != 10 and result.answer == f"@incomplete_days[{expected}]"
    fake_llm.assert_drained()


WIND = "Yr Mo Dy RPT\n" + "".join(
    f"{61 + i // 12} {1 + i % 12} 1 {5 + (i * 7) % 23}.5\n" for i in range(120)
)
WIND_1965 = (
    "Using the file wind.data (years written with two digits): on how many days in 1965 "
    "was RPT above 20?\nGive the final answer in this format: @days[count]"
)
FOUR_DIGITS = (
    "import pandas as pd\ndf = pd.read_csv('wind.data', sep=r'\\s+')\n"
    "print(f\"@days[{((df['Yr'] == 1965) & (df['RPT'] > 20)).sum()}]\")"
)


def test_a_filter_no_row_meets_is_noted_with_the_column_range_and_waits(fake_llm, tmp_path):
    """On a real kernel: the cell filtered a two-digit year column on 1965 and printed 0;
    the condition, tested again in the kernel, meets no row, the note gives the column's
    range, and the count of the next cell is the answer."""
    expected = sum(1 for i in range(120) if 61 + i // 12 == 65 and 5 + (i * 7) % 23 + 0.5 > 20)
    result = _run_on(
        fake_llm, tmp_path / "wind.data", WIND, WIND_1965,
        run_cell(FOUR_DIGITS),
        run_cell("print(f\"@days[{((df['Yr'] == 65) & (df['RPT'] > 20)).sum()}]\")"),
    )  # fmt: skip
    seen = fake_llm.requests[1].last_user_text
    assert "@days[0]" in seen and "no row meets `df['Yr'] == 1965` (0 of 120 rows)" in seen
    assert "`df['Yr']` holds numbers from 61 to 70" in seen
    assert "Rows do meet `df['Yr'] == 65`" in seen
    assert expected > 0 and result.answer == f"@days[{expected}]"
    fake_llm.assert_drained()


def test_the_same_filter_sent_again_runs_with_the_value_as_the_data_writes_it(fake_llm, tmp_path):
    """The bundled model sent the cell again unchanged under the note: it runs with the
    condition rows meet, and its count is the answer; the notebook keeps the code that
    ran, marked with the lever."""
    expected = sum(1 for i in range(120) if 61 + i // 12 == 65 and 5 + (i * 7) % 23 + 0.5 > 20)
    result = _run_on(
        fake_llm, tmp_path / "wind.data", WIND, WIND_1965, run_cell(FOUR_DIGITS),
        run_cell(FOUR_DIGITS.replace("import pandas as pd\n", "")),
    )  # fmt: skip
    assert expected > 0 and result.answer == f"@days[{expected}]"
    nb = nbformat.read(result.notebook, as_version=4)
    rewritten = [c for c in nb.cells if c.cell_type == "code"][-1]
    assert "df['Yr'] == 65" in rewritten.source and "1965" not in rewritten.source
    assert "pandas_pitfalls" in rewritten.metadata["kernel_agent"]["lever"]
    fake_llm.assert_drained()


COVID = "date,location,new_cases\n" + "".join(
    f"{d:%m/%d/%Y},Italy,{i}\n" for i, d in enumerate(pd.date_range("2020-02-20", periods=40))
)
ISO_MONTH = (
    "import pandas as pd\ndf = pd.read_csv('covid.csv')\n"
    "print(df[df['date'].str.contains('2020-03')]['new_cases'].sum())"
)


def test_an_iso_month_on_dates_written_otherwise_runs_on_the_dates_in_iso_form(fake_llm, tmp_path):
    """On a real kernel: '2020-03' looked for in dates written '03/15/2020' (the scratch
    covid run, 2026-12-07, printed 0 and sent the cell again). The note gives the condition
    on the dates in ISO form, from the preview's format, and the cell sent again runs with
    it: its sum is March's."""
    march = sum(i for i, d in enumerate(pd.date_range("2020-02-20", periods=40)) if d.month == 3)
    result = _run_on(
        fake_llm, tmp_path / "covid.csv", COVID, "How many new cases were there in March 2020?",
        run_cell(ISO_MONTH),
        run_cell(ISO_MONTH.replace("import pandas as pd\n", "")),
        text(f"There were {march} new cases."),
    )  # fmt: skip
    seen = fake_llm.requests[1].last_user_text
    iso = (
        "pd.to_datetime(df['date'], format='%m/%d/%Y').dt.strftime('%Y-%m-%d')"
        ".str.contains('2020-03')"
    )
    assert "Its dates are written in another form than the value asked" in seen and iso in seen
    assert f"{march}" in fake_llm.requests[2].last_user_text
    assert result.status == "ok" and result.answer == f"There were {march} new cases."
    code = [c for c in nbformat.read(result.notebook, as_version=4).cells if c.cell_type == "code"]
    assert (
        iso in code[-1].source and "pandas_pitfalls" in code[-1].metadata["kernel_agent"]["lever"]
    )
    fake_llm.assert_drained()


@pytest.mark.parametrize(
    ("path", "body", "task", "code", "answer", "printed"),
    [
        ("salaries.csv", SALARIES, PROFS,
         SLIPPED.replace("df['rank'] == 'Prof' &", "(df['rank'] == 'Prof') &"), "unused",
         "@count[30]"),
        ("groups.csv", GROUPS, CORR, EMPTIED, "@corr[nan]", "@corr[nan]"),
        ("pulse.csv", PULSE, PULSE_IQR, PERCENTILES, "unused", "@outliers[0]"),
        ("readings.csv", READINGS, INCOMPLETE, ONE_COLUMN, "unused", "@incomplete_days[10]"),
        ("wind.data", WIND, WIND_1965, FOUR_DIGITS, "unused", "@days[0]"),
        ("waits.csv", WAITS, PEARSON, GAPS, "The correlation is nan.",
         "The correlation is nan."),
        ("cars.txt", CARS, CITROEN, EVERY_CAR, "The mean is 24500.0.", "The mean is 24500.0."),
        ("ratings.csv", RATINGS, RATING_MEAN, TWICE, "It is 6890.0.", "It is 6890.0."),
        ("birds.csv", BIRDS, BIRDS_MAX, EVERY_BIRD, "unused", "@longest[219]"),
    ],
    ids=["every-row", "nan", "nan-fences", "one-column-gaps", "empty-filter", "nan-sentence",
         "named-value", "out-of-range", "named-value-slots"],
)  # fmt: skip
def test_without_the_lever_the_slipped_value_is_the_answer(
    fake_llm, tmp_path, path, body, task, code, answer, printed
):
    """What each note above prevents, on the same kernel code (so its test can fail): with
    only ``printed_answer``, the value the slip printed is the answer."""
    result = _run_on(
        fake_llm, tmp_path / path, body, task, run_cell(code), text(answer),
        levers=("printed_answer",),
    )  # fmt: skip
    assert result.answer == printed


SHOPS = "Shop,Sales\n" + "".join(f"Shop {i:02d},{1000 + (i * 37) % 101}\n" for i in range(30))
BEST_SHOP = "Which shop has the highest sales?"
MAX_ONLY = "import pandas as pd\ndf = pd.read_csv('shops.csv')\nprint(df['Sales'].max())"


def test_an_answer_naming_a_label_only_the_previews_rows_show_goes_back_once(fake_llm, tmp_path):
    """On a real kernel, with the preview's facts: the cell printed the highest sales alone
    and the answer named the preview's third shop (scratch, 2026-12-07); it goes back once,
    and the answer after a cell that printed the shop is taken."""
    best = max(range(30), key=lambda i: (1000 + (i * 37) % 101, -i))
    labelled = MAX_ONLY.replace(
        "print(df['Sales'].max())", "print(df.loc[df['Sales'].idxmax(), ['Shop', 'Sales']])"
    )
    result = _run_on(
        fake_llm, tmp_path / "shops.csv", SHOPS, BEST_SHOP,
        run_cell(MAX_ONLY),
        text("The shop with the highest sales is Shop 02."),
        run_cell(labelled),
        text(f"The shop with the highest sales is Shop {best:02d}."),
    )  # fmt: skip
    sent_back = fake_llm.requests[2].last_user_text
    assert "the answer names 'Shop 02', which no cell printed" in sent_back
    assert result.answer == f"The shop with the highest sales is Shop {best:02d}."
    fake_llm.assert_drained()


def test_an_answer_naming_a_label_a_cell_printed_is_taken(fake_llm, tmp_path):
    """The twin: the cell printed the shop, which is also in the preview's first rows."""
    first = "import pandas as pd\ndf = pd.read_csv('shops.csv')\nprint(df['Shop'].iloc[1])"
    result = _run_on(
        fake_llm, tmp_path / "shops.csv", SHOPS, "Which shop is second in the file?",
        run_cell(first), text("The second shop is Shop 01."),
    )  # fmt: skip
    assert result.answer == "The second shop is Shop 01." and len(fake_llm.requests) == 2
    fake_llm.assert_drained()


FILMS = "title,release_date\n" + "".join(
    f"F{i},{2000 + i % 7}-{1 + i % 12:02d}-{1 + i % 5:02d}\n" for i in range(40)
)
BUSIEST = "In which year were the most movies released?"
BY_DAY = (
    "import pandas as pd\ndf = pd.read_csv('films.csv')\n"
    "df['release_date'] = pd.to_datetime(df['release_date'])\n"
    "print(df.groupby('release_date').size().idxmax())"
)


def test_a_full_date_printed_for_the_year_asked_is_noted_and_its_answer_goes_back(
    fake_llm, tmp_path
):
    """On a real kernel: grouped by the date, the cell printed the busiest day (the scratch
    TMDB run, 2026-12-07, answered that day's year); the note asks for the year's groups,
    and the answer after a cell grouping by the year is taken."""
    by_year = BY_DAY.replace("df.groupby('release_date')", "df.groupby(df['release_date'].dt.year)")
    counts = {y: sum(1 for i in range(40) if 2000 + i % 7 == y) for y in range(2000, 2007)}
    busiest = max(counts, key=lambda y: (counts[y], -y))
    result = _run_on(
        fake_llm, tmp_path / "films.csv", FILMS, BUSIEST,
        run_cell(BY_DAY),
        text("The most movies were released in 2000."),
        run_cell(by_year),
        text(f"The most movies were released in {busiest}."),
    )  # fmt: skip
    assert "its groups are days, not years" in fake_llm.requests[1].last_user_text
    assert result.answer == f"The most movies were released in {busiest}."
    fake_llm.assert_drained()
