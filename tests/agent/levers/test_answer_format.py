"""answer_format: an answer that ignores the asked form goes back once, with the template."""

from __future__ import annotations

from kernel_agent.agent.levers.answer_format import AnswerFormat
from kernel_agent.agent.state import TaskState


def test_answer_format_asks_once_with_the_template() -> None:
    st = TaskState("Find the mean. @mean_price[value], rounded to 2 decimal places.")
    lever = AnswerFormat()
    ask = lever.on_answer(st, "The mean price is 12.3456.")
    assert ask is not None and "@mean_price[value]" in ask.message and "12.3456" in ask.message
    assert lever.on_answer(st, "still 12.3456") is None
    assert AnswerFormat().on_answer(TaskState("What is the mean?"), "12.3456") is None
