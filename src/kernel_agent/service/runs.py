"""Agent runs hosted by the service, and the JSON form of cells and events.

A :class:`HostedRun` drives :meth:`Session.run_task` in a task of its own, so a
client that disconnects does not stop it; every event is kept, encoded once as its SSE
frame, and its followers (the SSE stream that started it, a later ``GET .../events``,
the web page) read those same bytes from the start or from where they are. How many
may follow, and how much each holds, is bounded by the app (``service/app.py``).
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import time
import uuid
from collections.abc import AsyncIterator
from datetime import datetime
from pathlib import Path
from typing import Any

from ..events import Event, RunResult
from ..llm.stream import Usage
from ..results import CellResult

__all__ = ["HostedRun", "cell_json", "event_json", "sse"]


def cell_json(result: CellResult) -> dict[str, Any]:
    """A CellResult as the API returns it: outputs are nbformat output dicts."""
    error = result.error
    return {
        "status": result.status,
        "execution_count": result.execution_count,
        "outputs": [dict(o) for o in result.outputs],
        "error": {"ename": error.ename, "evalue": error.evalue, "traceback": list(error.traceback)}
        if error is not None
        else None,
        "duration_s": round(result.duration, 4),
        "restarted": result.restarted,
    }


def _plain(value: Any) -> Any:
    if isinstance(value, (RunResult, Usage)):  # their own JSON form
        return value.as_dict()
    if isinstance(value, CellResult):
        return {"code": value.code, **cell_json(value)}
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, (Path, datetime)):
        return str(value)
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    return str(value)


def event_json(event: Event) -> dict[str, Any]:
    """``{"type": "CellFinished", ...fields}`` for one typed event (its ``kind``)."""
    body = _plain(event)
    return {"type": event.kind, **(body if isinstance(body, dict) else {"value": body})}


def sse(event: str, data: str) -> bytes:
    """One Server-Sent Event frame (``data`` is one line of JSON)."""
    return f"event: {event}\ndata: {data}\n\n".encode()


class HostedRun:
    """One agent run in a session: its events so far, its status and its result."""

    def __init__(self, task: str) -> None:
        self.id = uuid.uuid4().hex[:16]
        self.task = task
        self.status = "running"  # running | finished | failed | cancelled
        self.error: str | None = None
        self.result: dict[str, Any] | None = None
        #: each event's SSE frame (``event: event``), encoded once for every follower
        self.frames: list[bytes] = []
        self.followers = 0
        self.started = time.time()
        self.ended: float | None = None
        self.task_handle: asyncio.Task[None] | None = None
        self._wake = asyncio.Event()

    def info(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "task": self.task,
            "status": self.status,
            "error": self.error,
            "events": len(self.frames),
            "started": self.started,
            "ended": self.ended,
            "result": self.result,
        }

    @property
    def done(self) -> bool:
        return self.status != "running"

    def push(self, item: dict[str, Any]) -> None:
        self.frames.append(sse("event", json.dumps(item)))
        self._wake.set()
        self._wake = asyncio.Event()

    def finish(self, status: str, error: str | None = None) -> None:
        self.status, self.error, self.ended = status, error, time.time()
        self._wake.set()

    async def follow(self, start: int = 0) -> AsyncIterator[bytes]:
        """The events' SSE frames from ``start`` on, live, until the run ends."""
        index = start
        while True:
            wake = self._wake
            while index < len(self.frames):
                yield self.frames[index]
                index += 1
            if self.done:
                return
            await wake.wait()
