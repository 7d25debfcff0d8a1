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
from collections import deque
from collections.abc import Callable
from typing import Any

from nbformat import NotebookNode
from nbformat.v4 import output_from_msg

from ..results import CellError

__all__ = ["OutputCollector", "resolve_control_chars", "truncation_marker", "DisplayMap"]

DisplayMap = dict[str, list[NotebookNode]]

_BACKSPACE = re.compile("[^\n\x08]\x08")
_OUTPUT_TYPES = ("stream", "display_data", "execute_result", "error")
_TEXT_MIMES = ("text/plain",)
_LINE_CAP = 65536


def resolve_control_chars(text: str) -> str:
    """Apply ``\\b`` and ``\\r`` the way a terminal (and nbclient) shows them.

    Linear in ``len(text)``: a ``\\r`` only rewrites its own line, so each line keeps
    what follows its last ``\\r`` (one still waiting at the end of a line stays).
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
    return "\n".join(line[line.rfind("\r", 0, len(line) - 1) + 1 :] for line in text.split("\n"))


def truncation_marker(omitted: int) -> str:
    return f"\n[kernel-agent: output truncated, {omitted:,} characters omitted]\n"


class _BoundedText:
    """Stream text that keeps a head and a tail of at most ``limit`` characters in all.

    Complete lines are resolved once and never looked at again; only the open last
    line is re-resolved when a chunk arrives, so an append costs O(chunk), not
    O(text). An open line longer than ``limit // 2`` (or 64 KiB) is settled as it is:
    a later ``\\r`` no longer rewrites what was settled.
    """

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.line_cap = max(1, min(_LINE_CAP, limit // 2))
        self.head: list[str] = []
        self.head_len = 0
        self.tail: deque[str] = deque()
        self.tail_len = 0
        self.line = ""
        self.omitted = 0

    def append(self, chunk: str) -> None:
        text = self.line + chunk
        cut = text.rfind("\n") + 1
        if cut:
            self._settle(resolve_control_chars(text[:cut]))
            text = text[cut:]
        self.line = resolve_control_chars(text)
        if len(self.line) > self.line_cap:
            self._settle(self.line)
            self.line = ""
        self._bound()

    def _settle(self, text: str) -> None:
        room = self.limit // 2 - self.head_len
        if room > 0:
            self.head.append(text[:room])
            self.head_len += len(self.head[-1])
            text = text[room:]
        if text:
            self.tail.append(text)
            self.tail_len += len(text)

    def _bound(self) -> None:
        excess = self.head_len + self.tail_len + len(self.line) - self.limit
        while excess > 0 and self.tail:
            first = self.tail[0]
            drop = min(excess, len(first))
            if drop == len(first):
                self.tail.popleft()
            else:
                self.tail[0] = first[drop:]
            self.tail_len -= drop
            self.omitted += drop
            excess -= drop

    @property
    def text(self) -> str:
        if len(self.head) > 1:
            self.head = ["".join(self.head)]
        if len(self.tail) > 1:
            self.tail = deque(["".join(self.tail)])
        marker = truncation_marker(self.omitted) if self.omitted else ""
        return "".join(self.head) + marker + "".join(self.tail) + self.line


class OutputCollector:
    """Collects the outputs of one cell from its iopub messages.

    ``on_output`` is called with each new piece as it arrives: a fresh stream node
    holding just the new chunk, or the display/result/error node itself. The text of
    the stream being written is joined when :attr:`outputs` is read, not per chunk.
    """

    def __init__(
        self,
        max_chars: int = 1_000_000,
        display_map: DisplayMap | None = None,
        on_output: Callable[[NotebookNode], Any] | None = None,
    ) -> None:
        self.max_chars = max_chars
        self._outputs: list[NotebookNode] = []
        self.execution_count: int | None = None
        self.error: CellError | None = None
        #: filled by the executor from the execute_reply
        self.user_expressions: dict[str, Any] = {}
        self.display_map: DisplayMap = {} if display_map is None else display_map
        self._on_output = on_output
        self._clear_pending = False
        self._open: tuple[NotebookNode, _BoundedText] | None = None

    @property
    def outputs(self) -> list[NotebookNode]:
        """The cell's outputs so far, as nbformat NotebookNodes."""
        if self._open is not None:
            node, buffer = self._open
            node.text = buffer.text
        return self._outputs

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
        # cleared outputs leave the display map too, or an animation keeps every frame
        gone = {id(node) for node in self._outputs}
        for display_id, nodes in list(self.display_map.items()):
            nodes[:] = [node for node in nodes if id(node) not in gone]
            if not nodes:
                del self.display_map[display_id]
        self._outputs.clear()
        self._open = None
        self._clear_pending = False

    def _close_stream(self) -> None:
        """Write the open stream's text into its node and let its buffer go."""
        if self._open is not None:
            node, buffer = self._open
            node.text = buffer.text
            self._open = None

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
            # as in Jupyter: a new display with a known id also updates the earlier ones
            self._patch_display(display_id, node)
            self.display_map.setdefault(display_id, []).append(node)
        self._close_stream()
        self._outputs.append(node)
        self._notify(node)

    def _add_stream(self, name: str, chunk: str) -> None:
        if self._open is None or self._open[0].name != name:
            self._close_stream()
            node = NotebookNode(output_type="stream", name=name, text="")
            self._outputs.append(node)
            self._open = (node, _BoundedText(self.max_chars))
        self._open[1].append(chunk)
        if self._on_output is not None:
            self._notify(NotebookNode(output_type="stream", name=name, text=chunk))

    def _update_display(self, content: dict[str, Any]) -> None:
        display_id = (content.get("transient") or {}).get("display_id") or ""
        if not self.display_map.get(display_id):
            return
        patch = output_from_msg({"header": {"msg_type": "display_data"}, "content": content})
        self._bound_data(patch)
        self._patch_display(display_id, patch)
        self._notify(patch)

    def _patch_display(self, display_id: str, patch: NotebookNode) -> None:
        for node in self.display_map.get(display_id, []):
            node.data = patch.data
            node.metadata = patch.metadata

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
