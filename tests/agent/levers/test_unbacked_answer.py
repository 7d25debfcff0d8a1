"""No value reported when no cell succeeded, and a copied namespace note is not an invented
number. Pure levers first, then the loop on a scripted executor and the loopback model
server."""

from __future__ import annotations

from datetime import datetime, timezone

import nbformat
import pytest
from fake_openai import run_cell, scripted_settings, text
from nbformat.v4 import new_output

from kernel_agent.agent import Agent
from kernel_agent.agent.levers.grounding_check import GroundingCheck
from kernel_agent.agent.levers.push_after_error import PushAfterError
from kernel_agent.agent.levers.unbacked_answer import UnbackedAnswer
from kernel_agent.agent.state import Ask, Stop, TaskState
from kernel_agent.events import RunFinished
from kernel_agent.results import CellError, CellResult
from kernel_agent.testing import FakeCell, FakeExecutor

pytestmark = pytest.mark.timeout(30)
NOW = datetime.now(timezone.utc)
CODE = "import pandas as pd\ndf = pd.read_csv('g.csv')\nbest = df[df['r'].idxmax()]\nprint(best)"
TRACE = [
    "\x1b[31m---------------------------------------------------------------------------\x1b[0m",
    "\x1b[31mKeyError\x1b[0m                                  Traceback (most recent call last)",
    "Cell \x1b[32mIn[3], line 3\x1b[0m",
    "\x1b[32m      2\x1b[39m df = pd.read_csv('g.csv')",
    "\x1b[32m----> 3\x1b[39m best = df[df['r'].idxmax()]",
    "File \x1b[32m.../pandas/core/frame.py:4102\x1b[0m, in \x1b[36mDataFrame.__getitem__\x1b[0m",
    "\x1b[32m-> 4102\x1b[39m     indexer = self.columns.get_loc(key)",
    "\x1b[31mKeyError\x1b[0m: 0",
]


def failed(code: str = CODE, ename: str = "KeyError", evalue: str = "0", trace=TRACE) -> CellResult:
    return CellResult(code, "error", 1, [], CellError(ename, evalue, list(trace)), NOW, NOW)


def ok(code: str, printed: str) -> CellResult:
    return CellResult(code, "ok", 1, [new_output("stream", name="stdout", text=printed)], None,
                      NOW, NOW)  # fmt: skip


# ---------------------------------------------------------------- no cell succeeded
def test_values_stated_when_no_cell_succeeded_are_asked_for_once_then_refused() -> None:
    lever = UnbackedAnswer()
    st = TaskState("Using g.csv: which firm has the highest mean ratio?", cells=[failed()])
    ask = lever.on_answer(st, "The firm is GM with a mean ratio of 0.146.")
    assert isinstance(ask, Ask) and "KeyError: 0" in ask.message
    stop = lever.on_answer(st, "The firm is GM with a mean ratio of 0.146.")
    assert isinstance(stop, Stop) and stop.status == "no_answer"
    assert "0.146" not in stop.answer and "KeyError: 0" in stop.answer
    words = TaskState("@firm[name]", cells=[failed()])
    fresh = lever.for_task()  # a new task
    assert isinstance(fresh.on_answer(words, "@firm[General Motors]"), Ask), "a word slot too"


@pytest.mark.parametrize(
    "typed",
    [
        "print('@verdict[not significant] @t_statistic[0.123]')",
        "# the answer\nprint('@verdict[not significant]')\n\nprint('@t_statistic[0.123]')",
        "print('t =', 0.123)",
        # the messy tuned half: a run's cell failed, then it printed a made-up run length
        "print('@days[' + str(0) + ']')\nprint('@start[2012-01-03]')",
        "print(f\"@rho[{-0.594}]\", sep='')\nprint(round(0.1234, 3))",
    ],
)
def test_a_cell_that_prints_typed_values_after_a_failure_backs_nothing(typed) -> None:
    """The bundled model, its cell failing, sent one printing the answer it made up."""
    st = TaskState("@verdict[name] @t_statistic[value]", cells=[failed(), ok(typed, "x\n")])
    ask = UnbackedAnswer().on_answer(st, "@verdict[not significant] @t_statistic[0.123]")
    assert isinstance(ask, Ask) and "typed into it computes nothing" in ask.message


def test_after_push_after_error_pushed_an_unbacked_answer_ends_the_run() -> None:
    st = TaskState("What is the mean?", cells=[failed()])
    push, lever = PushAfterError(), UnbackedAnswer()
    assert isinstance(push.on_answer(st, "The mean is 4.2."), Ask)
    assert isinstance(lever.on_answer(st, "The mean is 4.2."), Stop)


