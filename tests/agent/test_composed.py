"""The final answer composed from the last cell's printed slots: the pure rule, then the
loop on a scripted executor and the loopback model server (no model turn is spent)."""

from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path

import nbformat
import pytest
from fake_openai import FakeLLM, run_cell, scripted_settings, text
from nbformat.v4 import new_output

from kernel_agent.agent import Agent
from kernel_agent.agent.composed import compose_answer, printed_values
from kernel_agent.events import Notice, RunFinished
from kernel_agent.results import CellResult
from kernel_agent.testing import FakeCell, FakeExecutor

pytestmark = pytest.mark.timeout(30)
NOW = datetime.now(timezone.utc)
TASK = (
    "Using the file macrodata.csv: Which year had the highest average unemp, and what was "
    "that average, rounded to 2 decimals?\n"
    "Give the final answer in this format: @year[integer] @mean_unemp[value]"
)


def ok(printed: str, code: str = "print(x)") -> CellResult:
    outputs = [new_output("stream", name="stdout", text=printed)] if printed else []
    return CellResult(code, "ok", 1, outputs, None, NOW, NOW)


def test_printed_values_reads_slots_and_labelled_lines() -> None:
    found = printed_values("@year[1982]\nmean unemp: 9.7\nn = 6\nnoise line 3\n")
    assert found == {"year": {"1982"}, "mean_unemp": {"9.7"}, "n": {"6"}}


@pytest.mark.parametrize(
    ("printed", "answer"),
    [
        ("@year[1982]\n@mean_unemp[9.70]\n", "@year[1982] @mean_unemp[9.70]"),
        ("year: 1982.0\nmean_unemp: 9.7033333\n", "@year[1982] @mean_unemp[9.70]"),
        ("year = np.int64(1982)\nmean_unemp = np.float64(9.7)\n", "@year[1982] @mean_unemp[9.7]"),
        ("@year[1982]\n", None),  # a slot not printed
        ("@year[1982]\n@mean_unemp[9.70]\n@mean_unemp[10.70]\n", None),  # two values
        ("@year[1982]\n@mean_unemp[nan]\n", None),
        ("@year[1982]\n@mean_unemp[value]\n", None),  # the placeholder, not a value
        ("year: 1982\nmean_unemp: [9.7, 10.7]\n", None),  # not one value
    ],
)
def test_compose_answer_only_from_one_clear_value_per_slot(printed, answer) -> None:
    cell = ok(printed)
    assert compose_answer(TASK, cell, [cell]) == answer


def test_a_printed_bool_is_said_in_the_words_the_task_asks_for() -> None:
    asked = (
        "Is the association significant at the 0.05 level (yes/no)?\n"
        "Give the final answer in this format: @chi2[value] @significant[yes/no]"
    )
    cell = ok("@chi2[48.8]\n@significant[True]\n")
    assert compose_answer(asked, cell, [cell]) == "@chi2[48.8] @significant[yes]"
    cell = ok("@chi2[1.2]\n@significant[False]\n")
    assert compose_answer(asked, cell, [cell]) == "@chi2[1.2] @significant[no]"
    as_bool = "Is it significant?\nGive the final answer in this format: @significant[true/false]"
    cell = ok("@significant[True]\n")
    assert compose_answer(as_bool, cell, [cell]) == "@significant[True]"  # as asked


def test_compose_needs_slots_a_successful_cell_one_rounding_and_a_plot_if_asked() -> None:
    printed = ok("@a[1.23456]\n@b[2.5]\n")
    assert compose_answer("What are a and b?", printed, [printed]) is None  # no slots asked
    failed = CellResult("x", "error", 1, printed.outputs, None, NOW, NOW)
    assert compose_answer("@a[value] @b[value]", failed, [failed]) is None
    mixed = "a to 2 decimal places, b to 4 decimal places. @a[value] @b[value]"
    assert compose_answer(mixed, printed, [printed]) is None  # which rounding is a's?
    assert compose_answer("a and b to 4 decimal places. @a[value] @b[value]", printed,
                          [printed]) == "@a[1.2346] @b[2.5]"  # fmt: skip
    plot = "Plot a histogram of a. @a[value] @b[value]"
    assert compose_answer(plot, printed, [printed]) is None  # no image yet
    image = CellResult(
        "plt.hist(a)", "ok", 1,
        [new_output("display_data", data={"image/png": "iVBORw0KGgo=", "text/plain": "<Figure>"})],
        None, NOW, NOW,
    )  # fmt: skip
    assert compose_answer(plot, printed, [image, printed]) == "@a[1.23456] @b[2.5]"


def _run(fake: FakeLLM, tmp_path: Path, executor: FakeExecutor, levers: object) -> tuple:
    settings = scripted_settings(fake, tmp_path, clean_notebook=False, levers=levers)
    with Agent(settings, executor=executor) as agent:
        events = list(agent.run(TASK))
    assert isinstance(events[-1], RunFinished)
    return events[-1].result, events


def test_values_typed_into_a_print_after_a_failure_are_not_composed_into_the_answer() -> None:
    failed = CellResult("x = df['a'].astype(int)", "error", 1, [], None, NOW, NOW)
    typed = ok("@year[1982]\n@mean_unemp[9.7]\n", "print('@year[1982]')\nprint('@mean_unemp[9.7]')")
    assert compose_answer(TASK, typed, [failed, typed]) is None  # the model answers, checked
    assert compose_answer(TASK, typed, [typed]) == "@year[1982] @mean_unemp[9.7]"  # no failure
    computed = ok("@year[1982]\n@mean_unemp[9.7]\n", "print(f'@year[{y}]')\nprint(m)")
    assert compose_answer(TASK, computed, [failed, computed]) == "@year[1982] @mean_unemp[9.7]"


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
    assert first.startswith(TASK) and "@year[...] @mean_unemp[...]" in first
    assert 'print(f"@year[{value}]")' in first
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
