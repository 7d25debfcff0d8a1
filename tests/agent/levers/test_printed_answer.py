"""printed_answer: the loop answers from printed slots with no model turn, and tells a task
that asks for slots to print them."""

from __future__ import annotations

from pathlib import Path

import nbformat
from fake_openai import FakeLLM, run_cell, scripted_settings, text

from kernel_agent.agent import Agent
from kernel_agent.events import Notice, RunFinished
from kernel_agent.testing import FakeCell, FakeExecutor

TASK = (
    "Using the file macrodata.csv: Which year had the highest average unemp, and what was "
    "that average, rounded to 2 decimals?\n"
    "Give the final answer in this format: @year[integer] @mean_unemp[value]"
)


def _run(fake: FakeLLM, tmp_path: Path, executor: FakeExecutor, levers: object) -> tuple:
    settings = scripted_settings(fake, tmp_path, clean_notebook=False, levers=levers)
    with Agent(settings, executor=executor) as agent:
        events = list(agent.run(TASK))
    assert isinstance(events[-1], RunFinished)
    return events[-1].result, events


def test_the_loop_answers_from_printed_slots_without_another_model_turn(fake_llm, tmp_path):
    executor = FakeExecutor(FakeCell(stdout="@year[1982]\n@mean_unemp[9.70]\n"))
    fake_llm.enqueue(run_cell("print(...)"))
    result, events = _run(fake_llm, tmp_path, executor, ("printed_answer",))
    assert result.status == "ok" and result.answer == "@year[1982] @mean_unemp[9.70]"
    assert len(fake_llm.requests) == 1, "no model turn after the cell"
    assert any(isinstance(e, Notice) and "answered from them" in e.text for e in events)
    nb = nbformat.read(result.notebook, as_version=4)
    answer = [c for c in nb.cells if c.metadata.get("kernel_agent", {}).get("role") == "answer"]
    assert answer[-1].metadata["kernel_agent"]["composed_by"] == "printed_answer"


def test_a_task_asking_for_slots_is_told_to_print_them_and_only_such_a_task(fake_llm, tmp_path):
    executor = FakeExecutor(FakeCell(stdout="@year[1982]\n@mean_unemp[9.70]\n"))
    fake_llm.enqueue(run_cell("print(...)"))
    _run(fake_llm, tmp_path, executor, ("printed_answer",))
    first = fake_llm.requests[0]["messages"][-1]["content"]
    assert first.startswith(TASK)
    # one print per asked slot, its value held by a name of the slot's own
    assert 'print(f"@year[{year}]")\nprint(f"@mean_unemp[{mean_unemp}]")' in first
    system = fake_llm.requests[0]["messages"][0]["content"]
    assert "only inside print()" in system
    fake_llm.requests.clear()
    fake_llm.enqueue(text("It is 4."))
    settings = scripted_settings(fake_llm, tmp_path, clean_notebook=False, levers="printed_answer")
    with Agent(settings, executor=FakeExecutor()) as agent:
        agent.run_to_end("What is 2 + 2?")
    assert fake_llm.requests[0]["messages"][-1]["content"] == "What is 2 + 2?"


def test_without_the_lever_or_the_slots_the_model_answers(fake_llm, tmp_path):
    executor = FakeExecutor(FakeCell(stdout="@year[1982]\n@mean_unemp[9.70]\n"))
    fake_llm.enqueue(run_cell("print(...)"), text("@year[1982] @mean_unemp[9.70]"))
    result, _ = _run(fake_llm, tmp_path, executor, "-printed_answer")
    assert result.answer == "@year[1982] @mean_unemp[9.70]" and len(fake_llm.requests) == 2
    fake_llm.requests.clear()
    partial = FakeExecutor(FakeCell(stdout="@year[1982]\n"))  # one slot missing: ask the model
    fake_llm.enqueue(run_cell("print(...)"), text("@year[1982] @mean_unemp[9.70]"))
    result, _ = _run(fake_llm, tmp_path, partial, ("printed_answer",))
    assert result.status == "ok" and len(fake_llm.requests) == 2


def test_a_slot_named_as_a_builtin_or_keyword_prints_a_plain_value_name():
    """``max = ...`` would shadow the builtin the model calls next; ``class`` cannot be one."""
    from kernel_agent.agent.levers.printed_answer import _print_line

    assert _print_line("gain") == 'print(f"@gain[{gain}]")'
    for slot in ("max", "sum", "class", "p-value"):
        assert _print_line(slot) == f'print(f"@{slot}[{{value}}]")'
