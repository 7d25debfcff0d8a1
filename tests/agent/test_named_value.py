"""named_value: a value the task names, which the data holds, that no cell selected rows by
(pure units on the task, the cells and the preview's facts; the lever with a real kernel:
tests/agent/levers/test_pandas_pitfalls.py)."""

from __future__ import annotations

from datetime import datetime, timezone

import pytest
from nbformat.v4 import new_output

from kernel_agent.agent.named_value import NamedValue, unused_named_value
from kernel_agent.kernel_state.preview_facts import FileFacts
from kernel_agent.results import CellResult

FACTS = {
    "cars.txt": FileFacts(
        delimited=True,
        columns=("Make ", "Price", "Fuel"),
        values={"Make ": ("Citroën", "Peugeot", "Toyota"), "Fuel": ("Diesel", "Petrol")},
    )
}
READ = "import pandas as pd\ndf = pd.read_csv('cars.txt', sep='|')\n"
PRICE = "What is the average price of the Citroën cars?"


def cell(code: str, printed: str = "", status: str = "ok") -> CellResult:
    now = datetime.now(timezone.utc)
    outputs = [new_output("stream", name="stdout", text=printed)] if printed else []
    return CellResult(code, status, 1, outputs, None, now, now)


@pytest.mark.parametrize(
    ("task", "code", "printed", "found"),
    [
        # the scratch run: every car's mean, printed in a sentence that names Citroën
        (PRICE, READ + "print(f\"The average price of the Citroën cars is {df['Price'].mean()}\")",
         "The average price of the Citroën cars is 29469.08", ("Make ", "Citroën")),
        (PRICE, READ + "print('Citroën', df['Price'].mean())", "Citroën 29469.08",
         None),  # printed first on its line: a group shown, as a table would
        ("How much do Diesel cars cost on average?", READ + "print(df['Price'].mean())", "3.0",
         ("Fuel", "Diesel")),
    ],
)  # fmt: skip
def test_a_named_value_no_cell_selected_is_found(task, code, printed, found):
    hit = unused_named_value(task, [cell(code, printed)], FACTS)
    if found is None:
        assert hit is None
    else:
        assert hit == NamedValue(*found)
        assert f"df[df[{found[0]!r}] == {found[1]!r}]" in hit.note()


@pytest.mark.parametrize(
    "code",
    [
        READ + "print(df[df['Make '] == 'Citroën']['Price'].mean())",
        READ + "print(f\"{df[df['Make '].str.strip() == 'Citroën'].Price.mean():.2f}\")",
        READ + "c = df.loc[df['Make '].isin(['Citroën'])]\nprint(c.Price.mean())",
        READ + "print(df.groupby('Make ')['Price'].mean()['citroën'.title()])",  # spelt out
        READ + "print(df.query(\"`Make ` == 'CITROËN'\").Price.mean())",  # another case
        "df[df['Make '] == 'Citroën'  # does not parse",
    ],
)
def test_a_cell_that_selects_by_the_value_uses_it(code):
    first = cell(READ + "print(df.head())", "   Make  Price\n0  Toyota  1")
    assert unused_named_value(PRICE, [first, cell(code, "29130.96")], FACTS) is None


@pytest.mark.parametrize(
    "task",
    [
        "What is the average price of all cars?",  # names no value
        "Which fuel is cheaper on average, diesel or petrol?",  # names every value of Fuel
        "What is the price of the Citroënx?",  # not the word
        "What is the average price? Answer in @Peu[value]",  # no word of its own
        "How much does a car cost after the diesel tax?",  # 'Diesel' is capitalized: not it
    ],
)
def test_a_task_that_names_no_value_or_every_value_is_not_questioned(task):
    assert unused_named_value(task, [cell(READ + "print(1)", "1")], FACTS) is None


def test_short_and_numeric_values_are_not_looked_for():
    facts = {"f.csv": FileFacts(delimited=True, columns=("g",), values={"g": ("A", "12", "B")})}
    assert (
        unused_named_value("What is the mean of group A in 12?", [cell("print(1)", "1")], facts)
        is None
    )


SPECIES = {
    "p.csv": FileFacts(
        delimited=True,
        columns=("Species", "Flipper"),
        values={
            "Species": (
                "Adelie Penguin (Pygoscelis adeliae)",
                "Chinstrap penguin (Pygoscelis antarctica)",
                "Gentoo penguin (Pygoscelis papua)",
            )
        },
    )
}


