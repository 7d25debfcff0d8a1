"""The agent loop's mechanism on a scripted executor: no kernel, a scripted model server.

Each test runs the real :class:`~kernel_agent.agent.Agent` against
:class:`~kernel_agent.testing.FakeExecutor` (nothing is executed) and the loopback
``fake_llm`` server, so it checks what the loop does with a cell's result, not what a
kernel does.
"""

from __future__ import annotations

import zipfile
from pathlib import Path
from typing import Any

import nbformat
import pytest
from fake_openai import FakeLLM, fenced, run_cell, scripted_settings, text

from kernel_agent.agent import Agent
from kernel_agent.events import CellOutput, CellSkipped, Notice, RunFinished, RunStarted
from kernel_agent.executors.base import AsyncExecutor, Isolation
from kernel_agent.settings import Settings
from kernel_agent.testing import FakeCell, FakeExecutor

pytestmark = pytest.mark.timeout(30)


def settings_for(fake: FakeLLM, tmp_path: Path, **kw: Any) -> Settings:
    return scripted_settings(fake, tmp_path, **(dict(clean_notebook=False) | kw))


def run(
    fake: FakeLLM, tmp_path: Path, executor: FakeExecutor, task: str = "do it", **kw: Any
) -> tuple[Any, list[Any]]:
    approve = kw.pop("approve", None)
    with Agent(settings_for(fake, tmp_path, **kw), executor=executor, approve=approve) as agent:
        events = list(agent.run(task))
    assert isinstance(events[-1], RunFinished)
    return events[-1].result, events


def test_the_fake_is_an_executor() -> None:
    assert isinstance(FakeExecutor(), AsyncExecutor)


def test_a_cells_output_reaches_the_model_and_the_notebook(fake_llm, tmp_path) -> None:
    executor = FakeExecutor(FakeCell(stdout="43\n"))
    fake_llm.enqueue(run_cell("print(x + 1)"), text("It is 43."))
    result, events = run(fake_llm, tmp_path, executor)
    assert result.status == "ok" and result.answer == "It is 43."
    assert executor.codes == ["print(x + 1)"]
    assert [e.output["text"] for e in events if isinstance(e, CellOutput)] == ["43\n"]
    tool_msg = fake_llm.requests[1]["messages"][-1]
    assert tool_msg["role"] == "tool" and "43" in tool_msg["content"]
    nb = nbformat.read(result.notebook, as_version=4)
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert [c.source for c in code] == ["print(x + 1)"]
    assert code[0].outputs[0]["text"] == "43\n"
    assert nb.metadata["kernelspec"]["name"] == "fake-python"


def test_a_failing_cell_is_followed_by_a_namespace_probe(fake_llm, tmp_path) -> None:
    executor = FakeExecutor(FakeCell(error=("NameError", "name 'y' is not defined")))
    fake_llm.enqueue(run_cell("y"), text("y is not defined."))
    result, _ = run(fake_llm, tmp_path, executor, levers="none")
    assert executor.codes == ["y"]  # the probe takes nothing from the script
    assert "ns" in executor.probes[-1] and "libraries" in executor.probes[0]
    assert result.cells[0].status == "error"
    assert "NameError" in fake_llm.requests[1]["messages"][-1]["content"]


def test_consecutive_failures_end_the_run(fake_llm, tmp_path) -> None:
    executor = FakeExecutor(*(FakeCell(error=("ValueError", f"bad {i}")) for i in range(3)))
    fake_llm.enqueue(run_cell("a"), run_cell("b"), run_cell("c"))
    result, _ = run(fake_llm, tmp_path, executor, levers="none", max_consecutive_errors=3)
    assert result.status == "failed"
    assert "ValueError: bad 2" in result.answer
    assert [c for c in executor.codes if c] == ["a", "b", "c"]


