"""Jupyter iopub messages -> nbformat output NotebookNodes, as Jupyter itself stores them.

Pure: no I/O. :class:`OutputCollector` is fed one message at a time and keeps the
outputs of one cell the way a Jupyter front end would:

- adjacent stream chunks of the same name are coalesced, with ``\\r`` and ``\\b``
  resolved as nbclient resolves them;
- ``clear_output(wait=True)`` is deferred until the next output arrives;
- ``update_display_data`` patches every earlier output with the same display_id,
  through a map that may be shared across cells;
- text past ``max_chars`` is cut to a head and a tail around a visible marker, so a
  flood keeps memory bounded; other oversized MIME data is dropped with a note;
- a cell keeps at most ``max_cell_chars`` characters and ``max_outputs`` outputs in
  all: a head and a tail of outputs, with one note saying how much was dropped
  between them (a stream switch opens a new output, so bounding each is not enough);
- what the kernel sends is hostile: a message of the wrong shape is dropped and
  counted (:attr:`OutputCollector.malformed`), never raised, and a note says so.
"""

from __future__ import annotations

import json
import re
from collections import deque
from collections.abc import Callable
from typing import Any

from nbformat import NotebookNode
from nbformat.v4 import output_from_msg

from ..results import CellError

__all__ = [
    "OutputCollector",
    "resolve_control_chars",
    "truncation_marker",
    "DisplayMap",
    "MAX_DISPLAY_NODES",
    "LOST_END_NOTE",
]

DisplayMap = dict[str, list[NotebookNode]]

