"""The preview reads files whose shape a plain ``pd.read_csv`` gets wrong, on a real kernel.

From a fourth scratch set of Kaggle-style files (2026-12-07): UCI's ``a, b`` exports, a
file with no header line, notes below the table, negatives in parentheses, copies of
rows, JSON lines and a workbook whose first sheet is a cover. Each read line and fix the
preview prints is run as the model would run it, and must give the right numbers; each
check has a twin it must leave alone.
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from kernel_agent.kernel_state.kernel_probe import data_preview_expression, parse_text_expression
from kernel_agent.kernel_state.preview_facts import split_facts

pytestmark = pytest.mark.timeout(180)


def stdout(result) -> str:
    return "".join(o.get("text", "") for o in result.outputs if o.get("name") == "stdout")


def preview_of(kernel, folder: Path, task: str = "", facts: bool = False) -> str:
    assert kernel.execute(f"import os; os.chdir({str(folder)!r})", timeout=30).ok
    asked = {"p": data_preview_expression(budget_chars=4000, focus=task, facts=facts)}
    result = kernel.execute("", timeout=120, user_expressions=asked)
    assert result.ok, result.error
    return parse_text_expression(result.user_expressions["p"]) or ""


def read_line(out: str) -> str:
    lines = [ln.split("read it with: ", 1)[1] for ln in out.splitlines() if "read it with: " in ln]
    assert len(lines) == 1, out
    return lines[0]


def run(kernel, code: str) -> str:
    result = kernel.execute("import pandas as pd\n" + code, timeout=60)
    assert result.ok, (code, result.error)
    return stdout(result)


def folder_with(kernel_workdir: Path, name: str, files: dict[str, str | bytes]) -> Path:
    folder = kernel_workdir / name
    folder.mkdir(exist_ok=True)
    for file, body in files.items():
        path = folder / file
        path.write_bytes(body) if isinstance(body, bytes) else path.write_text(body)
    return folder


def test_a_blank_after_each_separator_is_read_away(kernel, kernel_workdir):
    rows = [
        f"{20 + i}, {'?' if i % 7 == 0 else ['Private', 'State-gov'][i % 2]}, {i % 3}"
        for i in range(40)
    ]
    folder = folder_with(
        kernel_workdir, "spaced", {"adult.csv": "age, workclass, n\n" + "\n".join(rows) + "\n"}
    )
    out = preview_of(kernel, folder, "workclass", facts=True)
    text, facts = split_facts(out)
    assert "skipinitialspace=True" in read_line(text) and facts["adult.csv"].spaced
    assert "'workclass' writes a missing value as '?'" in text, text
    got = run(
        kernel,
        f"df = {read_line(text)}\nprint(list(df.columns), (df['workclass'] == 'Private').sum())",
    )
    assert got == f"['age', 'workclass', 'n'] {sum(1 for i in range(40) if i % 7 and i % 2 == 0)}\n"


def test_a_comma_then_text_with_blanks_is_not_a_spaced_file(kernel, kernel_workdir):
    body = "name,city\n" + "".join(f"n{i},{' ' if i % 2 else ''}Paris\n" for i in range(20))
    out = preview_of(kernel, folder_with(kernel_workdir, "halfspaced", {"t.csv": body}))
    assert "skipinitialspace" not in out, out


def test_a_file_without_a_header_is_read_with_header_none(kernel, kernel_workdir):
    rows = [
        f"{5 + i / 10:.1f},{3 + i % 5 / 10:.1f},{['Iris-setosa', 'Iris-virginica'][i % 2]}"
        for i in range(30)
    ]
    folder = folder_with(kernel_workdir, "headless", {"iris.data": "\n".join(rows) + "\n"})
    out = preview_of(kernel, folder, facts=True)
    text, facts = split_facts(out)
    assert "30 rows x 3 columns" in text and "header=None" in read_line(text), text
    assert facts["iris.data"].headerless
    assert "columns: 0 float64, 1 float64, 2 str" in text, "named as code writes them: df[0]"
    got = run(kernel, f"df = {read_line(text)}\nprint(len(df), round(df[0].sum(), 1))")
    assert got == f"30 {round(sum(5 + i / 10 for i in range(30)), 1)}\n"


@pytest.mark.parametrize(
    "body",
    [
        "Country,1990,1991\n" + "".join(f"C{i},{i},{i + 1}\n" for i in range(20)),  # years
        "0,1,2\n" + "".join(f"{i},{i * 2},{i * 3}\n" for i in range(20)),  # a count
        "id,score\n" + "".join(f"{i},{i * 2}\n" for i in range(20)),
    ],
)
def test_a_header_of_years_or_a_count_is_a_header(kernel, kernel_workdir, body):
    folder = folder_with(kernel_workdir, f"header-{abs(hash(body)) % 10_000}", {"t.csv": body})
    out = preview_of(kernel, folder)
    assert "header=None" not in out and "20 rows x" in out, out


def test_notes_below_the_table_are_not_rows(kernel, kernel_workdir):
    values = [round(10 + (i * 37 % 89) / 1.3, 1) for i in range(60)]
    body = "Year,Country,Value\n" + "".join(
        f"{1960 + i},Freedonia,{v}\n" for i, v in enumerate(values)
    )
    body += "\nSource: World Development Indicators, 2024\nLast updated: 2024-01-15\n"
    folder = folder_with(kernel_workdir, "footer", {"wdi.csv": body})
    out = preview_of(kernel, folder, "Value", facts=True)
    text, facts = split_facts(out)
    assert "60 rows x 3 columns" in text and "skipfooter=2" in read_line(text), text
    assert "'Year' int64" in text and facts["wdi.csv"].skipfooter == 2
    got = run(
        kernel, f"df = {read_line(text)}\nprint(df['Year'].dtype, round(df['Value'].mean(), 2))"
    )
    assert got == f"int64 {round(sum(values) / 60, 2)}\n"


@pytest.mark.parametrize(
    "body",
    [
        "a,b,c\n"
        + "".join(f"{i},{i},{i}\n" for i in range(20))
        + "5,6\n",  # a row that stops early
        "name,score\n" + "".join(f"n{i},{i}\n" for i in range(20)) + "n3\n",  # a known name
    ],
)
def test_a_last_row_that_stops_early_is_a_row(kernel, kernel_workdir, body):
    folder = folder_with(kernel_workdir, f"short-{abs(hash(body)) % 10_000}", {"t.csv": body})
    out = preview_of(kernel, folder)
    assert "skipfooter" not in out and "21 rows x" in out, out


def test_negatives_in_parentheses_and_copied_rows(kernel, kernel_workdir):
    profits = [(-1) ** i * (i * 13.25 + 1000 * (i % 4 == 0)) for i in range(30)]
    written = [f"({-p:,.2f})" if p < 0 else f"{p:,.2f}" for p in profits]
    rows = [f'CA-{i},"{w}"' for i, w in enumerate(written)]
    body = "Order ID,Profit\n" + "\n".join(rows + rows[:4]) + "\n"
    folder = folder_with(kernel_workdir, "accounting", {"orders.csv": body})
    out = preview_of(kernel, folder, "Profit, after removing duplicate rows")
    assert "negatives in parentheses" in out and "duplicate rows: 4 " in out, out
    fix = next(ln for ln in out.splitlines() if "negatives in parentheses" in ln)
    code = "df = pd.read_csv('orders.csv').drop_duplicates()\ndf[" + fix.split(": df[", 1)[1]
    got = run(kernel, code + "\nprint(round(df['Profit'].sum(), 2), (df['Profit'] < 0).sum())")
    assert got == f"{round(sum(profits), 2)} {sum(p < 0 for p in profits)}\n"
    plain = folder_with(
        kernel_workdir,
        "plainmoney",
        {"m.csv": "k,v\n" + "".join(f"k{i},{i}.5\n" for i in range(20))},
    )
    out = preview_of(kernel, plain, "v after removing duplicate rows")
    assert "parentheses" not in out and "duplicate rows" not in out, out
    out = preview_of(kernel, folder, "Profit")  # copies are only named when the task asks
    assert "negatives in parentheses" in out and "duplicate rows" not in out, out


def test_json_lines_and_a_workbook_say_how_to_read_them(kernel, kernel_workdir):
    records = "".join(json.dumps({"id": i, "rating": i % 5 + 1}) + "\n" for i in range(20))
    folder = folder_with(kernel_workdir, "jsonl", {"r.jsonl": records})
    got = run(kernel, f"df = {read_line(preview_of(kernel, folder))}\nprint(df['rating'].sum())")
    assert got == f"{sum(i % 5 + 1 for i in range(20))}\n"
    book = kernel_workdir / "book"
    book.mkdir(exist_ok=True)
    with pd.ExcelWriter(book / "report.xlsx") as writer:
        pd.DataFrame({"Note": ["cover"]}).to_excel(writer, sheet_name="Cover", index=False)
        pd.DataFrame({"Revenue": [1.5, 2.5]}).to_excel(writer, sheet_name="Data", index=False)
    out = preview_of(kernel, book)
    data = [ln for ln in out.splitlines() if "sheet_name='Data'" in ln]
    assert len(data) == 1, out
    got = run(
        kernel,
        "df = " + data[0].split("read it with: df = ", 1)[1] + "\nprint(df['Revenue'].sum())",
    )
    assert got == "4.0\n"


def test_a_code_pandas_reads_as_missing_is_read_as_a_value(kernel, kernel_workdir):
    """A drinks file's continents 'AF', 'EU', ... 'NA' (North America): pandas reads 'NA' as
    missing, and "the countries of North America" found none (scratch, 2026-12-07)."""
    conts = ["AF", "EU", "NA", "SA", "AS"]
    rows = [f"c{i},{10 * i},{conts[i % 5]}" for i in range(40)] + ["c40,7,"]
    folder = folder_with(
        kernel_workdir, "codes", {"drinks.csv": "country,beer,continent\n" + "\n".join(rows)}
    )
    text, facts = split_facts(preview_of(kernel, folder, facts=True))
    assert "'NA' in 'continent' is a code like the column's others, not a gap" in text, text
    assert "'AF', 'AS', 'EU', 'NA', 'SA'" in text and facts["drinks.csv"].kept == ("",)
    got = run(
        kernel,
        f"df = {read_line(text)}\nprint((df['continent'] == 'NA').sum(), "
        "df['continent'].isna().sum())",
    )
    assert got == "8 1\n"  # the empty field is still a gap


@pytest.mark.parametrize(
    "values",
    [["Grvl", "Pave", "NA"], ["AF", "EU", "NA"][:2] + ["NA"], ["AF", "EU", "SA", "NA", "Eur"]],
)
def test_na_among_values_of_other_shapes_or_too_few_stays_a_gap(kernel, kernel_workdir, values):
    """House Prices' Alley ('Grvl', 'Pave', 'NA' for none) is not a code by shape; two other
    values are too few to say."""
    rows = [f"{i},{values[i % len(values)]}" for i in range(30)]
    name = "gap" + "".join(values)
    folder = folder_with(kernel_workdir, name, {"h.csv": "id,alley\n" + "\n".join(rows)})
    text, facts = split_facts(preview_of(kernel, folder, facts=True))
    assert "is a code like" not in text and facts["h.csv"].kept is None, text


@pytest.mark.parametrize("newest_first", [True, False])
def test_rows_that_run_newest_first_are_named(kernel, kernel_workdir, newest_first):
    """A stock export, newest day first: "the Close on the first trading day of 2014" was
    answered from the first row, the last day (scratch, 2026-12-07). The twin runs oldest
    first and gets no note; the sort the note asks for gives the first day."""
    days = pd.bdate_range("2014-01-02", periods=30).strftime("%Y-%m-%d").tolist()
    rows = [f"{d},{100 + i}" for i, d in enumerate(days)]
    body = "Date,Close\n" + "\n".join(rows[::-1] if newest_first else rows) + "\n"
    folder = folder_with(kernel_workdir, f"stock{newest_first}", {"s.csv": body})
    text = preview_of(kernel, folder, "the first trading day")
    assert (
        "the rows run newest first, from '2014-02-12' back to '2014-01-02': sort oldest first (df = df.sort_values('Date'))"
        in text
    ) is (newest_first), text
    got = run(
        kernel,
        "df = pd.read_csv('s.csv')\ndf['Date'] = pd.to_datetime(df['Date'])\n"
        "print(df.sort_values('Date').iloc[0]['Close'])",
    )
    assert got == "100\n"


def test_several_values_in_a_cell_are_named_with_the_split(kernel, kernel_workdir):
    """Netflix's listed_in ('Dramas, Comedies') and IMDB's genres ('Action|Drama'): "the
    most common genre" needs one row per value. The split the preview prints, run as the
    model would, counts each genre."""
    genres = ["Dramas", "Comedies", "Documentaries", "Horror Movies"]
    cells = [", ".join(genres[j % 4] for j in range(i, i + 1 + i % 3)) for i in range(40)]
    piped = [c.replace(", ", "|") for c in cells]
    rows = [f'{i},"{c}",{p}' for i, (c, p) in enumerate(zip(cells, piped, strict=True))]
    folder = folder_with(
        kernel_workdir, "several", {"n.csv": "id,listed_in,genre\n" + "\n".join(rows) + "\n"}
    )
    text = preview_of(kernel, folder, "the most common listed_in and genre")
    fixes = [ln.split("one row per value: ", 1)[1] for ln in text.splitlines() if "per value" in ln]
    assert len(fixes) == 2, text
    want = pd.Series([g.strip() for c in cells for g in c.split(",")]).value_counts()
    for fix in fixes:
        column = fix.split("'")[1]  # df['listed_in'] = ...
        got = run(
            kernel,
            f"df = pd.read_csv('n.csv')\n{fix}\nprint(df[{column!r}].value_counts().to_dict())",
        )
        assert got == f"{want.to_dict()}\n"


@pytest.mark.parametrize(
    "cells",
    [
        [f"Smith{i % 9}, John{i % 5}" for i in range(40)],  # always two parts: a name
        [f"The {i}th visit, and the {i + 1}th, were fine" for i in range(40)],  # a sentence
    ],
)
def test_a_name_with_a_comma_or_a_sentence_is_one_value(kernel, kernel_workdir, cells):
    rows = [f'{i},"{c}"' for i, c in enumerate(cells)]
    folder = folder_with(
        kernel_workdir, "one" + cells[0][:5], {"o.csv": "id,note\n" + "\n".join(rows)}
    )
    assert "several values" not in preview_of(kernel, folder, "note"), cells[0]


@pytest.mark.parametrize("spaced", [True, False])
def test_a_score_out_of_five_is_a_number_with_text(kernel, kernel_workdir, spaced):
    """Zomato's rate ('4.1/5', 'NEW', '-'): its mean is of the first numbers. Written
    '4.1/5' alone, it was taken for a date ('2.7/5' as day.month/year) and had no line."""
    blank = " " if spaced else ""
    scores = [f"{1.5 + (i * 7 % 31) / 10:.1f}{'/5' if i % 2 else blank + '/5'}" for i in range(60)]
    scores[::9] = ["NEW"] * len(scores[::9])
    folder = folder_with(
        kernel_workdir,
        f"rate{spaced}",
        {"z.csv": "name,rate\n" + "".join(f"r{i},{s}\n" for i, s in enumerate(scores))},
    )
    text = preview_of(kernel, folder, "the mean rate")
    fix = next(ln for ln in text.splitlines() if "'rate' holds numbers with text" in ln)
    got = run(
        kernel,
        f"df = pd.read_csv('z.csv')\ndf['rate'] = {fix.split('the first number: ')[1]}"
        "\nprint(round(df['rate'].mean(), 4))",
    )
    want = pd.Series([float(s.split("/")[0]) for s in scores if s != "NEW"]).mean()
    assert got == f"{round(want, 4)}\n"


@pytest.mark.parametrize(
    ("task", "shown"),
    [
        ("How many new_cases did Italy report in March?", True),
        ("How many new_cases did Italy report in 2020?", True),
        ("How many new_cases did Italy report?", False),
    ],
)
def test_a_month_or_a_year_in_the_task_shows_the_date_fix(kernel, kernel_workdir, task, shown):
    """A long-format covid file (scratch, 2026-12-07): "new cases in March 2020" named
    new_cases, and the date column's fix went to the aside line ("leave them as they
    are"), though the task selects by it."""
    days = pd.date_range("2020-02-20", periods=40).strftime("%m/%d/%Y")
    rows = [f"{d},Italy,{i}" for i, d in enumerate(days)]
    folder = folder_with(
        kernel_workdir, "covid", {"c.csv": "date,location,new_cases\n" + "\n".join(rows)}
    )
    text = preview_of(kernel, folder, task)
    fix = "df['date'] = pd.to_datetime(df['date'], format='%m/%d/%Y')"
    assert (fix in text) is shown, text