@pytest.mark.parametrize(
    ("cells", "answer"),
    [
        ([], "It is 1307674368000."),  # no cell ran: nudge_no_code's case
        ([failed(), ok("print(df['r'].mean())", "4.2\n")], "The mean is 4.2."),  # one succeeded
        ([ok("# the constant\nprint(22 / 7)", "3.14\n")], "It is 3.14."),  # it computes
        ([failed()], "The file g.csv has no column 0; I could not compute it."),  # the error's 0
        ([failed()], "I could not compute it."),
    ],
)
def test_answers_with_a_successful_cell_or_without_values_are_left_alone(cells, answer) -> None:
    assert UnbackedAnswer().on_answer(TaskState("the mean of g.csv", cells=cells), answer) is None


def test_a_copied_variables_note_is_not_an_ungrounded_number() -> None:
    st = TaskState("corr, 3 decimals", cells=[ok("print(round(c, 3))", "-0.743\n")])
    answer = (
        "The correlation is -0.743.\n"
        "Variables new: c (float64, shape () = np.float64(-0.7425637684919338))"
    )
    assert GroundingCheck().on_answer(st, answer) is None
    assert GroundingCheck().on_answer(st, "The correlation is -0.7426, from 51 rows.") is not None


# ---------------------------------------------------------------- the loop
def _run(fake_llm, tmp_path, executor, task="What is the mean ratio in g.csv?"):
    settings = scripted_settings(fake_llm, tmp_path, clean_notebook=False)
    with Agent(settings, executor=executor) as agent:
        events = list(agent.run(task))
    assert isinstance(events[-1], RunFinished)
    return events[-1].result


def test_the_loop_reports_no_invented_value_when_every_cell_failed(fake_llm, tmp_path):
    executor = FakeExecutor(FakeCell(error=("KeyError", "0")), FakeCell(error=("KeyError", "0")))
    fake_llm.enqueue(
        run_cell("print(df[0])"),
        text("The mean ratio is 0.146."),  # push_after_error sends it back
        run_cell("print(df[1])"),
        text("The mean ratio is 0.146."),  # unbacked_answer ends the run without it
    )
    result = _run(fake_llm, tmp_path, executor)
    assert result.status == "no_answer" and "0.146" not in result.answer
    assert len(fake_llm.requests) == 4
    nb = nbformat.read(result.notebook, as_version=4)
    notes = [c.metadata["kernel_agent"] for c in nb.cells
             if c.metadata.get("kernel_agent", {}).get("role") == "note"]  # fmt: skip
    assert [n["lever"] for n in notes] == ["push_after_error", "unbacked_answer"]
    assert notes[-1]["reply"] == "The mean ratio is 0.146.", "the refused reply is kept"


def test_the_loop_asks_for_a_computation_when_a_failure_is_followed_by_typed_values(
    fake_llm, tmp_path
):
    """The messy tuned half: a cast failed, then the model printed a t statistic it made up;
    the answer was composed from it. Now the model is asked to fix the error first."""
    typed = "print('@verdict[not significant] @t_statistic[0.123]')"
    executor = FakeExecutor(
        FakeCell(error=("IntCastingNaNError", "Cannot convert non-finite values")),
        FakeCell(stdout="@verdict[not significant] @t_statistic[0.123]\n"),
        FakeCell(stdout="-1.754\n"),
    )
    fake_llm.enqueue(
        run_cell("df['Luggage.room'] = df['Luggage.room'].astype(int)"),
        run_cell(typed),
        text("@verdict[not significant] @t_statistic[0.123]"),
        run_cell("t, p = stats.ttest_ind(a, b, equal_var=False)\nprint(round(t, 3))"),
        text("@verdict[not significant] @t_statistic[-1.754]"),
    )
    task = "Welch's t-test of MPG by Origin.\nGive it as: @verdict[name] @t_statistic[value]"
    result = _run(fake_llm, tmp_path, executor, task=task)
    assert result.status == "ok" and result.answer.endswith("@t_statistic[-1.754]")
    asked = fake_llm.requests[3]["messages"][-1]["content"]
    assert "typed into it computes nothing" in asked and "Cannot convert non-finite" in asked


def test_a_push_already_given_is_read_from_the_task_state_not_another_levers_memory() -> None:
    st = TaskState("What is the mean?", cells=[failed()], error_pushed=True)
    stop = UnbackedAnswer().on_answer(st, "The mean is 4.2.")
    assert isinstance(stop, Stop) and stop.status == "no_answer"
