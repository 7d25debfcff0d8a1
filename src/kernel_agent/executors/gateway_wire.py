"""Kernel messages on a Jupyter Server websocket: building, framing and parsing them.

Pure: no I/O. Two framings exist on ``/api/kernels/{id}/channels``:

- ``v1.kernel.websocket.jupyter.org`` (jupyter_server >= 2): one binary frame holding
  a table of offsets, the channel name, then the header, parent header, metadata and
  content as the kernel packed them, then any buffers. The server forwards the
  kernel's bytes without re-serialising them, so it is the faster one.
- the legacy protocol (older servers, Enterprise Gateway pinned to jupyter_server 1.x):
  one JSON text frame per message with a ``channel`` key, or a binary frame with
  big-endian 32-bit offsets when the message carries buffers.

Parsed messages are dicts shaped as jupyter_client gives them (``header``,
``parent_header``, ``metadata``, ``content``, ``buffers``, ``msg_id``, ``msg_type``),
plus ``channel``.
"""

from __future__ import annotations

import json
import struct
import uuid
from datetime import datetime, timezone
from typing import Any

__all__ = [
    "V1_PROTOCOL",
    "MALFORMED",
    "new_message",
    "encode",
    "decode",
    "peek_parent_id",
]

V1_PROTOCOL = "v1.kernel.websocket.jupyter.org"
#: what decoding a malformed frame can raise
MALFORMED = (ValueError, KeyError, TypeError, IndexError, struct.error)
_PROTOCOL_VERSION = "5.3"


def new_message(
    msg_type: str, content: dict[str, Any], session: str, *, username: str = "kernel-agent"
) -> dict[str, Any]:
    """A fresh request message (no channel yet)."""
    msg_id = uuid.uuid4().hex
    header = {
        "msg_id": msg_id,
        "msg_type": msg_type,
        "username": username,
        "session": session,
        "date": datetime.now(timezone.utc).isoformat(),
        "version": _PROTOCOL_VERSION,
    }
    return {
        "header": header,
        "parent_header": {},
        "metadata": {},
        "content": content,
        "buffers": [],
        "msg_id": msg_id,
        "msg_type": msg_type,
    }


def _dumps(obj: Any) -> bytes:
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode()


def encode(channel: str, msg: dict[str, Any], protocol: str | None) -> bytes | str:
    """One websocket frame for ``msg`` on ``channel`` (bytes: binary, str: text)."""
    if protocol == V1_PROTOCOL:
        parts = [
            channel.encode(),
            _dumps(msg["header"]),
            _dumps(msg["parent_header"]),
            _dumps(msg["metadata"]),
            _dumps(msg["content"]),
            *(bytes(b) for b in msg.get("buffers", [])),
        ]
        offsets = [8 * (len(parts) + 2)]
        for part in parts:
            offsets.append(offsets[-1] + len(part))
        table = struct.pack(f"<{len(offsets) + 1}Q", len(offsets), *offsets)
        return table + b"".join(parts)
    legacy = {k: msg[k] for k in ("header", "parent_header", "metadata", "content")}
    legacy["channel"] = channel
    legacy["buffers"] = []
    return json.dumps(legacy)


def _split_v1(frame: bytes) -> tuple[str, list[memoryview]]:
    view = memoryview(frame)
    (count,) = struct.unpack_from("<Q", view, 0)
    offsets = struct.unpack_from(f"<{count}Q", view, 8)
    channel = bytes(view[offsets[0] : offsets[1]]).decode()
    parts = [view[start:end] for start, end in zip(offsets[1:-1], offsets[2:], strict=True)]
    return channel, parts


def peek_parent_id(frame: bytes | str, protocol: str | None, *, text: bool = False) -> str | None:
    """The parent msg_id of a frame, parsing as little as possible (for filtering)."""
    if protocol == V1_PROTOCOL and not text and isinstance(frame, bytes):
        parts = _split_v1(frame)[1]
        parent = json.loads(bytes(parts[1])) if len(parts) > 1 else {}
        return parent.get("msg_id") if parent else None
    return decode(frame, protocol, text=text)["parent_header"].get("msg_id")


def decode(frame: bytes | str, protocol: str | None, *, text: bool = False) -> dict[str, Any]:
    """Parse one websocket frame into a message dict (see the module docstring).

    ``text``: the frame came as a text frame (its bytes are UTF-8 JSON).
    """
    if isinstance(frame, str) or text:
        msg = json.loads(frame)
        msg.setdefault("buffers", [])
    elif protocol == V1_PROTOCOL:
        channel, parts = _split_v1(frame)
        header, parent, metadata, content = (json.loads(bytes(p)) for p in parts[:4])
        msg = {
            "channel": channel,
            "header": header,
            "parent_header": parent,
            "metadata": metadata,
            "content": content,
            "buffers": [bytes(p) for p in parts[4:]],
        }
    else:
        (count,) = struct.unpack_from("!I", frame, 0)
        offsets = [*struct.unpack_from(f"!{count}I", frame, 4), len(frame)]
        msg = json.loads(frame[offsets[0] : offsets[1]])
        msg["buffers"] = [frame[a:b] for a, b in zip(offsets[1:-1], offsets[2:], strict=True)]
    msg["msg_id"] = msg["header"].get("msg_id")
    msg["msg_type"] = msg["header"].get("msg_type")
    return msg
