"""Hostile kernel messages against the host's pure handlers: nothing may raise.

A kernel holds its own signing key, so it can send any JSON (or not-JSON) on iopub
and shell. Each handler the executors call is fed a seeded stream of malformed
messages; the review's five crashing shapes (E3) are pinned by name. The same
attacks through the real CLI and sandboxed kernels are in tests/test_attacks_memory.py.
"""

from __future__ import annotations

import asyncio
import json
import random
from typing import Any

import pytest
from jupyter_client.session import Session

from kernel_agent.executors.cell import take_reply
from kernel_agent.executors.gateway_client import Channels
from kernel_agent.executors.kernel import _decode
from kernel_agent.executors.messages import checked
from kernel_agent.kernel_state.kernel_probe import parse_library_probe, parse_text_expression
from kernel_agent.kernel_state.namespace import parse_summary
from kernel_agent.notebook.outputs import OutputCollector
from kernel_agent.tools.bridge import BridgeLimits, HostBridge

pytestmark = pytest.mark.timeout(60)

_KEYS = [
    "header", "parent_header", "content", "metadata", "msg_type", "msg_id", "name", "text",
    "data", "transient", "display_id", "execution_state", "execution_count", "ename",
    "evalue", "traceback", "status", "user_expressions", "text/plain", "image/png",
    "application/json", "comm_id", "op", "id", "calls", "tool", "kwargs", "subshell_id", "wait",
]  # fmt: skip
_TYPES = [
    "stream", "display_data", "execute_result", "error", "update_display_data",
    "clear_output", "execute_input", "status", "comm_msg", "comm_open", "execute_reply",
]  # fmt: skip


def _value(rng: random.Random, depth: int = 0) -> Any:
    kind = rng.randrange(10 if depth < 4 else 6)
    if kind == 0:
        return None
    if kind == 1:
        return rng.choice([True, False, 0, -1, 2**70, 1.5, float("nan")])
    if kind == 2:
        return rng.choice(_TYPES + _KEYS + ["", "idle", "busy", "ok", "stdout", "x" * 5000])
    if kind == 3:
        return rng.randrange(-3, 10)
    if kind == 4:
        return "'" + "-" * rng.randrange(1, 400_000) + "1'"  # the E3 (e) literal, sized
    if kind == 5:
        return [rng.choice(_TYPES)]
    if kind in (6, 7, 8):
        return {rng.choice(_KEYS): _value(rng, depth + 1) for _ in range(rng.randrange(6))}
    return [_value(rng, depth + 1) for _ in range(rng.randrange(4))]


def _message(rng: random.Random) -> Any:
    if rng.random() < 0.1:
        return _value(rng)
    msg: dict[str, Any] = {
        "header": {"msg_type": rng.choice(_TYPES), "msg_id": "m"},
        "parent_header": {"msg_id": "p"},
        "metadata": {},
        "content": {},
    }
    for key in rng.sample(list(msg), rng.randrange(3)):
        msg[key] = _value(rng)
    if isinstance(msg.get("content"), dict):
        msg["content"] = {rng.choice(_KEYS): _value(rng) for _ in range(rng.randrange(7))}
    return msg


def test_fuzzed_messages_never_raise_in_the_pure_handlers() -> None:
    rng = random.Random(20261124)
    collector = OutputCollector(max_chars=10_000, max_cell_chars=50_000)
    bridge = HostBridge({}, BridgeLimits(max_in_flight=4))

    async def feed_all() -> None:
        for _ in range(3000):
            msg = _message(rng)
            kept = checked(msg)
            if kept is not None:
                collector.feed(kept)
                take_reply(collector, kept["content"])
            else:
                collector.feed(msg)
            bridge.feed(msg)
            content = msg.get("content") if isinstance(msg, dict) else msg
            parse_summary(content)  # type: ignore[arg-type]
            parse_library_probe(content)  # type: ignore[arg-type]
            parse_text_expression(content)  # type: ignore[arg-type]
        await asyncio.sleep(0)
        bridge.close()

    asyncio.run(feed_all())
    nb_outputs = collector.outputs  # still readable, and every output is valid nbformat
    import nbformat

    cell = nbformat.v4.new_code_cell("x", outputs=nb_outputs)
    nbformat.validate(nbformat.v4.new_notebook(cells=[cell]))
    assert collector.malformed > 0


# ---------------------------------------------------------------- the review's E3
def test_e3_deep_json_does_not_decode_and_is_dropped() -> None:
    session = Session(key=b"secret")
    n = 200_000
    raw = b'{"comm_id": "x", "data": {"op": "call", "id": "1", "calls": ' + b"[" * n + b"]" * n
    msg = session.msg("comm_msg", parent={"msg_id": "p"})
    msg["content"] = raw + b"}}"
    frames = session.serialize(msg)
    assert _decode(session, frames) is None
    fine = session.serialize(session.msg("status", {"execution_state": "idle"}))
    assert _decode(session, fine) is not None


