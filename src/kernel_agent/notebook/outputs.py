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
- every field an output keeps is bounded before it is kept (an error's ``ename``,
  ``evalue`` and ``traceback``, ``metadata``, the execution count), and the whole
  output is then measured as it will be serialised (:func:`~.bounds.json_size`): one
  over the per-output bound becomes a note. A display update is charged once per
  output it lands in; a :class:`~.bounds.RunBudget` shared by a run's cells bounds
  them all (:meth:`OutputCollector.finish` charges a cell to it), and once it is spent
  a cell keeps only ``max_chars // 50`` characters and a note of what it omitted;
- what the kernel sends is hostile: a message of the wrong shape is dropped and
  counted (:attr:`OutputCollector.malformed`), never raised, and a note says so.
"""

from __future__ import annotations

import re
from collections import deque
from collections.abc import Callable
from typing import Any

from nbformat import NotebookNode
from nbformat.v4 import output_from_msg

from ..results import CellError
from .bounds import (
    MAX_METADATA_CHARS,
    RunBudget,
    bounded_metadata,
    cut_lines,
    cut_text,
    json_size,
    sane_count,
    truncation_marker,
)

__all__ = [
    "OutputCollector",
    "resolve_control_chars",
    "truncation_marker",
    "DisplayMap",
    "MAX_DISPLAY_NODES",
    "LOST_END_NOTE",
    "MAX_METADATA_CHARS",
]

DisplayMap = dict[str, list[NotebookNode]]

_BACKSPACE = re.compile("[^\n\x08]\x08")
_OUTPUT_TYPES = ("stream", "display_data", "execute_result", "error")
_TEXT_MIMES = ("text/plain",)
_LINE_CAP = 65536
_JSON_MIME = re.compile(r"^application/(.*\+)?json$")
#: outputs the display map keeps patchable, across cells (an update rewrites each one)
MAX_DISPLAY_NODES = 32
_MAX_NAME = 200  # an error's ename
_MAX_DISPLAY_ID = 256
_STREAM_NAMES = ("stdout", "stderr")


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
        run_budget: RunBudget | None = None,
    ) -> None:
        self.max_chars = max_chars
        #: characters kept for the whole cell (default 8 x ``max_chars``), at most
        #: what is left of the run's budget
        self.max_cell_chars = 8 * max_chars if max_cell_chars is None else max_cell_chars
        self.run_budget = run_budget
        #: whether the run's budget, not the cell's, sets this cell's bound
        self.run_short = run_budget is not None and run_budget.left < self.max_cell_chars
        if run_budget is not None:
            # once the run's budget is spent a cell still keeps a little, so the model
            # is never blind: a run keeps its budget plus this floor per later cell
            floor = min(self.max_cell_chars, max_chars // 50)
            self.max_cell_chars = min(self.max_cell_chars, max(run_budget.left, floor))
        #: one output (serialised, all fields) past this becomes a note
        self.max_output_size = 3 * max_chars + 65536
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
        # display updates charged to this cell (once per output they land in)
        self._patched_chars = 0
        # characters refused past the cell's or the run's budget, and those charged
        self._refused_chars = 0
        self._charged = 0

    @property
    def outputs(self) -> list[NotebookNode]:
        """The cell's outputs so far, as nbformat NotebookNodes (a new list each time)."""
        if self._open is not None:
            node, buffer = self._open
            node.text = buffer.text
        outputs = list(self._head)
        if self._omitted_outputs:
            note = omitted_note(self._omitted_outputs, self._omitted_chars, self.run_short)
            outputs.append(_note(note))
        outputs.extend(node for node, _ in self._tail)
        if self._refused_chars:
            outputs.append(_note(refused_note(self._refused_chars, self.run_short)))
        if self.malformed:
            outputs.append(_note(malformed_note(self.malformed)))
        outputs.extend(_note(text) for text in self.notes)
        return outputs

    @property
    def kept_chars(self) -> int:
        """The characters this cell keeps (its outputs and the updates it applied)."""
        open_chars = 0
        if self._open is not None:
            open_chars = json_size(self._open[1].text)
        return self._head_chars + self._tail_chars + self._patched_chars + open_chars

    def finish(self) -> list[NotebookNode]:
        """The cell's outputs, its open stream closed and what it keeps charged to the run."""
        self._close_stream()
        if self.run_budget is not None:
            # what was shown live is kept too by whoever listens (serve's event log)
            kept = max(self.kept_chars, min(self._live_chars, self.max_cell_chars // 2))
            self.run_budget.charge(kept - self._charged)
            self._charged = kept
        return self.outputs

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
            self.execution_count = sane_count(content.get("execution_count"))
        elif msg_type == "clear_output":
            if content.get("wait"):
                self._clear_pending = True
            else:
                self._clear()
        elif msg_type == "update_display_data":
            bundle = self._bounded("display_data", _checked_bundle(content))
            self._update_display(_display_id(content), bundle)
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
            if self._head_chars + size <= self.max_cell_chars // 2:
                self._head_chars += size
                return
            self._head.pop()  # over the head's share: it is the tail's first output
            self._tail.append((node, size))
            self._tail_chars += size
            self._trim()
        elif self._tail and self._tail[-1][0] is node:
            self._tail[-1] = (node, size)
            self._tail_chars += size
            self._trim()

    def _trim(self) -> None:
        """Drop the tail's oldest outputs past its share of characters and outputs."""
        budget = max(0, self.max_cell_chars - self.max_cell_chars // 2 - self._patched_chars)
        half = self.max_outputs // 2
        gone: set[int] = set()
        while self._tail and (self._tail_chars > budget or len(self._tail) > half):
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
            size = json_size(node, self.max_output_size)
            if size > self.max_output_size:
                # short lines or escapes make text this long serialised: keep less of it
                shorter = _BoundedText(max(1, len(node.text) * self.max_output_size // size // 2))
                shorter.append(node.text)
                node.text = shorter.text
                size = json_size(node)
            self._account(node, size)

    # -------------------------------------------------------------- outputs
    def _add(self, msg_type: str, msg: dict[str, Any]) -> None:
        content = msg["content"]
        if msg_type == "stream":
            self._add_stream(content["name"], content.get("text", ""))
            return
        bounded = self._bounded(msg_type, content)
        node = output_from_msg({"header": {"msg_type": msg_type}, "content": bounded})
        if msg_type == "execute_result":
            self.execution_count = sane_count(node.execution_count, self.execution_count)
        size = json_size(node, self.max_output_size)
        if size > self.max_output_size:  # a field nothing above bounds: not kept
            node = _note(oversized_note(self.max_output_size))
            size = json_size(node)
        elif msg_type == "error":
            self.error = CellError(node.ename, node.evalue, list(node.traceback))
        display_id = _display_id(content)
        self._close_stream()
        if display_id and node.output_type != "stream":
            # as in Jupyter: a new display with a known id also updates the earlier ones
            self._patch_display(display_id, node, size)
            self._remember(display_id, node)
        self._place(node)
        self._account(node, size)
        self._notify(node, size)

    def _bounded(self, msg_type: str, content: dict[str, Any]) -> dict[str, Any]:
        """A new content holding only the fields nbformat keeps of ``content``, each
        bounded: what no field of a kernel's message may make the host keep more of."""
        if msg_type == "error":
            return {
                "ename": cut_text(content["ename"], _MAX_NAME),
                "evalue": cut_text(content["evalue"], self.max_chars // 4),
                "traceback": cut_lines(content.get("traceback", []), self.max_chars // 2),
            }
        data = self._bound_data(dict(content.get("data", {})))
        metadata, dropped = bounded_metadata(content.get("metadata", {}))
        if dropped:
            note = f"[kernel-agent: omitted output metadata of more than {dropped:,} characters]"
            plain = data.get("text/plain", "")
            data["text/plain"] = f"{plain}\n{note}" if isinstance(plain, str) and plain else note
        bounded: dict[str, Any] = {"data": data, "metadata": metadata}
        if msg_type == "execute_result":
            bounded["execution_count"] = sane_count(content.get("execution_count"))
        return bounded

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

    def _update_display(self, display_id: str, content: dict[str, Any]) -> None:
        if not display_id or not self.display_map.get(display_id):
            return
        patch = output_from_msg({"header": {"msg_type": "display_data"}, "content": content})
        size = json_size(patch, self.max_output_size)
        if size > self.max_output_size:
            self._refused_chars += size
            return
        if self._patch_display(display_id, patch, size):
            self._notify(patch, size)

    def _patch_display(self, display_id: str, patch: NotebookNode, size: int) -> bool:
        """Give every output shown under ``display_id`` the data and metadata of
        ``patch``, charging ``size`` once per output to this cell; refuse the update
        (and count it) when the cell's share for updates cannot pay for every copy."""
        targets = self.display_map.get(display_id, [])
        cost = size * len(targets)
        if not targets:
            return False
        if self._patched_chars + cost > self.max_cell_chars // 2:
            self._refused_chars += cost
            return False
        self._patched_chars += cost
        for node in targets:
            node.data = patch.data
            node.metadata = patch.metadata
        self._trim()
        return True

    def _bound_data(self, data: dict[str, Any]) -> dict[str, Any]:
        """Cut text/plain to ``max_chars``; drop other MIME data past ``max_chars`` in all."""
        dropped = []
        sizes = {mime: json_size(value, self.max_chars) for mime, value in data.items()}
        others = sum(size for mime, size in sizes.items() if mime not in _TEXT_MIMES)
        for mime in sorted(sizes, key=sizes.__getitem__, reverse=True):
            size, value = sizes[mime], data[mime]
            if mime in _TEXT_MIMES and isinstance(value, str):
                if size > self.max_chars:
                    bounded = _BoundedText(self.max_chars)
                    bounded.append(value)
                    data[mime] = bounded.text
            elif size > self.max_chars or others > self.max_chars:
                del data[mime]
                others -= size
                shown = min(size, self.max_chars)
                dropped.append(f"{cut_text(mime, 80)} (more than {shown:,} characters)")
        if dropped:
            note = f"[kernel-agent: omitted oversized {', '.join(dropped)}]"
            plain = data.get("text/plain", "")
            data["text/plain"] = f"{plain}\n{note}" if isinstance(plain, str) and plain else note
        return data

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


def omitted_note(outputs: int, chars: int, run_spent: bool = False) -> str:
    why = (
        "the run's output budget is spent"
        if run_spent
        else "a cell keeps the head and the tail of its outputs"
    )
    return f"[kernel-agent: {outputs:,} outputs ({chars:,} characters) omitted here: {why}]\n"


def malformed_note(count: int) -> str:
    return f"[kernel-agent: {count:,} malformed kernel messages were dropped]\n"


def live_note(chars: int) -> str:
    return (
        f"[kernel-agent: more than {chars:,} characters of output; the rest is not shown "
        "as it comes (the notebook keeps the head and the tail)]\n"
    )


def _note(text: str) -> NotebookNode:
    return NotebookNode(output_type="stream", name="stderr", text=text)


def refused_note(chars: int, run_spent: bool) -> str:
    whose = "the run's output budget is spent" if run_spent else "past the cell's output budget"
    return f"[kernel-agent: {chars:,} characters of output omitted: {whose}]\n"


def oversized_note(limit: int) -> str:
    return f"[kernel-agent: an output of more than {limit:,} characters was omitted]\n"


def _display_id(content: dict[str, Any]) -> str:
    """A message's display id if it is a sane one (a short string), else ""."""
    transient = content.get("transient") or {}
    display_id = transient.get("display_id") if isinstance(transient, dict) else None
    if isinstance(display_id, str) and 0 < len(display_id) <= _MAX_DISPLAY_ID:
        return display_id
    return ""


def _check_output(msg_type: str, content: dict[str, Any]) -> None:
    """Raise TypeError unless ``content`` makes a valid nbformat output of ``msg_type``."""
    if msg_type == "stream":
        if content.get("name") not in _STREAM_NAMES or not isinstance(content.get("text", ""), str):
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
