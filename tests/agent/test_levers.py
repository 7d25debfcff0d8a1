"""The loop's pieces without a kernel or a server: levers, protocols, history, settings."""

from __future__ import annotations

from datetime import datetime, timezone

import pytest
from nbformat.v4 import new_output

from kernel_agent.agent.history import History
from kernel_agent.agent.levers import LEVERS, SMALL_MODEL_LEVERS, levers_for
from kernel_agent.agent.levers.fenced_rules import FencedRules
from kernel_agent.agent.levers.grounding_check import GroundingCheck
from kernel_agent.agent.levers.no_install import NoInstall
from kernel_agent.agent.levers.nudge_no_code import NudgeNoCode
from kernel_agent.agent.levers.push_after_error import PushAfterError
from kernel_agent.agent.levers.repeat_guard import RepeatGuard
from kernel_agent.agent.protocols import FencedProtocol, ToolsProtocol
from kernel_agent.agent.state import TaskState, Turn
from kernel_agent.errors import ConfigError
from kernel_agent.kernel_state.namespace import VariableInfo
from kernel_agent.llm.stream import Completion, ToolCall
from kernel_agent.results import CellError, CellResult
from kernel_agent.settings import Settings

NOW = datetime.now(timezone.utc)


def ok(code: str, printed: str = "") -> CellResult:
    outputs = [new_output("stream", name="stdout", text=printed)] if printed else []
    return CellResult(code, "ok", 1, outputs, None, NOW, NOW)


def failed(
    code: str, ename: str = "NameError", evalue: str = "name 'x' is not defined"
) -> CellResult:
    return CellResult(code, "error", 1, [], CellError(ename, evalue, []), NOW, NOW)


# ---------------------------------------------------------------- levers
def test_nudge_asks_once_when_no_cell_ran() -> None:
    st, lever = TaskState("t"), NudgeNoCode()
    assert lever.on_answer(st, "It is 120.") is not None
    assert lever.on_answer(st, "It is 120.") is None, "once per task"
    ran = TaskState("t", cells=[ok("x = 1")])
    assert lever.for_task().on_answer(ran, "done") is None, "a new task: a fresh lever"


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


def test_grounding_check_questions_numbers_no_output_shows_once() -> None:
    lever = GroundingCheck()
    st = TaskState("sum the evens", cells=[ok("print(2550)", "2550\n")])
    ask = lever.on_answer(st, "The sum is 255.")
    assert ask is not None and "255" in ask.message and ask.notice
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


def test_repeat_guard_refuses_a_failed_cell_and_resamples() -> None:
    st, lever = TaskState("t", step=7), RepeatGuard(temperature=0.0)
    cell = failed("df = make(df)")
    lever.after_cell(st, cell, "Hint: no make")
    assert lever.before_cell(st, "x = 1") is None
    st.failures = 3
    first = lever.before_cell(st, "df = make(df)  \n\n")
    assert first is not None and first.rewind and "NameError" in first.message
    assert st.failures == 0  # the fresh attempt has the whole bound of failing cells
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


def test_fenced_rules_keep_one_block_of_a_fenced_reply() -> None:
    lever, st = FencedRules(), TaskState("t")
    fenced = Turn(["a = 1", "b = 2"], "", fenced=True)
    lever.after_reply(st, fenced)
    assert fenced.codes == ["a = 1"]
    calls = Turn(["a = 1", "b = 2"], "", ["c1", "c2"])
    lever.after_reply(st, calls)
    assert calls.codes == ["a = 1", "b = 2"]


