"""repeat_guard: a failed cell is not run again; the first time the attempt is forgotten."""

from __future__ import annotations

from lever_cells import failed, ok

from kernel_agent.agent.answering import start_afresh
from kernel_agent.agent.history import History
from kernel_agent.agent.levers.repeat_guard import RepeatGuard
from kernel_agent.agent.state import TaskState


def test_repeat_guard_refuses_a_failed_cell_and_resamples() -> None:
    st, lever = TaskState("t", step=7), RepeatGuard(temperature=0.0)
    cell = failed("df = make(df)")
    lever.after_cell(st, cell, "Hint: no make")
    assert lever.before_cell(st, "x = 1") is None
    st.failures = 3
    first = lever.before_cell(st, "df = make(df)  \n\n")
    assert first is not None and first.rewind and "NameError" in first.message
    history = History()
    history.set_system("s")
    history.user("the task")
    st.history_start = len(history)
    history.assistant({"role": "assistant", "content": "df = make(df)"})
    start_afresh(history, st, first)
    assert st.failures == 0  # the fresh attempt has the whole bound of failing cells
    assert [m["content"] for m in history.messages[1:]] == ["the task", first.message]
    assert st.sampling == {"temperature": 0.7, "seed": 7}
    assert "Hint: no make" in first.message  # the fresh start keeps what the hint taught
    assert dict(first.cell_meta) == {"repeat": True, "rewind": True}
    ask = lever.before_cell(st, "df = make(df)")
    assert ask is not None and not ask.rewind
    assert "NameError" in ask.message and "Hint: no make" in ask.message
    assert dict(ask.sampling) == {"temperature": 0.7, "seed": 7}
    assert dict(ask.cell_meta) == {"repeat": True}
    assert RepeatGuard(temperature=1.2).temperature == 1.2


def test_repeat_guard_notes_the_same_error_from_other_code() -> None:
    st, lever = TaskState("t"), RepeatGuard()
    first = failed("df['Age'].mean()", "KeyError", "'Age'")
    st.cells.append(first)
    assert lever.after_cell(st, first, "Hint: there is no column 'Age'") is None
    again = failed("df['Age '].mean()", "KeyError", "'Age'")
    st.cells.append(again)
    note = lever.after_cell(st, again, "Hint: there is no column 'Age'")
    assert note is not None and "same error as the cell before" in note
    other = failed("df[' Age'].median()", "KeyError", "' Age'")  # another error: no note
    st.cells.append(other)
    assert lever.after_cell(st, other, "") is None
    st.cells.append(ok("print(1)", "1\n"))
    assert lever.after_cell(st, st.cells[-1], "") is None


def test_a_run_at_its_bound_of_failing_cells_starts_over_once() -> None:
    st, lever = TaskState("t", step=5), RepeatGuard()
    assert lever.on_give_up(st) is None  # no cell failed: nothing to start over from
    st.cells.append(failed("df['Age '].mean()", "KeyError", "'Age '"))
    st.last_hint = "Hint: the frame has 'Age'."
    ask = lever.on_give_up(st)
    assert ask is not None and ask.rewind and not ask.failure
    assert "KeyError" in ask.message and "Hint: the frame has 'Age'." in ask.message
    assert "Start over" in ask.message and dict(ask.sampling) == {"temperature": 0.7, "seed": 5}
    assert lever.on_give_up(st) is None  # once a task
    # a fresh start a repeat already took counts: the task is not started over twice
    again = RepeatGuard()
    again.after_cell(st, st.cells[-1], "")
    assert again.before_cell(st, "df['Age '].mean()") is not None
    assert again.on_give_up(st) is None
    assert again.for_task().on_give_up(st) is not None  # a new task: a new fresh start
