"""unread_columns: the columns a task names, read loosely, and those no cell wrote."""

from __future__ import annotations

from kernel_agent.agent.unread_columns import named_columns, unread_columns

COLUMNS = ["weight", "Time", "Chick", "Diet", "Flipper Length (mm)", "Solar.R", "id"]


def test_a_column_is_named_in_any_case_without_its_unit_and_with_dots_as_spaces():
    task = "Among chicks on diet 1, what is the mean flipper length and the max Solar R?"
    assert named_columns(task, COLUMNS) == ["Diet", "Flipper Length (mm)", "Solar.R"]


def test_a_name_inside_a_word_or_of_two_letters_is_not_named():
    assert named_columns("Which identifier weighs most, by id?", COLUMNS) == []
    assert named_columns("The weights over timelines", COLUMNS) == []


def test_a_named_column_no_cell_writes_is_unread():
    task = "Among chicks on Diet 1, how many weight measurements are outliers?"
    code = "df = pd.read_csv('chick.csv')\nprint((df['weight'] > 300).sum())"
    assert unread_columns(task, COLUMNS, [code]) == ["Diet"]
    selected = code.replace("(df['weight']", "(df[df.Diet == 1]['weight']")
    assert unread_columns(task, COLUMNS, [code, selected]) == []


def test_renamed_columns_and_no_code_tell_nothing():
    task = "Among chicks on Diet 1, what is the mean weight?"
    assert unread_columns(task, COLUMNS, []) == []
    renamed = "df.columns = [c.lower() for c in df.columns]\nprint(df[df.diet == 1].weight.mean())"
    assert unread_columns(task, COLUMNS, [renamed]) == []


def test_a_data_file_named_in_the_task_names_no_column():
    task = "Using the file chick.csv: what is the mean weight?"
    assert named_columns(task, COLUMNS) == ["weight", "Chick"]
    assert named_columns(task, COLUMNS, files=["chick.csv"]) == ["weight"]
