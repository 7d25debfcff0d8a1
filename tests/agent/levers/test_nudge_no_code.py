"""nudge_no_code: an answer before any cell ran is sent back once a task."""

from __future__ import annotations

from lever_cells import ok

from kernel_agent.agent.levers.nudge_no_code import NudgeNoCode
from kernel_agent.agent.state import TaskState


def test_nudge_asks_once_when_no_cell_ran() -> None:
    st, lever = TaskState("t"), NudgeNoCode()
    assert lever.on_answer(st, "It is 120.") is not None
    assert lever.on_answer(st, "It is 120.") is None, "once per task"
    ran = TaskState("t", cells=[ok("x = 1")])
    assert lever.for_task().on_answer(ran, "done") is None, "a new task: a fresh lever"
