"""HostBridge as a pure unit: comm requests in, comm replies out (a recording executor)."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from kernel_agent.tools.bridge import BridgeLimits, HostBridge, kernel_init_code
from kernel_agent.tools.registry import make_tools

pytestmark = pytest.mark.timeout(30)


class Recorder:
    """What the bridge needs of an executor: ``send_comm``; it records the replies."""

    def __init__(self) -> None:
        self.sent: list[tuple[str, dict[str, Any], str | None]] = []

    async def send_comm(self, comm_id: str, data: dict[str, Any], subshell_id: str | None) -> None:
        self.sent.append((comm_id, data, subshell_id))


def request(rid: str, calls: list[dict[str, Any]]) -> dict[str, Any]:
    data = {"op": "call", "id": rid, "subshell_id": "sub-1", "calls": calls}
    return {"msg_type": "comm_msg", "content": {"comm_id": "c1", "data": data}}


def quick(x: int) -> int:
    return x + 1


async def slow_async(x: int) -> int:
    await asyncio.sleep(0.2)
    return x


async def serve(bridge: HostBridge, *msgs: dict[str, Any]) -> None:
    for msg in msgs:
        bridge.feed(msg)
    while bridge._tasks:
        await asyncio.sleep(0.01)


def test_a_fast_answer_acknowledges_itself_and_a_slow_one_is_acked_first():
    rec = Recorder()
    bridge = HostBridge(make_tools([quick, slow_async]))
    bridge.executor = rec
    asyncio.run(
        serve(
            bridge,
            request("r1", [{"tool": "quick", "kwargs": {"x": 1}}]),
            request("r2", [{"tool": "slow_async", "kwargs": {"x": 5}}]),
        )
    )
    ops = [(data["id"], data["op"]) for _, data, _ in rec.sent]
    assert ops == [("r1", "reply"), ("r2", "ack"), ("r2", "reply")]
    assert all(comm == "c1" and sub == "sub-1" for comm, _, sub in rec.sent)
    assert rec.sent[0][1]["results"] == [{"ok": True, "value": 2}]
    assert [r["tool"] for r in bridge.take_records()] == ["quick", "slow_async"]
    assert bridge.take_records() == []
    bridge.close()


def test_async_tool_timeout_and_batch_bound():
    rec = Recorder()
    bridge = HostBridge(make_tools([slow_async]), BridgeLimits(timeout_s=0.05, max_batch=2))
    bridge.executor = rec
    started = time.monotonic()
    asyncio.run(
        serve(
            bridge,
            request("t", [{"tool": "slow_async", "kwargs": {"x": 1}}]),
            request("b", [{"tool": "slow_async", "kwargs": {"x": 1}}] * 3),
        )
    )
    assert time.monotonic() - started < 0.2  # the async tool was cancelled at its timeout
    replies = {data["id"]: data for _, data, _ in rec.sent if data["op"] == "reply"}
    assert replies["t"]["results"][0]["error_type"] == "ToolTimeout"
    assert replies["b"]["results"] == [{"ok": False, "error": "at most 2 calls in one batch"}] * 3
    bridge.close()


def test_messages_that_are_not_requests_are_ignored():
    bridge = HostBridge({})
    bridge.executor = Recorder()
    for msg in (
        {"msg_type": "comm_open", "content": {"comm_id": "c", "data": {"subshell_id": "s"}}},
        {"msg_type": "comm_msg", "content": {"comm_id": "c", "data": {"no": "op"}}},
        {"msg_type": "comm_msg", "content": {"comm_id": "c", "data": "text"}},
    ):
        bridge.feed(msg)
    assert not bridge._tasks and bridge.executor.sent == []


def test_init_code_compiles_and_carries_its_config():
    code = kernel_init_code(listening=False, timeout_s=3.0, site="/s", rerun={"installs": {}})
    compile(code, "<init>", "exec")
    assert "'timeout': 3.0" in code and "sys').path.insert(0, '/s')" in code
