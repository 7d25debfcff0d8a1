"""grounding_check: numbers no output shows are questioned once a task."""

from __future__ import annotations

from lever_cells import ok

from kernel_agent.agent.levers.grounding_check import GroundingCheck
from kernel_agent.agent.state import TaskState
from kernel_agent.kernel_state.namespace import VariableInfo


def test_grounding_check_questions_numbers_no_output_shows_once() -> None:
    lever = GroundingCheck()
    st = TaskState("sum the evens", cells=[ok("print(2550)", "2550\n")])
    ask = lever.on_answer(st, "The sum is 255.")
    assert ask is not None and "255" in ask.message and ask.notice
    # a count no cell printed is computed, not restated (2813 "readings", 2026-12-08)
    assert "write a cell that computes and prints it" in ask.message
    assert lever.on_answer(st, "The sum is 255.") is None
    again = lever.for_task()  # a new task
    assert (
        again.on_answer(TaskState("t", cells=[ok("print(2550)", "2550\n")]), "It is 2550.") is None
    )
    assert again.on_answer(TaskState("t"), "It is 255.") is None, (
        "no outputs: nothing to check against"
    )


def test_grounding_check_counts_what_the_model_was_shown_of_the_kernels_variables() -> None:
    st = TaskState("How many are malignant, and their mean radius?", cells=[ok("m", "17.463\n")])
    st.namespace = {"m": VariableInfo("m", "DataFrame", shape="(212, 31)")}
    assert GroundingCheck().on_answer(st, "212 are malignant; mean radius 17.463.") is None
    assert GroundingCheck().on_answer(st, "213 are malignant; mean radius 17.463.") is not None
