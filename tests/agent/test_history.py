"""History: what a request sends is bounded, whatever the messages hold (pure)."""

from __future__ import annotations

import json

import pytest

from kernel_agent.agent.history import MAX_REQUEST_CHARS, History


def size(messages: object) -> int:
    return len(json.dumps(messages, ensure_ascii=False))


def test_a_small_history_is_sent_as_it_is() -> None:
    history = History()
    history.set_system("system")
    history.user("task")
    history.assistant({"role": "assistant", "content": "ok"})
    assert list(history.messages) == [
        {"role": "system", "content": "system"},
        {"role": "user", "content": "task"},
        {"role": "assistant", "content": "ok"},
    ]


@pytest.mark.parametrize(
    "filler",
    [
        "x" * 60_000,  # many large outputs
        "\x01" * 60_000,  # escapes: six characters each in JSON
        "é😀" * 30_000,
    ],
    ids=["plain", "escapes", "unicode"],
)
def test_the_request_is_bounded_and_keeps_the_task_and_the_newest(filler: str) -> None:
    history = History()
    history.set_system("system prompt")
    history.user("the task")
    for i in range(40):
        call = {"id": f"c{i}", "type": "function", "function": {"name": "run_cell", "arguments": json.dumps({"code": filler})}}  # fmt: skip
        history.assistant({"role": "assistant", "content": None, "tool_calls": [call]})
        history.tool_result(f"c{i}", f"output {i}\n" + filler)
    history.user("newest " + filler * 20, images=["data:image/png;base64," + "A" * 300_000])
    sent = history.messages
    assert size(list(sent)) <= MAX_REQUEST_CHARS
    assert len(sent) == len(history)  # every message keeps its place (tool ids pair up)
    assert sent[0]["content"] == "system prompt" and sent[1]["content"] == "the task"
    assert sent[-1]["content"].startswith("newest ")
    ids = [m.get("tool_call_id") for m in sent if m["role"] == "tool"]
    calls = [c["id"] for m in sent if m["role"] == "assistant" for c in m["tool_calls"]]
    assert ids == calls


def test_a_huge_task_and_system_prompt_are_cut_too() -> None:
    history = History(max_chars=10_000)
    history.set_system("s" * 50_000)
    history.user("t" * 50_000)
    assert size(list(history.messages)) <= 10_000