def test_max_steps_bounds_the_run(fake_llm, tmp_path) -> None:
    executor = FakeExecutor()
    fake_llm.enqueue(run_cell("1"), run_cell("2"), run_cell("3"))
    result, _ = run(fake_llm, tmp_path, executor, max_steps=2)
    assert result.status == "max_steps" and "--max-steps 2" in result.answer
    assert executor.codes == ["1", "2"]


def test_a_skipped_cell_is_not_run_and_quit_stops(fake_llm, tmp_path) -> None:
    decisions = iter([("skip", None), ("quit", None)])
    executor = FakeExecutor()
    fake_llm.enqueue(run_cell("rm_everything()"), run_cell("again()"))
    result, events = run(fake_llm, tmp_path, executor, approve=lambda code, step: next(decisions))
    assert executor.codes == []
    assert any(isinstance(e, CellSkipped) for e in events)
    assert result.status == "stopped"


def test_levers_off_take_a_no_code_reply_as_the_answer(fake_llm, tmp_path) -> None:
    fake_llm.enqueue(text("42, from memory."))
    result, _ = run(fake_llm, tmp_path, FakeExecutor(), levers="none")
    assert result.status == "no_code" and result.answer == "42, from memory."
    assert len(fake_llm.requests) == 1


def test_the_no_code_nudge_asks_again_once(fake_llm, tmp_path) -> None:
    executor = FakeExecutor(FakeCell(stdout="42\n"))
    fake_llm.enqueue(text("42, from memory."), run_cell("print(6 * 7)"), text("It is 42."))
    result, _ = run(fake_llm, tmp_path, executor, levers="nudge_no_code")
    assert result.answer == "It is 42." and executor.codes == ["print(6 * 7)"]
    assert len(fake_llm.requests) == 3


def test_each_task_of_one_agent_gets_fresh_levers(fake_llm, tmp_path) -> None:
    """A lever's memory lasts one task: the once-a-task nudge asks again in the next task
    of the same agent (a chat session, ``%%agent``, a follow-up question)."""
    fake_llm.enqueue(text("42, from memory."), text("Still 42."))
    fake_llm.enqueue(text("7, from memory."), text("Still 7."))
    settings = settings_for(fake_llm, tmp_path, levers="nudge_no_code")
    with Agent(settings, executor=FakeExecutor()) as agent:
        results = [list(agent.run(task))[-1].result for task in ("first", "second")]
        assert [type(lever).__name__ for lever in agent.aio.levers] == ["NudgeNoCode"]
        assert agent.aio.levers[0].asked == 0, "the configured lever is only copied, never used"
    assert [(r.status, r.answer) for r in results] == [
        ("no_code", "Still 42."),
        ("no_code", "Still 7."),
    ]
    assert len(fake_llm.requests) == 4, "asked once in each task"


def test_a_fenced_block_runs_on_the_fake(fake_llm, tmp_path) -> None:
    executor = FakeExecutor(FakeCell(result="4"))
    fake_llm.enqueue(fenced("2 + 2"), text("It is 4."))
    result, _ = run(fake_llm, tmp_path, executor, protocol="fenced", levers="none")
    assert executor.codes == ["2 + 2"] and result.answer == "It is 4."
    assert "4" in fake_llm.requests[1]["messages"][-1]["content"]


class _Warned(FakeExecutor):
    @property
    def isolation(self) -> Isolation:
        return Isolation(
            "none", "a test", "none (a test)", warning="NOT SANDBOXED", details={"x": 1}
        )


def test_the_executors_isolation_is_recorded_and_its_warning_said_once(fake_llm, tmp_path):
    fake_llm.enqueue(text("one"), text("two"))
    executor = _Warned()
    with Agent(settings_for(fake_llm, tmp_path, levers="none"), executor=executor) as agent:
        first = list(agent.run("first"))
        second = list(agent.run("second"))
    warnings = [[e.text for e in ev if isinstance(e, Notice)] for ev in (first, second)]
    assert warnings == [["NOT SANDBOXED"], []]
    started = next(e for e in first if isinstance(e, RunStarted))
    assert started.sandbox == "none (a test)"
    result = first[-1].result
    assert result.isolation == "none"
    nb = nbformat.read(result.notebook, as_version=4)
    assert nb.metadata["kernel_agent"]["sandbox"] == {
        "x": 1,
        "mode": "none",
        "reason": "a test",
        "note": "none (a test)",
    }


