"""push_after_error: giving up after a failing cell gets one push, with the last hint."""

from __future__ import annotations

from lever_cells import failed, ok

from kernel_agent.agent.levers.push_after_error import PushAfterError
from kernel_agent.agent.state import TaskState


def test_push_after_error_carries_the_last_hint_once() -> None:
    st, lever = TaskState("t"), PushAfterError()
    cell = failed("print(x)")
    st.cells.append(cell)
    st.last_hint = "Hint: define x"  # the loop records the hint of a failing cell
    ask = lever.on_answer(st, "I give up")
    assert (
        ask is not None
        and "task is not done" in ask.message
        and ask.message.endswith("Hint: define x")
    )
    assert lever.on_answer(st, "I give up") is None
    fine = TaskState("t", cells=[ok("x = 1")])
    assert lever.for_task().on_answer(fine, "done") is None


def test_the_push_is_said_on_the_task_state_for_the_other_levers() -> None:
    st = TaskState("t", cells=[failed("print(x)")])
    assert not st.error_pushed
    assert PushAfterError().on_answer(st, "I give up") is not None and st.error_pushed
