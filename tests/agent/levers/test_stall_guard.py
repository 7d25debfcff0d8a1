"""stall_guard: repeated cells and outputs are no progress; two ask once for the answer,
then the run ends honestly."""

from __future__ import annotations

from lever_cells import ok

from kernel_agent.agent.levers.stall_guard import STALL_LIMIT, StallGuard
from kernel_agent.agent.state import Ask, Stop, TaskState
from kernel_agent.results import CellResult


def ran(st: TaskState, lever: StallGuard, cell: CellResult) -> Ask | Stop | None:
    decision = lever.before_cell(st, cell.code)
    if decision is None:
        st.cells.append(cell)
        lever.after_cell(st, cell, "")
    return decision


def test_a_repeated_successful_cell_is_not_run_and_shows_its_output() -> None:
    st, guard = TaskState("t"), StallGuard()
    assert ran(st, guard, ok("print(6 * 7)", "42\n")) is None
    again = guard.before_cell(st, "print(6 * 7)\n\n")
    assert isinstance(again, Ask) and "42" in again.message and not again.failure
    assert st.stalls == 1 and again.cell_meta == {"repeat": True}


def test_two_stalls_ask_once_for_the_answer_then_the_run_ends_honestly() -> None:
    st, guard = TaskState("t"), StallGuard()
    ran(st, guard, ok("print(6 * 7)", "42\n"))
    guard.before_cell(st, "print(6 * 7)")  # stall 1: told it already ran
    ask = guard.before_cell(st, "print(6 * 7)")  # stall 2: asked for the final answer
    assert isinstance(ask, Ask) and "final answer" in ask.message and "42" in ask.message
    assert st.stalls == STALL_LIMIT
    stop = guard.before_cell(st, "print(6 * 7)")
    assert isinstance(stop, Stop) and stop.status == "no_answer"
    assert "No final answer" in stop.answer and "42" in stop.answer


def test_new_output_is_progress_and_a_repeated_output_is_not() -> None:
    st, guard = TaskState("t"), StallGuard()
    ran(st, guard, ok("print(1)", "1\n"))
    ran(st, guard, ok("x = 1; print(x)", "1\n"))
    assert st.stalls == 1
    ran(st, guard, ok("print(2)", "2\n"))
    assert st.stalls == 0
    ran(st, guard, ok("y = 5", ""))  # a cell that prints nothing is not a repeat
    assert st.stalls == 0


def test_after_the_ask_a_cell_with_new_output_may_still_run() -> None:
    st, guard = TaskState("t"), StallGuard()
    ran(st, guard, ok("print(1)", "1\n"))
    guard.before_cell(st, "print(1)")
    assert isinstance(guard.before_cell(st, "print(1)"), Ask)
    assert ran(st, guard, ok("print(3)", "3\n")) is None and st.stalls == 0


def test_a_stalled_run_ends_with_a_statement_beside_its_code_only_if_the_outputs_show_it():
    """The scratch survey run (2026-12-07) stated the count above its first cell, then
    repeated a cell; a plan, a small ordinal or a value no output shows is no answer."""
    for said, status in (
        (["The number of respondents without a score is 15."], "ok"),
        (["The mean is 3.25."], "ok"),
        (["To find the count, we need 15 rows."], "no_answer"),  # a plan
        (["Step 1: load the data."], "no_answer"),
        (["There are 2 files."], "no_answer"),  # a small whole number only
        (["The number of respondents without a score is 16."], "no_answer"),  # not shown
        (["The count is 15.\n```python\nprint(15)\n```"], "no_answer"),  # code, not prose
    ):
        st, guard = TaskState("How many respondents gave no score?"), StallGuard()
        st.said = said
        st.briefing = ["missing values: 'Satisfaction' 15 (15 of 200 rows have one)"]
        ran(st, guard, ok("print(3.25)", "3.25\n"))
        guard.before_cell(st, "print(3.25)")
        guard.before_cell(st, "print(3.25)")
        stop = guard.before_cell(st, "print(3.25)")
        assert isinstance(stop, Stop) and stop.status == status, said
        if status == "ok":
            assert stop.answer == said[0]