def test_the_system_prompt_names_the_executors_work_dir(fake_llm, tmp_path) -> None:
    work = tmp_path / "elsewhere"
    work.mkdir()
    fake_llm.enqueue(text("done"))
    run(fake_llm, tmp_path, FakeExecutor(cwd=work), levers="none")
    assert str(work) in fake_llm.requests[0]["messages"][0]["content"]


def test_files_in_a_private_work_dir_are_delivered_beside_the_notebook(fake_llm, tmp_path):
    view, work = tmp_path / "view", tmp_path / "work"
    view.mkdir()
    work.mkdir()
    (work / "result.csv").write_text("a,b\n1,2\n")  # as if the cell had written it
    fake_llm.enqueue(run_cell("df.to_csv('result.csv')"), text("Saved."))
    executor = FakeExecutor(cwd=view, kernel_cwd=work)
    result, events = run(fake_llm, tmp_path, executor, levers="none", cwd=view)
    assert [p.name for p in result.files] == ["work.zip"]  # one archive: content
    with zipfile.ZipFile(result.files[0]) as zf:
        assert zf.read("result.csv") == b"a,b\n1,2\n"
    assert any(isinstance(e, Notice) and "1 file(s)" in e.text for e in events)
    # a private work dir is a new path each kernel: not named (same words, same answer)
    system = fake_llm.requests[0]["messages"][0]["content"]
    assert str(work) not in system and "working directory of its own" in system


def test_no_delivery_when_the_kernel_works_in_the_users_dir(fake_llm, tmp_path) -> None:
    (tmp_path / "mine.csv").write_text("x\n")
    fake_llm.enqueue(text("nothing to do"))
    result, _ = run(fake_llm, tmp_path, FakeExecutor(cwd=tmp_path), levers="none")
    assert result.files == []
    # the user's own directory is named: it is where their files are, and it stays
    assert f"working directory `{tmp_path}`" in fake_llm.requests[0]["messages"][0]["content"]


def test_a_note_names_the_lever_and_keeps_the_reply_it_refused(fake_llm, tmp_path) -> None:
    """The eval scores that reply: how often a lever fires on an answer already right."""
    executor = FakeExecutor(FakeCell(stdout="12.35\n"))
    fake_llm.enqueue(run_cell("print(m)"), text("The mean is about 7."), text("It is 12.35."))
    result, _ = run(fake_llm, tmp_path, executor, task="Compute the mean.", levers="states_result")
    assert result.answer == "It is 12.35."
    nb = nbformat.read(result.notebook, as_version=4)
    notes = [
        c.metadata["kernel_agent"]
        for c in nb.cells
        if c.metadata.get("kernel_agent", {}).get("role") == "note"
    ]
    assert [(n["lever"], n["reply"]) for n in notes] == [("states_result", "The mean is about 7.")]


def test_the_loop_keeps_the_last_failing_cells_hint_for_the_levers_asks(fake_llm, tmp_path) -> None:
    """``TaskState.last_hint`` is the loop's: push_after_error sends it with its push."""
    executor = FakeExecutor(FakeCell(error=("NameError", "name 'np' is not defined")))
    fake_llm.enqueue(run_cell("np.mean([1])"), text("I give up."), text("Still nothing."))
    result, _ = run(fake_llm, tmp_path, executor, levers="push_after_error")
    push = fake_llm.requests[2]["messages"][-1]["content"]
    assert "task is not done" in push and push.endswith(
        "`import numpy as np` at the top of the cell."
    )
    assert result.answer == "Still nothing."