def test_a_long_label_named_by_its_first_word_is_found_and_selected_by_it():
    task = "Among Adelie penguins, how many flippers are outliers?"
    hit = unused_named_value(task, [cell("print(df['Flipper'].max())", "231")], SPECIES)
    assert hit == NamedValue("Species", "Adelie Penguin (Pygoscelis adeliae)", "Adelie")
    assert "df[df['Species'].str.startswith('Adelie')]" in hit.note()
    for code, printed in (
        ("a = df[df['Species'].str.contains('Adelie')]\nprint(a['Flipper'].max())", "210"),
        ("print(df.groupby('Species')['Flipper'].max())", "Adelie Penguin (Pygo...    210"),
    ):
        assert unused_named_value(task, [cell(code, printed)], SPECIES) is None, code


def test_a_first_word_shared_or_too_short_names_no_value():
    shared = {
        "f.csv": FileFacts(
            delimited=True, columns=("g",),
            values={"g": ("Blue whale", "Blue shark", "Red fox"), "h": ("Ox cart", "Yak")},
        )
    }  # fmt: skip
    for task in ("How long are blue animals?", "How heavy is an ox?"):
        assert unused_named_value(task, [cell("print(1)", "1")], shared) is None, task


def test_a_capitalized_value_is_named_only_as_written_and_capitals_in_any_case():
    """The held-out survey chain (2026-12-07): "how many students are left" named W.Hnd's
    'Left' in any case, and the note went to a right answer."""
    hands = {
        "s.csv": FileFacts(
            delimited=True, columns=("W.Hnd", "Sex", "Smoke"),
            values={"W.Hnd": ("Left", "Right"), "Sex": ("MALE", "FEMALE"),
                    "Smoke": ("never", "heavy", "occas")},
        )
    }  # fmt: skip
    idle = [cell("print(1)", "1")]
    assert unused_named_value("How many students are left?", idle, hands) is None
    for task, value in (
        ("How many Left-handed students?", "Left"),
        ("How many male students?", "MALE"),
        ("Never smokers: how many? Only never, not heavy.", "never"),
        ("Heavy smokers: how many?", "heavy"),
    ):
        hit = unused_named_value(task, idle, hands)
        assert hit is not None and hit.value == value, task


def _failed(code: str, line: int | None) -> CellResult:
    """A cell that raised in its own line ``line`` (an IPython traceback; None: no line)."""
    from kernel_agent.results import CellError

    where = [f"Cell In[2], line {line}"] if line else []
    failed = cell(code, status="error")
    error = CellError("ValueError", "Lengths must match to compare", ["ValueError", *where])
    return CellResult(code, "error", 1, [], error, failed.started, failed.ended)


@pytest.mark.parametrize(
    ("line", "found"),
    [
        (4, True),  # the line that selects by the value is the one that failed
        (5, False),  # it ran; a later line failed
        (None, True),  # no line named: nothing of the failed cell counts
    ],
)
def test_a_selection_in_a_line_that_failed_selected_nothing(line, found):
    """A scratch join (2026-12-07): the first cell's filter by the named city raised,
    the next cell dropped the filter and summed every row; the note never came because the
    failed line held the value."""
    failing = READ + "x = 1\nc = df[df['Make '] == 'Citroën']\nprint(c['Price'].mean())"
    cells = [_failed(failing, line), cell(READ + "print(df['Price'].mean())", "29469.08")]
    hit = unused_named_value(PRICE, cells, FACTS)
    assert (hit == NamedValue("Make ", "Citroën")) is found, hit


def test_a_plural_names_its_value():
    """ "The mean age of programmers" (scratch, 2026-12-07): every user's mean age went out."""
    users = {
        "u.user": FileFacts(
            delimited=True, columns=("occupation", "gender", "type"),
            values={"occupation": ("programmer", "student", "librarian"),
                    "gender": ("male", "female"), "type": ("Movie", "TV Show")},
        )
    }  # fmt: skip
    idle = [cell("print(df['age'].mean())", "41.38")]
    for task, value in (
        ("What is the mean age of programmers?", "programmer"),
        ("How old are the librarians on average?", "librarian"),
        ("What is the survival rate of females?", "female"),
        ("How long are the movies on average?", "Movie"),
    ):
        hit = unused_named_value(task, idle, users)
        assert hit is not None and hit.value == value, task
    assert unused_named_value("What is the mean age of programmersx?", idle, users) is None
    assert unused_named_value("How many males and females?", idle, users) is None  # every value