def test_levers_are_chosen_by_name() -> None:
    names = lambda s: [lever.name for lever in levers_for(s)]  # noqa: E731
    assert names(Settings(home=".")) == list(LEVERS)
    assert names(Settings(home=".", levers="none")) == []
    assert names(Settings(home=".", levers="repeat_guard, nudge_no_code")) == [
        "nudge_no_code",
        "repeat_guard",
    ]
    assert Settings.from_env(env={"KERNEL_AGENT_LEVERS": "none"}).levers == "none"
    with pytest.raises(ConfigError, match="unknown lever 'nope'"):
        levers_for(Settings(home=".", levers=("nope",)))
    all_but = names(Settings(home=".", levers="-stall_guard,-data_preview"))
    assert all_but == [n for n in LEVERS if n not in ("stall_guard", "data_preview")]
    with pytest.raises(ConfigError, match="unknown lever 'nope'"):
        levers_for(Settings(home=".", levers="-nope"))


def test_each_lever_is_named_once_by_its_class_and_made_from_the_settings() -> None:
    assert LEVERS == tuple(lever.name for lever in SMALL_MODEL_LEVERS)
    assert len(set(LEVERS)) == len(LEVERS) and all(LEVERS)
    settings = Settings(home=".", llm_output_chars=1234, temperature=1.5, install="any")
    made = {type(lever): lever for lever in levers_for(settings)}
    assert list(made) == list(SMALL_MODEL_LEVERS)
    grounding, repeat, install = made[GroundingCheck], made[RepeatGuard], made[NoInstall]
    assert isinstance(grounding, GroundingCheck) and grounding.output_chars == 1234
    assert isinstance(repeat, RepeatGuard) and repeat.temperature == 1.5
    assert isinstance(install, NoInstall) and install.policy == "any"


# ---------------------------------------------------------------- protocols and history
def test_fenced_protocol_parses_remembers_code_only_and_takes_back_a_repeat() -> None:
    proto, history = FencedProtocol("python"), History()
    history.set_system("sys")
    reply = Completion(text="I guess 255.\n~~~python\nprint(2550)\n~~~")
    turn = proto.parse(reply)
    assert turn.codes == ["print(2550)"] and turn.prose == "I guess 255." and turn.fenced
    proto.remember(history, reply, turn)
    assert history.messages[-1] == {"role": "assistant", "content": "```python\nprint(2550)\n```"}
    proto.reject(history, None, "same code again")
    assert [m["role"] for m in history.messages] == ["system", "user"]
    assert proto.parse(Completion(text="```python\nprint(1", finish_reason="length")).codes == []


def test_tools_protocol_reports_bad_calls_before_the_next_result() -> None:
    proto, history = ToolsProtocol(), History()
    bad = ToolCall("c1", "run_cell", "{", None, parse_error="not JSON")
    good = ToolCall("c2", "run_cell", '{"code": "1"}', {"code": "1"})
    reply = Completion(tool_calls=(bad, good))
    turn = proto.parse(reply)
    assert turn.codes == ["1"] and turn.call_ids == ["c2"] and not turn.fenced
    proto.remember(history, reply, turn)
    assert history.messages[-1]["tool_calls"][0]["function"]["arguments"] == "{}"
    proto.reply(history, "c2", "out", ["data:image/png;base64,AAAA"])
    roles = [(m["role"], m.get("tool_call_id")) for m in history.messages[1:]]
    assert roles == [("tool", "c1"), ("tool", "c2"), ("user", None)]
    assert history.messages[-1]["content"][1]["image_url"]["url"] == "data:image/png;base64,AAAA"
    assert proto.flush_errors(history) == 0


def test_tools_protocol_runs_fenced_code_from_a_server_that_ignores_tools() -> None:
    proto = ToolsProtocol()
    turn = proto.parse(Completion(text="```python\nprint(1)\n```"))
    assert turn.codes == ["print(1)"] and turn.fenced and turn.call_id(0) is None


def test_history_swaps_the_system_prompt_in_place() -> None:
    history = History()
    history.set_system("one")
    history.user("task")
    history.set_system("two")
    assert list(history.messages) == [
        {"role": "system", "content": "two"},
        {"role": "user", "content": "task"},
    ]
