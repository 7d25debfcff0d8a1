"""gateway_wire: framing checked against jupyter_server's own (de)serialisers."""

from __future__ import annotations

import json

import pytest
from jupyter_server.services.kernels.connection.base import (
    deserialize_binary_message,
    deserialize_msg_from_ws_v1,
    serialize_binary_message,
    serialize_msg_to_ws_v1,
)

from kernel_agent.executors.gateway_wire import (
    MALFORMED,
    V1_PROTOCOL,
    decode,
    encode,
    new_message,
    peek_parent_id,
)


def _reply(parent: dict, text: str = "héllo ✓") -> dict:
    msg = new_message("stream", {"name": "stdout", "text": text}, "kernel-session")
    msg["parent_header"] = parent["header"]
    return msg


def test_new_message_is_a_well_formed_request() -> None:
    msg = new_message("execute_request", {"code": "1"}, "s1")
    assert msg["header"]["msg_type"] == msg["msg_type"] == "execute_request"
    assert msg["header"]["session"] == "s1"
    assert msg["header"]["msg_id"] == msg["msg_id"]
    assert msg["parent_header"] == {} and msg["buffers"] == []
    assert new_message("x", {}, "s1")["msg_id"] != msg["msg_id"]


def test_v1_frames_we_send_are_what_jupyter_server_reads() -> None:
    msg = new_message("execute_request", {"code": "print('ü')"}, "s1")
    msg["buffers"] = [b"\x00\x01raw"]
    frame = encode("shell", msg, V1_PROTOCOL)
    channel, parts = deserialize_msg_from_ws_v1(frame)
    assert channel == "shell"
    assert [json.loads(p) for p in parts[:4]] == [msg["header"], {}, {}, msg["content"]]
    assert parts[4] == b"\x00\x01raw"


def test_v1_frames_from_jupyter_server_decode() -> None:
    request = new_message("execute_request", {"code": "1"}, "s1")
    reply = _reply(request)
    parts = [
        json.dumps(reply[k]).encode() for k in ("header", "parent_header", "metadata", "content")
    ]
    frame = serialize_msg_to_ws_v1([*parts, b"buf"], "iopub")
    msg = decode(frame, V1_PROTOCOL)
    assert msg["channel"] == "iopub"
    assert msg["msg_type"] == "stream"
    assert msg["content"]["text"] == "héllo ✓"
    assert msg["parent_header"]["msg_id"] == request["msg_id"]
    assert msg["buffers"] == [b"buf"]
    assert peek_parent_id(frame, V1_PROTOCOL) == request["msg_id"]


def test_v1_status_without_parent_peeks_as_none() -> None:
    status = new_message("status", {"execution_state": "restarting"}, "server")
    parts = [
        json.dumps(status[k]).encode() for k in ("header", "parent_header", "metadata", "content")
    ]
    frame = serialize_msg_to_ws_v1(parts, "iopub")
    assert peek_parent_id(frame, V1_PROTOCOL) is None
    assert decode(frame, V1_PROTOCOL)["content"]["execution_state"] == "restarting"


def test_legacy_text_frames_round_trip() -> None:
    request = new_message("kernel_info_request", {}, "s1")
    sent = encode("shell", request, None)
    assert isinstance(sent, str)
    assert json.loads(sent)["channel"] == "shell"
    reply = dict(_reply(request), channel="iopub")
    frame = json.dumps(reply).encode()  # websocket-client hands text frames over as bytes
    for given in (frame, frame.decode()):
        msg = decode(given, None, text=True)
        assert msg["channel"] == "iopub" and msg["content"]["text"] == "héllo ✓"
        assert peek_parent_id(given, None, text=True) == request["msg_id"]


def test_legacy_binary_frames_with_buffers_decode() -> None:
    request = new_message("comm_msg", {}, "s1")
    reply = dict(_reply(request), channel="iopub", buffers=[b"\xffdata"])
    frame = serialize_binary_message(reply)
    msg = decode(frame, None)
    assert msg["buffers"] == [b"\xffdata"]
    assert msg["content"] == deserialize_binary_message(frame)["content"]


@pytest.mark.parametrize(
    ("frame", "protocol", "text"),
    [
        (b"\x01\x00", V1_PROTOCOL, False),
        (b"{not json", None, True),
        (b"\x00\x00\x00\x09", None, False),
    ],
)
def test_garbage_raises_what_the_reader_skips(
    frame: bytes, protocol: str | None, text: bool
) -> None:
    with pytest.raises(MALFORMED):
        decode(frame, protocol, text=text)
