"""prompt_echo: an answer that repeats our own instructions goes back twice, then the run
ends; the lever alone, then the loop with the scripted model server."""

from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path

import nbformat
from fake_openai import run_cell, scripted_settings, text
from nbformat.v4 import new_output

from kernel_agent.agent import Agent
from kernel_agent.agent.levers import LEVERS, levers_for
from kernel_agent.agent.levers.prompt_echo import ECHO_ASKS, PromptEcho
from kernel_agent.agent.state import Ask, Stop, TaskState
from kernel_agent.events import RunFinished
from kernel_agent.prompts import prompt
from kernel_agent.results import CellError, CellResult
from kernel_agent.sandbox import bwrap_problem
from kernel_agent.settings import Settings

NOW = datetime.now(timezone.utc)
SANDBOX = "none" if bwrap_problem()[0] else "bwrap"
TASK = "What is the mean of column x in data.csv?"
HINT = "Hint: the name 'dff' is not defined; did you mean 'df'?"
PUSH = prompt("nudge_after_error")
SEEN = "The last cell failed, so the task is not done yet. Do not give up ..."


def ok(code: str, printed: str) -> CellResult:
    outputs = [new_output("stream", name="stdout", text=printed)]
    return CellResult(code, "ok", 1, outputs, None, NOW, NOW)


def failed(code: str = "print(dff.x.mean())") -> CellResult:
    error = CellError("NameError", "name 'dff' is not defined", [])
    return CellResult(code, "error", 1, [], error, NOW, NOW)


def pushed() -> TaskState:
    """A task whose last cell failed, after push_after_error's push with its hint."""
    return TaskState(TASK, cells=[failed()], told=[f"{PUSH}\n{HINT}"])


def _run(fake_llm, tmp_path: Path):
    settings = scripted_settings(
        fake_llm, tmp_path, sandbox=SANDBOX, levers="push_after_error,prompt_echo"
    )
    with Agent(settings) as agent:
        events = list(agent.run(TASK))
    assert isinstance(events[-1], RunFinished)
    result = events[-1].result
    nb = nbformat.read(result.notebook, as_version=4)
    notes = [c.metadata["kernel_agent"] for c in nb.cells
             if c.metadata.get("kernel_agent", {}).get("role") == "note"]  # fmt: skip
    return result, notes


def test_the_lever_asks_twice_in_a_task_then_ends_the_run_without_the_echo() -> None:
    lever, st = PromptEcho(), pushed()
    for _ in range(ECHO_ASKS):
        ask = lever.on_answer(st, SEEN)
        assert (
            isinstance(ask, Ask) and ask.message == prompt("prompt_echo", task=TASK) and ask.notice
        )
        st.told.append(ask.message)
    st.cells.append(ok("print(df.x.mean())", "4.2\n"))
    stop = lever.on_answer(st, prompt("prompt_echo", task=TASK))  # our ask, sent back in turn
    assert isinstance(stop, Stop) and stop.status == "no_answer"
    assert "repeated the instructions" in stop.answer and "4.2" in stop.answer
    assert "not done yet" not in stop.answer
    fresh, again = pushed(), lever.for_task()  # a new task: a fresh lever
    assert again.on_answer(fresh, "The mean is 4.2.") is None and again.asked == 0
    assert lever.on_answer(TaskState(TASK), PUSH) is None, "nothing sent: nothing to echo"


def test_the_lever_is_registered_and_switchable_by_name() -> None:
    assert "prompt_echo" in LEVERS
    assert LEVERS.index("prompt_echo") < LEVERS.index("grounding_check")
    names = [lv.name for lv in levers_for(Settings(home=".", levers="-prompt_echo"))]
    assert "prompt_echo" not in names and "push_after_error" in names
    assert [lv.name for lv in levers_for(Settings(home=".", levers="prompt_echo"))] == [
        "prompt_echo"
    ]


def test_the_loop_sends_an_echoed_push_back_and_takes_the_real_answer(fake_llm, tmp_path):
    fake_llm.enqueue(
        run_cell("print(undefined_frame.x.mean())"),
        text("I cannot do this."),  # push_after_error pushes
        text(SEEN),  # our push, as the answer: sent back
        run_cell("x = [4, 4.4]\nprint(sum(x) / len(x))"),
        text("The mean of x is 4.2."),
    )
    result, notes = _run(fake_llm, tmp_path)
    assert result.status == "ok" and result.answer == "The mean of x is 4.2."
    assert result.cells[-1].outputs[0]["text"] == "4.2\n"
    assert [n["lever"] for n in notes] == ["push_after_error", "prompt_echo"]
    assert notes[-1]["reply"] == SEEN, "the refused reply is kept for the eval"
    asked = fake_llm.requests[3]["messages"][-1]["content"]
    assert asked == prompt("prompt_echo", task=TASK)


def test_the_loop_ends_a_run_that_only_echoes_with_no_answer(fake_llm, tmp_path):
    fake_llm.enqueue(
        run_cell("print(undefined_frame.x.mean())"),
        text("I cannot do this."),
        text(SEEN),
        text(PUSH),
        text(prompt("prompt_echo", task=TASK)),  # our echo-ask, sent back in turn
    )
    result, notes = _run(fake_llm, tmp_path)
    assert result.status == "no_answer" and "repeated the instructions" in result.answer
    assert "not done yet" not in result.answer
    assert [n["lever"] for n in notes] == ["push_after_error", *["prompt_echo"] * 3]
    assert len(fake_llm.requests) == 5


def test_the_loop_sends_back_a_made_up_next_turn_with_the_preview_under_it(fake_llm, tmp_path):
    """Done with a question, the bundled model wrote the user's next one and copied the
    data preview under it; that was the run's answer (2026-12-07). Now it goes back, and
    the answer after is the run's."""
    (tmp_path / "drinks.csv").write_text(
        "country,beer,continent\nCanada,339,NA\nUSA,135,NA\nFrance,127,EU\n"
    )
    task = "How many countries are in North America (continent code NA)?"

    def made_up(request) -> str:
        preview = request.messages[1]["content"].split(task, 1)[1]
        return "How many countries are in Europe (continent code EU)?\n" + preview

    fake_llm.enqueue(
        run_cell(
            "import pandas as pd\ndf = pd.read_csv('drinks.csv', keep_default_na=False)\n"
            "print((df.continent == 'NA').sum())"
        ),  # fmt: skip
        made_up,
        text("There are 2 countries in North America."),
    )
    settings = scripted_settings(
        fake_llm, tmp_path, sandbox=SANDBOX, levers="data_preview,prompt_echo"
    )
    with Agent(settings) as agent:
        events = list(agent.run(task))
    result = events[-1].result
    assert result.status == "ok" and result.answer == "There are 2 countries in North America."
    sent_back = fake_llm.requests[2]["messages"][-1]["content"]
    assert sent_back == prompt("prompt_echo", task=task)
    assert "Files in the working directory" in fake_llm.requests[1]["messages"][1]["content"]
