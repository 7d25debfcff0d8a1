"""Jupyter iopub messages -> nbformat output NotebookNodes, as Jupyter itself stores them.

Pure: no I/O. :class:`OutputCollector` is fed one message at a time and keeps the
outputs of one cell the way a Jupyter front end would:

- adjacent stream chunks of the same name are coalesced, with ``\\r`` and ``\\b``
  resolved as nbclient resolves them;
- ``clear_output(wait=True)`` is deferred until the next output arrives;
- ``update_display_data`` patches every earlier output with the same display_id,
  through a map that may be shared across cells;
- text past ``max_chars`` is cut to a head and a tail around a visible marker, so a
  flood keeps memory bounded; other oversized MIME data is dropped with a note.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from nbformat import NotebookNode
from nbformat.v4 import output_from_msg

from .results import CellError

__all__ = ["OutputCollector", "resolve_control_chars", "truncation_marker", "DisplayMap"]

DisplayMap = dict[str, list[NotebookNode]]

_BACKSPACE = re.compile("[^\n\x08]\x08")
_OUTPUT_TYPES = ("stream", "display_data", "execute_result", "error")
_TEXT_MIMES = ("text/plain",)


def resolve_control_chars(text: str) -> str:
    """Apply ``\\b`` and ``\\r`` the way a terminal (and nbclient) shows them.

    Linear time: nbclient's ``re.sub(r".*\\r(?=[^\\n])", "", text)`` backtracks
    quadratically over a long line (a 1 MB line took minutes); this gives the same
    result by keeping, per line, what follows its last ``\\r`` that has text after it.
    """
    if "\r" not in text and "\x08" not in text:
        return text
    text = text.replace("\r\n", "\n")
    while "\x08" in text:
        resolved = _BACKSPACE.sub("", text)
        if resolved == text:
            break
        text = resolved
    if "\r" not in text:
        return text
    lines = text.split("\n")
    for i, line in enumerate(lines):
        cut = line.rfind("\r", 0, len(line) - 1)
        if cut >= 0:
            lines[i] = line[cut + 1 :]
    return "\n".join(lines)


def truncation_marker(omitted: int) -> str:
    return f"\n[kernel-agent: output truncated, {omitted:,} characters omitted]\n"


class _BoundedText:
    """Stream text that keeps a head and a tail of at most ``limit`` characters in all."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.head = ""
        self.tail = ""
        self.omitted = 0

    def append(self, chunk: str) -> None:
        if not self.omitted:
            whole = resolve_control_chars(self.head + chunk)
            if len(whole) <= self.limit:
                self.head = whole
                return
            self.head, rest = whole[: self.limit // 2], whole[self.limit // 2 :]
        else:
            rest = chunk
        tail = resolve_control_chars(self.tail + rest)
        keep = self.limit - len(self.head)
        if len(tail) > keep:
            self.omitted += len(tail) - keep
            tail = tail[-keep:]
        self.tail = tail

    @property
    def text(self) -> str:
        if not self.omitted:
            return self.head
        return self.head + truncation_marker(self.omitted) + self.tail


class OutputCollector:
    """Collects the outputs of one cell from its iopub messages.

    ``on_output`` is called with each new piece as it arrives: a fresh stream node
    holding just the new chunk, or the display/result/error node itself.
    """

    def __init__(
        self,
        max_chars: int = 1_000_000,
        display_map: DisplayMap | None = None,
        on_output: Callable[[NotebookNode], Any] | None = None,
    ) -> None:
        self.max_chars = max_chars
        self.outputs: list[NotebookNode] = []
        self.execution_count: int | None = None
        self.error: CellError | None = None
        #: filled by the executor from the execute_reply
        self.user_expressions: dict[str, Any] = {}
        self.display_map: DisplayMap = {} if display_map is None else display_map
        self._on_output = on_output
        self._clear_pending = False
        self._streams: dict[int, _BoundedText] = {}

    def feed(self, msg: dict[str, Any]) -> None:
        """Take one iopub message (already deserialized, as jupyter_client gives it)."""
        msg_type = msg["header"]["msg_type"]
        content = msg["content"]
        if msg_type == "execute_input":
            self.execution_count = content.get("execution_count")
        elif msg_type == "clear_output":
            if content.get("wait"):
                self._clear_pending = True
            else:
                self._clear()
        elif msg_type == "update_display_data":
            self._update_display(content)
        elif msg_type in _OUTPUT_TYPES:
            if self._clear_pending:
                self._clear()
            self._add(msg_type, msg)

    def _clear(self) -> None:
        self.outputs.clear()
        self._streams.clear()
        self._clear_pending = False

    def _add(self, msg_type: str, msg: dict[str, Any]) -> None:
        content = msg["content"]
        if msg_type == "stream":
            self._add_stream(content["name"], content.get("text", ""))
            return
        node = output_from_msg(msg)
        if msg_type == "execute_result":
            self.execution_count = content.get("execution_count", self.execution_count)
        if msg_type == "error":
            self.error = CellError(node.ename, node.evalue, list(node.traceback))
        if "data" in node:
            self._bound_data(node)
        display_id = (content.get("transient") or {}).get("display_id")
        if display_id:
            self.display_map.setdefault(display_id, []).append(node)
        self.outputs.append(node)
        self._notify(node)

    def _add_stream(self, name: str, chunk: str) -> None:
        last = self.outputs[-1] if self.outputs else None
        if last is None or last.output_type != "stream" or last.name != name:
            last = NotebookNode(output_type="stream", name=name, text="")
            self.outputs.append(last)
            self._streams[id(last)] = _BoundedText(self.max_chars)
        buffer = self._streams[id(last)]
        buffer.append(chunk)
        last.text = buffer.text
        self._notify(NotebookNode(output_type="stream", name=name, text=chunk))

    def _update_display(self, content: dict[str, Any]) -> None:
        display_id = (content.get("transient") or {}).get("display_id")
        targets = self.display_map.get(display_id or "", [])
        if not targets:
            return
        patch = output_from_msg({"header": {"msg_type": "display_data"}, "content": content})
        self._bound_data(patch)
        for node in targets:
            node.data = patch.data
            node.metadata = patch.metadata
        self._notify(patch)

    def _bound_data(self, node: NotebookNode) -> None:
        dropped = []
        for mime, value in list(node.data.items()):
            size = len(value) if isinstance(value, str) else len(str(value))
            if size <= self.max_chars:
                continue
            if mime in _TEXT_MIMES and isinstance(value, str):
                bounded = _BoundedText(self.max_chars)
                bounded.append(value)
                node.data[mime] = bounded.text
            else:
                del node.data[mime]
                dropped.append(f"{mime} ({size:,} characters)")
        if dropped:
            note = f"[kernel-agent: omitted oversized {', '.join(dropped)}]"
            plain = node.data.get("text/plain", "")
            node.data["text/plain"] = f"{plain}\n{note}" if plain else note

    def _notify(self, node: NotebookNode) -> None:
        if self._on_output is not None:
            self._on_output(node)
