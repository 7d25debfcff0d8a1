"""The loop's pieces without a kernel or a server: the protocols and the history.

(The levers' own tests are in tests/agent/levers/.)"""

from __future__ import annotations

from kernel_agent.agent.history import History
from kernel_agent.agent.protocols import FencedProtocol, ToolsProtocol
from kernel_agent.llm.stream import Completion, ToolCall


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
