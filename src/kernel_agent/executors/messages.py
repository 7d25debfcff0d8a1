"""The shape check every kernel message passes before the host reads it.

A kernel is hostile: it holds its own signing key and can publish anything on
iopub or shell (content that is a list, a status without ``execution_state``, a
parent header that is a string, JSON nested 200,000 deep). Executors decode a
message inside ``try``, pass it through :func:`checked`, and drop (and count) what
fails, so no message can end the host's run. Pure; no I/O.
"""

from __future__ import annotations

from typing import Any

from ..notebook.bounds import json_size

__all__ = ["checked", "user_expressions", "MAX_EXPRESSIONS", "MAX_EXPRESSION_SIZE"]

#: the answers a reply may carry (the host asks for a few), and the size of each as
#: JSON: one longer than the host would ever parse (200,000 characters) is not kept
MAX_EXPRESSIONS = 16
MAX_EXPRESSION_SIZE = 250_000


def checked(msg: Any) -> dict[str, Any] | None:
    """``msg`` if its envelope has the protocol's shape, else None.

    Checked: the message, ``header``, ``parent_header``, ``content`` and ``metadata``
    are dicts; ``msg_type`` is a string (set from the header when missing); a
    ``status`` carries a string ``execution_state``. The content of outputs is
    checked by the collector, of comm messages by the bridge.
    """
    if not isinstance(msg, dict):
        return None
    header, parent, content = msg.get("header"), msg.get("parent_header", {}), msg.get("content")
    if not (isinstance(header, dict) and isinstance(parent, dict) and isinstance(content, dict)):
        return None
    if not isinstance(msg.get("metadata", {}), dict):
        return None
    msg_type = msg.get("msg_type", header.get("msg_type"))
    if not isinstance(msg_type, str) or header.get("msg_type", msg_type) != msg_type:
        return None
    msg_id = parent.get("msg_id")
    if msg_id is not None and not isinstance(msg_id, str):
        return None
    if msg_type == "status" and not isinstance(content.get("execution_state"), str):
        return None
    msg["msg_type"] = msg_type
    msg.setdefault("parent_header", parent)
    return msg


def user_expressions(content: dict[str, Any]) -> tuple[dict[str, Any], bool]:
    """A reply's ``user_expressions`` as ``{name: dict}``, and whether any part was malformed
    (the wrong shape, or more or larger answers than the host ever reads)."""
    raw = content.get("user_expressions")
    if raw is None:
        return {}, False
    if not isinstance(raw, dict):
        return {}, True
    kept = {
        k: v
        for k, v in list(raw.items())[:MAX_EXPRESSIONS]
        if isinstance(k, str)
        and len(k) <= 200
        and isinstance(v, dict)
        and json_size(v, MAX_EXPRESSION_SIZE) <= MAX_EXPRESSION_SIZE
    }
    return kept, len(kept) != len(raw)
