"""A notebook's shared document on a Jupyter server: :class:`SharedNotebook`.

JupyterLab with ``jupyter-collaboration`` keeps an open notebook as a Yjs document
on the server; every browser tab and every other client edits a replica, and the
CRDT merges what each wrote. This is one more replica, made with ``pycrdt`` (the
document) and ``jupyter_ydoc``'s ``YNotebook`` (the notebook's schema on it), kept
in step over the room's websocket with the Yjs sync protocol:

- at open, our state vector goes out (sync step 1) and the server's answer (step 2)
  makes us synced; its own step 1 gets our step 2;
- afterwards each side sends its updates; ours are those our own transactions
  made (an update we apply from the server is not echoed back).

The agent only **adds**: a code cell of its own at the end, then that cell's outputs,
execution count and execution state. It never deletes or rewrites a cell it did not
make, and a cell is found by its id each time (the user may move, insert or delete
cells meanwhile), so nothing the user types is overwritten.

A websocket that closes (the server went away, the room was closed) makes every
later call raise a one-line :class:`~kernel_agent.errors.JupyterError`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from collections.abc import Mapping
from typing import Any

from jupyter_ydoc import YNotebook
from pycrdt import (
    Array,
    Doc,
    Map,
    Text,
    YMessageType,
    YSyncMessageType,
    create_sync_message,
    create_update_message,
    handle_sync_message,
)

from ..errors import AuthRefused, JupyterError, Unreachable, one_line

__all__ = ["SharedNotebook", "MAX_MESSAGE_BYTES"]

log = logging.getLogger(__name__)

#: the largest websocket message taken from the server (a whole notebook's sync step 2)
MAX_MESSAGE_BYTES = 64 * 1024 * 1024
#: source characters of one existing cell shown to the model
_CELL_CHARS = 2000


class SharedNotebook:
    """A replica of one notebook's shared document, kept in step with the server's.

    ``room_url`` is the room's websocket URL (see
    :meth:`~kernel_agent.jupyter.server.JupyterServer.room_url`); ``headers`` carry
    the token. :meth:`open` connects and waits until synced; :meth:`close` sends what
    is still queued and disconnects.
    """

    def __init__(
        self, room_url: str, headers: Mapping[str, str], *, sync_timeout: float = 15.0
    ) -> None:
        self.room_url = room_url
        self.headers = dict(headers)
        self.sync_timeout = sync_timeout
        self.doc: Doc[Any] = Doc()
        self.notebook = YNotebook(self.doc)
        #: why the websocket is gone (None while connected)
        self.gone: str | None = None
        self._ws: Any = None
        self._outbox: asyncio.Queue[bytes] = asyncio.Queue()
        self._synced = asyncio.Event()
        self._applying_remote = False
        self._tasks: list[asyncio.Task[None]] = []
        self._subscription: Any = None

    # ------------------------------------------------------------ connection
    async def open(self) -> None:
        """Connect, sync, and keep in step until :meth:`close`."""
        from websockets.asyncio.client import connect
        from websockets.exceptions import InvalidStatus, WebSocketException

        where = self.room_url.split("?", 1)[0]
        try:
            self._ws = await asyncio.wait_for(
                connect(
                    self.room_url,
                    additional_headers=self.headers,
                    max_size=MAX_MESSAGE_BYTES,
                    open_timeout=self.sync_timeout,
                ),
                self.sync_timeout,
            )
        except InvalidStatus as exc:
            code = exc.response.status_code
            if code in (401, 403):
                raise AuthRefused(
                    f"the Jupyter server refused the notebook's shared document (HTTP {code})"
                ) from None
            raise JupyterError(f"no shared document at {where} (HTTP {code})") from None
        except (OSError, WebSocketException, asyncio.TimeoutError) as exc:
            reason = one_line(str(exc)) or type(exc).__name__
            raise Unreachable(f"cannot reach the notebook's shared document: {reason}") from None
        self._subscription = self.doc.observe(self._on_local_update)
        self._tasks = [
            asyncio.create_task(self._read(), name="ydoc-read"),
            asyncio.create_task(self._write(), name="ydoc-write"),
        ]
        self._outbox.put_nowait(create_sync_message(self.doc))
        try:
            await asyncio.wait_for(self._synced.wait(), self.sync_timeout)
        except asyncio.TimeoutError:
            await self.close()
            raise JupyterError(
                f"the notebook's shared document did not sync within {self.sync_timeout:g} s"
            ) from None
        self.check()

    def _on_local_update(self, event: Any) -> None:
        if not self._applying_remote:
            self._outbox.put_nowait(create_update_message(event.update))

    async def _read(self) -> None:
        try:
            async for message in self._ws:
                if not isinstance(message, bytes) or len(message) < 2:
                    continue
                if message[0] != YMessageType.SYNC:
                    continue  # awareness: who else is here; not ours to use
                self._applying_remote = True
                try:
                    reply = handle_sync_message(message[1:], self.doc)
                except Exception as exc:  # a malformed update is the server's fault
                    self.gone = f"the server sent a malformed update ({one_line(str(exc))})"
                    break
                finally:
                    self._applying_remote = False
                if message[1] == YSyncMessageType.SYNC_STEP2:
                    self._synced.set()
                if reply is not None:
                    self._outbox.put_nowait(reply)
            self.gone = self.gone or "the server closed the notebook's shared document"
        except Exception as exc:
            self.gone = f"the notebook's shared document went away ({one_line(str(exc))})"
        finally:
            self._synced.set()  # wake an open() that waits: check() then says why

    async def _write(self) -> None:
        try:
            while True:
                message = await self._outbox.get()
                try:
                    await self._ws.send(message)
                finally:
                    self._outbox.task_done()
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            self.gone = self.gone or f"the notebook's shared document went away ({exc!s:.200})"
            while not self._outbox.empty():  # nothing more can be sent: let flush() return
                self._outbox.get_nowait()
                self._outbox.task_done()

    def check(self) -> None:
        """Raise :class:`JupyterError` once the document's websocket is gone."""
        if self.gone is not None:
            raise JupyterError(self.gone)

    async def flush(self, timeout: float = 10.0) -> None:
        """Wait until our queued updates are sent (or the connection is found gone)."""
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(self._outbox.join(), timeout)
        self.check()

    async def close(self) -> None:
        """Send what is queued (briefly), then disconnect. Safe to call twice."""
        if self._ws is not None and self.gone is None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._outbox.join(), 5.0)
        if self._subscription is not None:
            with contextlib.suppress(Exception):
                self.doc.unobserve(self._subscription)
            self._subscription = None
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(BaseException):
                await task
        self._tasks = []
        if self._ws is not None:
            with contextlib.suppress(Exception):
                await self._ws.close()
            self._ws = None
        self.gone = self.gone or "closed"

    # ------------------------------------------------------------ reading
    def cells(self) -> list[dict[str, Any]]:
        """The notebook's cells now, as nbformat-like dicts (a cell that is not one is skipped:
        any client of the room can write anything into the document)."""
        cells = []
        for index in range(self.notebook.cell_number):
            try:
                cell = self.notebook.get_cell(index)
            except Exception:  # not a map, or not a shape the schema reads
                continue
            if isinstance(cell, dict):
                cells.append(cell)
        return cells

    def describe(self, limit: int = 40) -> str:
        """The notebook's cells for the model: type, execution count and source, bounded."""
        lines: list[str] = []
        cells = self.cells()
        for cell in cells[-limit:]:
            source = str(cell.get("source") or "")
            if not source.strip():
                continue
            if len(source) > _CELL_CHARS:
                source = source[:_CELL_CHARS] + f"\n... ({len(source) - _CELL_CHARS} more chars)"
            if cell.get("cell_type") == "code":
                count = cell.get("execution_count")
                label = f"In [{count}]" if isinstance(count, int) else "In [ ]"
                meta = cell.get("metadata")
                if isinstance(meta, dict) and isinstance(meta.get("kernel_agent"), dict):
                    label += " (kernel-agent's)"
                lines.append(f"{label}:\n{source}")
            else:
                lines.append(f"({cell.get('cell_type')} cell)\n{source}")
        if len(cells) > limit:
            lines.insert(0, f"({len(cells) - limit} earlier cells not shown)")
        return "\n\n".join(lines)

    # ------------------------------------------------------------ the agent's cells
    def _find(self, cell_id: str) -> Map | None:
        for ycell in self.notebook.ycells:
            if ycell.get("id") == cell_id:
                return ycell
        return None

    def add_code_cell(self, source: str, metadata: Mapping[str, Any] | None = None) -> str:
        """Append a code cell with ``source`` (nothing run yet); return its id."""
        self.check()
        cell_id = uuid.uuid4().hex[:16]
        ycell = self.notebook.create_ycell(
            {
                "id": cell_id,
                "cell_type": "code",
                "source": source,
                "metadata": dict(metadata or {}),
                "outputs": [],
                "execution_count": None,
            }
        )
        with self.doc.transaction(origin="kernel-agent"):
            self.notebook.ycells.append(ycell)
        return cell_id

    def set_state(self, cell_id: str, state: str) -> None:
        """The cell's ``execution_state`` ("running"/"idle"): JupyterLab shows ``[*]``."""
        self.check()
        ycell = self._find(cell_id)
        if ycell is not None:
            ycell["execution_state"] = state

    def append_output(self, cell_id: str, output: Mapping[str, Any]) -> None:
        """Add one output as it arrives; a stream's chunk joins the stream before it."""
        self.check()
        ycell = self._find(cell_id)
        if ycell is None:
            return  # the user deleted the cell: the transcript still has it
        outputs = ycell.get("outputs")
        if not isinstance(outputs, Array):
            return
        with self.doc.transaction(origin="kernel-agent"):
            if output.get("output_type") == "stream":
                last = outputs[len(outputs) - 1] if len(outputs) else None
                text = str(output.get("text") or "")
                ytext = last.get("text") if isinstance(last, Map) else None
                if (
                    isinstance(ytext, Text)
                    and last is not None
                    and last.get("name") == output.get("name")
                ):
                    ytext += text
                    return
                outputs.append(Map({"output_type": "stream", "name": output.get("name"),
                                    "text": Text(text)}))  # fmt: skip
                return
            outputs.append(Map(_plain(output)))

    def finish_cell(
        self, cell_id: str, outputs: list[Mapping[str, Any]], execution_count: int | None
    ) -> None:
        """The cell's final outputs (bounded, displays updated) and execution count."""
        self.check()
        ycell = self._find(cell_id)
        if ycell is None:
            return
        with self.doc.transaction(origin="kernel-agent"):
            youtputs = ycell.get("outputs")
            if isinstance(youtputs, Array):
                youtputs.clear()
                for output in outputs:
                    plain = _plain(output)
                    if plain.get("output_type") == "stream":
                        plain["text"] = Text(str(plain.get("text") or ""))
                    youtputs.append(Map(plain))
            ycell["execution_count"] = execution_count
            ycell["execution_state"] = "idle"


def _plain(output: Mapping[str, Any]) -> dict[str, Any]:
    """An output as plain JSON values (NotebookNodes are dict subclasses)."""
    import json

    value: dict[str, Any] = json.loads(json.dumps(output, default=str))
    return value
