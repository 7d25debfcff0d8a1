"""answer_check: each kind of problem goes back once a task; a printed answer gets a note."""

from __future__ import annotations

from lever_cells import ok

from kernel_agent.agent.levers.answer_check import AnswerCheck
from kernel_agent.agent.state import TaskState
from kernel_agent.results import CellResult

PREVIEW = (
    "Files in the working directory (a preview; column names are exact):\n"
    "spotify.csv (102.5 KB)\n  953 rows x 24 columns\n"
    "  columns: 'track_name' str, 'artist(s)_name' str, 'streams' str, 'bpm' int64\n"
    "  missing values: 'key' 95\n"
    "     track_name artist(s)_name    streams  bpm\n"
    "  0  Seven (feat. Latto)  Latto, Jung Kook  141381703  125\n"
)


def cell(printed: str) -> CellResult:
    return ok("print(x)", printed)


def test_the_lever_asks_once_per_kind_and_notes_a_printed_answer():
    task = "What is the mean of streams? Answer as @mean_streams[value]."
    state = TaskState(task, told=[PREVIEW])
    huge = "@mean_streams[" + "1" * 60 + "]"
    lever = AnswerCheck()
    note = lever.after_cell(state, cell(huge + "\n"), "")
    assert note is not None and "60 digits" in note and "pd.to_numeric" in note
    state.cells.append(cell(huge + "\n"))
    assert lever.on_answer(state, huge) is None  # asked once already, by the note
    ask = lever.on_answer(state, "@mean_streams[nan]")
    assert ask is not None and "'nan'" in ask.message and "cannot be right yet" in ask.message
    assert lever.on_answer(state, "@mean_streams[nan]") is None
    assert lever.on_answer(state, "@mean_streams[413342891.2]") is None
    # a cell that prints no slot line, or a task that asks for none: no note
    other = TaskState("What is the mean of streams?", told=[PREVIEW])
    fresh = lever.for_task()  # another task: nothing asked yet
    assert fresh.after_cell(other, cell(huge + "\n"), "") is None
    assert fresh.after_cell(TaskState(task), cell("1" * 60 + "\n"), "") is None