_BACKSPACE = re.compile("[^\n\x08]\x08")
_OUTPUT_TYPES = ("stream", "display_data", "execute_result", "error")
_TEXT_MIMES = ("text/plain",)
_LINE_CAP = 65536
_JSON_MIME = re.compile(r"^application/(.*\+)?json$")
#: outputs the display map keeps patchable, across cells (an update rewrites each one)
MAX_DISPLAY_NODES = 32


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
        if len(chunk) > 2 * self.limit:
            # the middle of a chunk this long is dropped whatever it holds: it is
            # counted, not copied (a 100 MB message would otherwise be copied twice)
            self.append(chunk[: self.limit])
            self.omitted += len(chunk) - 2 * self.limit
            chunk = chunk[-self.limit :]
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
    holding just the new chunk, or the display/result/error node itself; after half
    the cell's budget it gets one note and nothing more. The text of the stream
    being written is joined when :attr:`outputs` is read, not per chunk.
    """

    def __init__(
        self,
        max_chars: int = 1_000_000,
        display_map: DisplayMap | None = None,
        on_output: Callable[[NotebookNode], Any] | None = None,
        *,
        max_cell_chars: int | None = None,
        max_outputs: int = 1000,
    ) -> None:
        self.max_chars = max_chars
        #: characters kept for the whole cell (default 8 x ``max_chars``)
        self.max_cell_chars = 8 * max_chars if max_cell_chars is None else max_cell_chars
        self.max_outputs = max(2, max_outputs)
        self.execution_count: int | None = None
        self.error: CellError | None = None
        #: filled by the executor from the execute_reply
        self.user_expressions: dict[str, Any] = {}
        self.display_map: DisplayMap = {} if display_map is None else display_map
        #: kernel messages dropped for their shape (the executors count theirs here too)
        self.malformed = 0
        #: notes the executor adds after the outputs (each one line, ending in a newline)
        self.notes: list[str] = []
        self._on_output = on_output
        self._clear_pending = False
        self._open: tuple[NotebookNode, _BoundedText] | None = None
        # the outputs kept: a head, then a tail that drops its oldest past the budget
        self._head: list[NotebookNode] = []
        self._tail: deque[tuple[NotebookNode, int]] = deque()
        self._head_chars = self._tail_chars = 0
        self._omitted_outputs = self._omitted_chars = 0
        self._live_chars = 0
        self._live_stopped = False

    @property
    def outputs(self) -> list[NotebookNode]:
        """The cell's outputs so far, as nbformat NotebookNodes (a new list each time)."""
        if self._open is not None:
            node, buffer = self._open
            node.text = buffer.text
        outputs = list(self._head)
        if self._omitted_outputs:
            outputs.append(_note(omitted_note(self._omitted_outputs, self._omitted_chars)))
        outputs.extend(node for node, _ in self._tail)
        if self.malformed:
            outputs.append(_note(malformed_note(self.malformed)))
        outputs.extend(_note(text) for text in self.notes)
        return outputs

    def feed(self, msg: dict[str, Any]) -> None:
        """Take one iopub message (already deserialized, as jupyter_client gives it).

        A message of the wrong shape is counted in :attr:`malformed` and dropped.
        """
        try:
            self._feed(msg)
        except Exception:  # the kernel's garbage must not end the host's run
            self.malformed += 1

    def _feed(self, msg: dict[str, Any]) -> None:
        msg_type = msg["header"]["msg_type"]
        content = msg["content"]
        if not isinstance(msg_type, str) or not isinstance(content, dict):
            raise TypeError("not a message")
        if msg_type == "execute_input":
            self.execution_count = _count(content.get("execution_count"))
        elif msg_type == "clear_output":
            if content.get("wait"):
                self._clear_pending = True
            else:
                self._clear()
        elif msg_type == "update_display_data":
            self._update_display(_checked_bundle(content))
        elif msg_type in _OUTPUT_TYPES:
            _check_output(msg_type, content)
            if self._clear_pending:
                self._clear()
            self._add(msg_type, msg)

    def _clear(self) -> None:
        # cleared outputs leave the display map too, or an animation keeps every frame
        gone = {id(node) for node in self._head}
        gone.update(id(node) for node, _ in self._tail)
        self._forget(gone)
        self._head.clear()
        self._tail.clear()
        self._head_chars = self._tail_chars = 0
        self._omitted_outputs = self._omitted_chars = 0
        self._open = None
        self._clear_pending = False

    def _forget(self, gone: set[int]) -> None:
        """Take the nodes whose ids are in ``gone`` out of the display map."""
        for display_id, nodes in list(self.display_map.items()):
            nodes[:] = [node for node in nodes if id(node) not in gone]
            if not nodes:
                del self.display_map[display_id]

    # ------------------------------------------------------------ the budget
    def _place(self, node: NotebookNode) -> None:
        """Keep ``node`` in the head while it has room, else at the end of the tail."""
        half = self.max_outputs // 2
        head_full = self._head_chars >= self.max_cell_chars // 2 or len(self._head) >= half
        if not self._tail and not head_full:
            self._head.append(node)
        else:
            self._tail.append((node, 0))
            self._trim()

    def _account(self, node: NotebookNode, size: int) -> None:
        """Count ``size`` characters for ``node`` (the newest output); drop old tail outputs."""
        if self._head and self._head[-1] is node:
            self._head_chars += size
        elif self._tail and self._tail[-1][0] is node:
            self._tail[-1] = (node, size)
            self._tail_chars += size
            self._trim()

    def _trim(self) -> None:
        """Drop the tail's oldest outputs past its share of characters and outputs."""
        budget, half = self.max_cell_chars - self.max_cell_chars // 2, self.max_outputs // 2
        gone: set[int] = set()
        while len(self._tail) > 1 and (self._tail_chars > budget or len(self._tail) > half):
            old, old_size = self._tail.popleft()
            self._tail_chars -= old_size
            self._omitted_outputs += 1
            self._omitted_chars += old_size
            gone.add(id(old))
        if gone:
            self._forget(gone)

    def _close_stream(self) -> None:
        """Write the open stream's text into its node and let its buffer go."""
        if self._open is not None:
            node, buffer = self._open
            node.text = buffer.text
            self._open = None
            self._account(node, len(node.text))

    # -------------------------------------------------------------- outputs
    def _add(self, msg_type: str, msg: dict[str, Any]) -> None:
        content = msg["content"]
        if msg_type == "stream":
            self._add_stream(content["name"], content.get("text", ""))
            return
        node = output_from_msg({"header": {"msg_type": msg_type}, "content": content})
        if msg_type == "execute_result":
            self.execution_count = _count(content.get("execution_count"), self.execution_count)
            node.execution_count = _count(node.get("execution_count"))
        if msg_type == "error":
            self.error = CellError(node.ename, node.evalue, list(node.traceback))
        if "data" in node:
            self._bound_data(node)
        display_id = (content.get("transient") or {}).get("display_id")
        self._close_stream()
        if isinstance(display_id, str) and display_id:
            # as in Jupyter: a new display with a known id also updates the earlier ones
            self._patch_display(display_id, node)
            self._remember(display_id, node)
        self._place(node)
        size = _size(node)
        self._account(node, size)
        self._notify(node, size)

    def _add_stream(self, name: str, chunk: str) -> None:
        if self._open is None or self._open[0].name != name:
            self._close_stream()
            node = NotebookNode(output_type="stream", name=name, text="")
            self._place(node)
            self._open = (node, _BoundedText(self.max_chars))
        self._open[1].append(chunk)
        if self._on_output is not None and not self._live_stopped:
            room = max(0, self.max_cell_chars // 2 - self._live_chars)
            piece = NotebookNode(output_type="stream", name=name, text=chunk[:room])
            self._notify(piece, len(chunk))

    def _remember(self, display_id: str, node: NotebookNode) -> None:
        """Put ``node`` in the display map, which keeps the newest MAX_DISPLAY_NODES."""
        self.display_map.setdefault(display_id, []).append(node)
        total = sum(len(nodes) for nodes in self.display_map.values())
        while total > MAX_DISPLAY_NODES:
            oldest = next(iter(self.display_map))
            nodes = self.display_map[oldest]
            nodes.pop(0)
            if not nodes:
                del self.display_map[oldest]
            total -= 1

    def _update_display(self, content: dict[str, Any]) -> None:
        display_id = (content.get("transient") or {}).get("display_id") or ""
        if not isinstance(display_id, str) or not self.display_map.get(display_id):
            return
        patch = output_from_msg({"header": {"msg_type": "display_data"}, "content": content})
        self._bound_data(patch)
        self._patch_display(display_id, patch)
        self._notify(patch, _size(patch))

    def _patch_display(self, display_id: str, patch: NotebookNode) -> None:
        for node in self.display_map.get(display_id, []):
            node.data = patch.data
            node.metadata = patch.metadata

    def _bound_data(self, node: NotebookNode) -> None:
        """Cut text/plain to ``max_chars``; drop other MIME data past ``max_chars`` in all."""
        dropped = []
        sizes = {mime: _value_size(value) for mime, value in node.data.items()}
        others = sum(size for mime, size in sizes.items() if mime not in _TEXT_MIMES)
        for mime in sorted(sizes, key=sizes.__getitem__, reverse=True):
            size, value = sizes[mime], node.data[mime]
            if mime in _TEXT_MIMES and isinstance(value, str):
                if size > self.max_chars:
                    bounded = _BoundedText(self.max_chars)
                    bounded.append(value)
                    node.data[mime] = bounded.text
            elif size > self.max_chars or others > self.max_chars:
                del node.data[mime]
                others -= size
                dropped.append(f"{mime} ({size:,} characters)")
        if dropped:
            note = f"[kernel-agent: omitted oversized {', '.join(dropped)}]"
            plain = node.data.get("text/plain", "")
            node.data["text/plain"] = f"{plain}\n{note}" if plain else note

    def _notify(self, node: NotebookNode, size: int) -> None:
        if self._on_output is None or self._live_stopped:
            return
        self._live_chars += size
        if self._live_chars > self.max_cell_chars // 2:
            self._live_stopped = True
            if node.output_type == "stream" and node.text:
                self._on_output(node)  # the part that fits (cut by the caller)
            self._on_output(_note(live_note(self.max_cell_chars // 2)))
            return
        self._on_output(node)


#: the executor's note for a cell whose idle or reply never came (see executors/kernel.py)
LOST_END_NOTE = (
    "[kernel-agent: the end of this cell's messages was lost (one over the size bound, "
    "or dropped in a flood); what came is kept]\n"
)


def omitted_note(outputs: int, chars: int) -> str:
    return (
        f"[kernel-agent: {outputs:,} outputs ({chars:,} characters) omitted here: "
        "a cell keeps the head and the tail of its outputs]\n"
    )


def malformed_note(count: int) -> str:
    return f"[kernel-agent: {count:,} malformed kernel messages were dropped]\n"


def live_note(chars: int) -> str:
    return (
        f"[kernel-agent: more than {chars:,} characters of output; the rest is not shown "
        "as it comes (the notebook keeps the head and the tail)]\n"
    )


def _note(text: str) -> NotebookNode:
    return NotebookNode(output_type="stream", name="stderr", text=text)


def _value_size(value: Any) -> int:
    return len(value) if isinstance(value, str) else len(json.dumps(value))


def _size(node: NotebookNode) -> int:
    """About how many characters ``node`` adds to a notebook."""
    if node.output_type == "stream":
        return len(node.get("text", ""))
    if node.output_type == "error":
        return sum(len(line) for line in node.get("traceback", ())) + len(node.get("evalue", ""))
    return sum(_value_size(value) for value in node.get("data", {}).values()) + len(
        json.dumps(node.get("metadata", {}))
    )


def _count(value: Any, default: int | None = None) -> int | None:
    """An execution count as nbformat wants it (a non-negative int), else ``default``."""
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return value
    return default


def _check_output(msg_type: str, content: dict[str, Any]) -> None:
    """Raise TypeError unless ``content`` makes a valid nbformat output of ``msg_type``."""
    if msg_type == "stream":
        if not isinstance(content.get("name"), str) or not isinstance(content.get("text", ""), str):
            raise TypeError("stream")
    elif msg_type == "error":
        traceback = content.get("traceback", [])
        if not (
            isinstance(content.get("ename"), str)
            and isinstance(content.get("evalue"), str)
            and isinstance(traceback, list)
            and all(isinstance(line, str) for line in traceback)
        ):
            raise TypeError("error")
    else:
        _checked_bundle(content)


def _checked_bundle(content: dict[str, Any]) -> dict[str, Any]:
    """``content`` if its data, metadata and transient have nbformat's shapes; else TypeError."""
    data, metadata = content.get("data", {}), content.get("metadata", {})
    transient = content.get("transient") or {}
    if not isinstance(data, dict) or not isinstance(metadata, dict):
        raise TypeError("bundle")
    if not isinstance(transient, dict):
        raise TypeError("transient")
    for mime, value in data.items():
        if not isinstance(mime, str):
            raise TypeError("mime")
        if _JSON_MIME.match(mime):
            continue
        if isinstance(value, list) and all(isinstance(part, str) for part in value):
            continue
        if not isinstance(value, str):
            raise TypeError("mime value")
    return content