def test_e3_status_without_state_and_content_that_is_a_list_fail_the_shape_check() -> None:
    session = Session(key=b"secret")
    for content in ({}, b"[1, 2]"):
        msg = session.msg("status" if content == {} else "comm_msg", parent={"msg_id": "p"})
        msg["content"] = content
        assert _decode(session, session.serialize(msg)) is None
    assert checked({"header": {"msg_type": "x"}, "parent_header": "p", "content": {}}) is None
    assert (
        checked({"header": {"msg_type": "x"}, "parent_header": {"msg_id": 1}, "content": {}})
        is None
    )


def test_e3_forged_user_expressions_are_none_not_a_crash() -> None:
    assert parse_summary({"status": "ok", "data": "not-a-dict"}) is None
    assert parse_summary({"status": "ok", "data": {"text/plain": "-" * 300000 + "1"}}) is None
    deep = repr("[" * 50_000 + "]" * 50_000)  # RecursionError in json.loads
    assert parse_summary({"status": "ok", "data": {"text/plain": deep}}) is None
    forged = {"status": "ok", "data": {"text/plain": repr(json.dumps({"x": {"id": "nan"}}))}}
    assert parse_summary(forged) == {}  # a variable of the wrong shape is left out
    fine = {"status": "ok", "data": {"text/plain": repr(json.dumps({"x": {"type": "int"}}))}}
    assert list(parse_summary(fine) or {}) == ["x"]
    # the flags the pandas_pitfalls lever reads: only a real true, a dtype cut short
    odd = {"x": {"type": "Series", "row_numbers": "yes", "dtype": "b" * 10_000}}
    x = (parse_summary({"status": "ok", "data": {"text/plain": repr(json.dumps(odd))}}) or {})["x"]
    assert x.row_numbers is False and x.dtype is not None and len(x.dtype) == 40
    collector = OutputCollector()
    assert take_reply(collector, {"status": "ok", "user_expressions": "x"}) == "ok"
    assert collector.user_expressions == {} and collector.malformed == 1
    take_reply(collector, {"status": "ok", "user_expressions": {"ns": "not-a-dict", "ok": {}}})
    assert collector.user_expressions == {"ok": {}}


def test_a_gateway_frame_of_the_wrong_shape_is_dropped_in_the_reader() -> None:
    channels = Channels("ws://127.0.0.1:1/x", {}, "s")
    channels.expected.add("p")
    bad = [
        json.dumps({"header": {"msg_type": "status"}, "parent_header": {"msg_id": "p"},
                    "content": {}, "channel": "iopub"}),
        json.dumps({"header": {"msg_type": "stream"}, "parent_header": {"msg_id": "p"},
                    "content": [1, 2], "channel": "iopub"}),
        json.dumps({"header": {"msg_type": "stream"}, "parent_header": {"msg_id": "p"},
                    "content": {}}),
        "[" * 100_000 + "]" * 100_000,
    ]  # fmt: skip
    for frame in bad:
        with pytest.raises(Exception):  # noqa: B017 - the reader catches Exception and counts
            channels._route(frame.encode(), True)
    assert len(channels.inbox) == 0


def test_a_tool_call_flood_keeps_a_bounded_record() -> None:
    class Recorder:
        sent = 0

        async def send_comm(self, comm_id: str, data: dict[str, Any], sub: str | None) -> None:
            self.sent += 1

    async def flood() -> tuple[list[dict[str, Any]], dict[str, int]]:
        bridge = HostBridge({}, BridgeLimits(max_records=50, max_in_flight=1000))
        bridge.executor = Recorder()
        calls = [{"tool": "nope" + "x" * 150, "kwargs": {"a": "b" * 150}}] * 64
        for i in range(100):
            data = {"op": "call", "id": str(i), "calls": calls}
            bridge.feed({"msg_type": "comm_msg", "content": {"comm_id": "c", "data": data}})
        while bridge._tasks:
            await asyncio.sleep(0.01)
        bridge.close()
        return bridge.take_records(), bridge.take_left_out()

    records, left_out = asyncio.run(flood())
    assert len(records) == 50
    assert left_out == {"unrecorded": 100 * 64 - 50}


def test_forged_user_expressions_are_bounded_before_they_are_kept() -> None:
    # a reply's answers stay in the cell's result for the run: one the host would never
    # parse (over 200,000 characters), or more answers than it asks, is not kept
    from kernel_agent.executors.messages import MAX_EXPRESSIONS, user_expressions

    big = {"status": "ok", "data": {"text/plain": "x" * 30_000_000}, "metadata": {}}
    deep = {"status": "ok", "data": {"text/plain": "1"}, "metadata": {"m": [[0] * 10] * 100_000}}
    fine = {"status": "ok", "data": {"text/plain": "'{}'"}, "metadata": {}}
    kept, malformed = user_expressions({"user_expressions": {"ns": big, "deep": deep, "ok": fine}})
    assert kept == {"ok": fine} and malformed
    many = {f"e{i}": fine for i in range(10_000)}
    kept, malformed = user_expressions({"user_expressions": many})
    assert len(kept) == MAX_EXPRESSIONS and malformed
    assert user_expressions({"user_expressions": {"ns": fine}}) == ({"ns": fine}, False)
