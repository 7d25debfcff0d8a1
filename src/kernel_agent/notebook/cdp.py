"""The DevTools protocol over a pipe: just enough to drive one headless Chromium.

With ``--remote-debugging-pipe`` Chromium reads commands on its fd 3 and writes
replies and events on its fd 4, each one JSON text ended by a NUL byte. No port and
no websocket: nothing else on the machine can talk to the browser.

:class:`Frames` is the pure decoder (``feed(chunk) -> list of messages``);
:class:`Pipe` does the I/O, bounded in time (one deadline for everything) and in
size (no message over ``max_message`` bytes). Events that arrive while a command
waits go to ``on_event``, so a paused request can be answered at once.
"""

from __future__ import annotations

import json
import os
import select
import time
from collections.abc import Callable
from typing import Any

from ..errors import ExportError

__all__ = ["Frames", "Pipe"]

Message = dict[str, Any]


class Frames:
    """NUL-separated JSON messages out of a byte stream."""

    def __init__(self, max_message: int) -> None:
        self.max_message = max_message
        self._buf = bytearray()

    def feed(self, chunk: bytes) -> list[Message]:
        self._buf += chunk
        out: list[Message] = []
        while (end := self._buf.find(b"\0")) >= 0:
            raw = bytes(self._buf[:end])
            del self._buf[: end + 1]
            try:
                message = json.loads(raw)
            except ValueError:
                raise ExportError("Chromium sent a message that is not JSON") from None
            if isinstance(message, dict):
                out.append(message)
        if len(self._buf) > self.max_message:
            raise ExportError(f"Chromium sent a message over {self.max_message} bytes")
        return out


class Pipe:
    """Commands to ``write_fd``, replies and events from ``read_fd``, before ``deadline``."""

    def __init__(
        self,
        write_fd: int,
        read_fd: int,
        *,
        deadline: float,
        max_message: int = 256 * 1024 * 1024,
        on_event: Callable[[Pipe, Message], None] | None = None,
    ) -> None:
        self.write_fd, self.read_fd = write_fd, read_fd
        self.deadline = deadline
        self.on_event = on_event
        self._frames = Frames(max_message)
        self._pending: list[Message] = []
        self._next_id = 0
        os.set_blocking(write_fd, False)

    # ------------------------------------------------------------------ commands
    def send(self, method: str, params: dict[str, Any] | None = None, session: str = "") -> int:
        """Send one command; returns its id (the reply is read by :meth:`call`)."""
        self._next_id += 1
        message: Message = {"id": self._next_id, "method": method, "params": params or {}}
        if session:
            message["sessionId"] = session
        data = memoryview(json.dumps(message).encode("utf-8") + b"\0")
        while data:  # read while writing: a browser blocked on its output reads no input
            readable, writable, _ = select.select([self.read_fd], [self.write_fd], [], self._left())
            if readable:
                self._read_some()
            if writable:
                try:
                    data = data[os.write(self.write_fd, data) :]
                except BlockingIOError:
                    continue
                except BrokenPipeError:
                    raise ExportError("Chromium went away") from None
            if not readable and not writable:
                self._timeout()
        return self._next_id

    def call(
        self, method: str, params: dict[str, Any] | None = None, session: str = ""
    ) -> dict[str, Any]:
        """Send ``method`` and return its result; :class:`ExportError` for an error reply."""
        wanted = self.send(method, params, session)
        reply = self.wait(lambda m: m.get("id") == wanted)
        if "error" in reply:
            error = reply["error"]
            detail = error.get("message") if isinstance(error, dict) else error
            raise ExportError(f"Chromium refused {method}: {detail}")
        result = reply.get("result")
        return result if isinstance(result, dict) else {}

    def wait(self, wanted: Callable[[Message], bool]) -> Message:
        """The next message ``wanted`` accepts; other events go to ``on_event``."""
        while True:
            while self._pending:
                message = self._pending.pop(0)
                if wanted(message):
                    return message
                if "method" in message and self.on_event is not None:
                    self.on_event(self, message)
            readable, _, _ = select.select([self.read_fd], [], [], self._left())
            if not readable:
                self._timeout()
            self._read_some()

    # ------------------------------------------------------------------ reading
    def _read_some(self) -> None:
        try:
            chunk = os.read(self.read_fd, 1 << 20)
        except OSError as exc:
            raise ExportError(f"reading from Chromium failed: {exc.strerror}") from None
        if not chunk:
            raise ExportError("Chromium went away")
        self._pending.extend(self._frames.feed(chunk))

    def _left(self) -> float:
        left = self.deadline - time.monotonic()
        if left <= 0:
            self._timeout()
        return left

    def _timeout(self) -> None:
        raise ExportError("Chromium did not finish in time")
