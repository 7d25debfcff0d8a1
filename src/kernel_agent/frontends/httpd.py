"""The one HTTP server runner under ``serve``, ``mcp --http`` and ``observe``.

uvicorn alone holds a connection that never finishes its request head for ever, lets
``accept()`` run into the process's file limit (then logs a traceback per attempt), and
reads an upload's body with no timeout. :func:`build_server` gives every server:

- **a request-head timeout**: a connection must complete its request head within
  ``client_timeout`` seconds of opening (or of its previous response), else 408 and close;
- **a body timeout**: while the app waits for the next piece of a request body, it waits
  at most ``client_timeout`` seconds (then 408, and the app sees a disconnect);
- **a reader timeout**: a client that reads nothing of its response for ``client_timeout``
  seconds while the server has more than the socket's buffer to send is dropped (an
  event stream nobody reads holds no memory);
- **a cap on connections**, global and per client address, below the file limit: when
  full, the oldest *idle* connection (no request in progress: silent, half-sent head,
  keep-alive) is closed to make room; when none is idle the newcomer gets 503 at once;
- **the soft ``RLIMIT_NOFILE`` raised to the hard limit** at start, and a listen backlog
  sized so one burst of accepts cannot reach it;
- **logs that cannot flood**: each kind of message at most a few times per 10 s (with a
  count of what was left out), and a traceback becomes one line (``--log-level DEBUG``
  keeps them).

uvicorn's own ``limit_concurrency`` is not used: it counts idle connections too and only
answers (503) once a request head has arrived, so under a flood of silent connections
it refuses the real clients, not the flood.

On SIGTERM the server first awaits ``on_stop`` (interrupt the running cells, so their
requests are answered with what they printed), then stops the usual way.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import resource
import sys
import threading
import time
from collections import Counter, OrderedDict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, ClassVar

from ..errors import ConfigError

__all__ = [
    "HttpLimits",
    "ConnectionTable",
    "guarded_protocol",
    "add_http_options",
    "argv_secret_warning",
    "build_server",
    "limits_from_args",
    "raise_fd_limit",
    "QuietLogs",
]

log = logging.getLogger(__name__)

#: the soft file limit is raised at most this far (a huge limit buys nothing here)
_FD_CEILING = 1 << 16


@dataclass(frozen=True)
class HttpLimits:
    """What one client may hold of a server. ``None`` caps come from the file limit."""

    client_timeout: float = 15.0
    max_connections: int | None = None
    per_client: int | None = None
    keep_alive: int = 5


def add_http_options(parser: Any) -> None:
    """``--client-timeout`` and ``--max-connections`` (the same on every server)."""
    parser.add_argument(
        "--client-timeout", type=float, default=HttpLimits.client_timeout, metavar="S",
        help="seconds a client may take to send its request head, to send the next piece of "
        "a body, or to read what it was sent, before it is dropped (default 15)",
    )  # fmt: skip
    parser.add_argument(
        "--max-connections", type=int, default=None, metavar="N",
        help="open connections at most (default, and ceiling: half of what the file limit "
        "leaves); when full, the oldest idle one is closed, or the newcomer gets 503",
    )  # fmt: skip


def limits_from_args(args: argparse.Namespace) -> HttpLimits:
    timeout = float(getattr(args, "client_timeout", HttpLimits.client_timeout))
    if not 0 < timeout <= 3600:
        raise ConfigError(f"--client-timeout must be between 0 and 3600 s, got {timeout:g}")
    most = getattr(args, "max_connections", None)
    if most is not None and most < 2:
        raise ConfigError(f"--max-connections must be at least 2, got {most}")
    return HttpLimits(client_timeout=timeout, max_connections=most)


def raise_fd_limit() -> int:
    """Raise the soft ``RLIMIT_NOFILE`` to the hard limit (at most 65536); returns it."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = _FD_CEILING if hard == resource.RLIM_INFINITY else min(hard, _FD_CEILING)
    if soft != resource.RLIM_INFINITY and soft < want:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))
            soft = want
        except (OSError, ValueError):
            pass
    return int(min(soft, _FD_CEILING)) if soft != resource.RLIM_INFINITY else _FD_CEILING


def caps(fd_limit: int, limits: HttpLimits) -> tuple[int, int, int]:
    """(connections, per client address, listen backlog) that stay clear of ``fd_limit``.

    One event-loop tick accepts up to ``backlog`` sockets before any is closed, and the
    process needs files of its own (kernels, uploads, logs): connections get at most
    half of what the backlog leaves. The backlog is never more than one client's share,
    so one burst of accepts cannot push out a connection accepted with it before its
    request head is read."""
    backlog = max(16, min(1024, fd_limit // 8))
    safe = max(8, min(4096, (fd_limit - backlog) // 2))
    total = min(limits.max_connections or safe, safe)
    per_client = min(limits.per_client or max(4, total // 2), total)
    return total, per_client, max(1, min(backlog, per_client - 1))


# ------------------------------------------------------------------ connections
class ConnectionTable:
    """Every open connection, which of them are idle (oldest first), and per address."""

    def __init__(self, total: int, per_client: int) -> None:
        self.total, self.per_client = total, per_client
        self._address: dict[Any, str] = {}
        self._idle: OrderedDict[Any, None] = OrderedDict()
        self._count: Counter[str] = Counter()
        self.evicted = 0
        self.refused = 0

    def __len__(self) -> int:
        return len(self._address)

    def admit(self, conn: Any, address: str) -> bool:
        """Make room for ``conn`` (closing the oldest idle one) or say no."""
        if len(self._address) >= self.total and not self._evict(None):
            self.refused += 1
            return False
        if self._count[address] >= self.per_client and not self._evict(address):
            self.refused += 1
            return False
        self._address[conn] = address
        self._count[address] += 1
        self._idle[conn] = None
        return True

    def busy(self, conn: Any) -> None:
        self._idle.pop(conn, None)

    def idle(self, conn: Any) -> None:
        if conn in self._address:
            self._idle.pop(conn, None)
            self._idle[conn] = None  # the newest idle one

    def remove(self, conn: Any) -> None:
        address = self._address.pop(conn, None)
        self._idle.pop(conn, None)
        if address is not None:
            self._count[address] -= 1
            if self._count[address] <= 0:
                del self._count[address]

    def _evict(self, address: str | None) -> bool:
        for conn in self._idle:
            if address is None or self._address.get(conn) == address:
                self.remove(conn)
                conn.close_idle()
                self.evicted += 1
                return True
        return False


_RETRY = b"retry-after: 1\r\n"


def _raw_response(status: str, error: str, extra: bytes = b"") -> bytes:
    body = json.dumps({"error": error}).encode()
    return (
        f"HTTP/1.1 {status}\r\ncontent-type: application/json\r\n"
        f"content-length: {len(body)}\r\nconnection: close\r\n".encode()
        + extra
        + b"\r\n"
        + body
    )


def guarded_protocol(table: ConnectionTable, client_timeout: float) -> type[Any]:
    """uvicorn's h11 protocol with a head timeout, a reader timeout and ``table``
    (made here: uvicorn is imported only by a command that serves)."""
    import h11
    from uvicorn.protocols.http.h11_impl import H11Protocol

    class GuardedH11Protocol(H11Protocol):
        _table: ClassVar[ConnectionTable]
        _timeout: ClassVar[float]

        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            super().connection_made(transport)
            self._head_timer: asyncio.TimerHandle | None = None
            self._write_timer: asyncio.TimerHandle | None = None
            if not self._table.admit(self, self.client[0] if self.client else ""):
                log.warning(
                    "connection limit (%d) reached: a new connection got 503", len(self._table)
                )
                busy = "too many connections; try again later"
                transport.write(_raw_response("503 Service Unavailable", busy, _RETRY))
                transport.close()
                return
            self._arm_head()

        def connection_lost(self, exc: Exception | None) -> None:
            self._table.remove(self)
            self._cancel_timers()
            super().connection_lost(exc)

        def _cancel_timers(self) -> None:
            for timer in (getattr(self, "_head_timer", None), getattr(self, "_write_timer", None)):
                if timer is not None:
                    timer.cancel()
            self._head_timer = self._write_timer = None

        def _idle_now(self) -> bool:
            return self.cycle is None or self.cycle.response_complete

        # the request head ------------------------------------------------------
        def _arm_head(self) -> None:
            if self._head_timer is not None:
                self._head_timer.cancel()
            self._head_timer = self.loop.call_later(self._timeout, self._head_expired)

        def _head_expired(self) -> None:
            self._head_timer = None
            if self.transport.is_closing() or not self._idle_now():
                return
            self._table.remove(self)
            if self.conn.their_state is h11.IDLE and self.conn.our_state is h11.IDLE:
                self.transport.write(_raw_response("408 Request Timeout", "the request head took "
                                                   "too long"))  # fmt: skip
            self.transport.close()

        def close_idle(self) -> None:
            """Closed to make room for a newer connection (this one had no request going)."""
            self._cancel_timers()
            if not self.transport.is_closing():
                self.transport.close()

        def handle_events(self) -> None:
            before = self.cycle
            super().handle_events()
            if self.cycle is not before and not self._idle_now():  # a request head arrived
                if self._head_timer is not None:
                    self._head_timer.cancel()
                    self._head_timer = None
                self._table.busy(self)

        def on_response_complete(self) -> None:
            super().on_response_complete()
            if not self.transport.is_closing() and self._idle_now():
                self._table.idle(self)
                self._arm_head()  # data does not reset it: a trickle of bytes does not either

        # the reader --------------------------------------------------------------
        def pause_writing(self) -> None:
            super().pause_writing()
            if self._write_timer is None:
                self._write_timer = self.loop.call_later(self._timeout, self.transport.abort)

        def resume_writing(self) -> None:
            super().resume_writing()
            if self._write_timer is not None:
                self._write_timer.cancel()
                self._write_timer = None

    GuardedH11Protocol._table = table
    GuardedH11Protocol._timeout = client_timeout
    return GuardedH11Protocol


# ------------------------------------------------------------------------ bodies
class BodyTimeout:
    """ASGI middleware: a request body's next piece must come within ``timeout`` seconds
    of the app asking for it; else the client gets 408 and the app a disconnect."""

    def __init__(self, app: Any, timeout: float) -> None:
        self.app = app
        self.timeout = timeout

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        body_done = started = answered = False

        async def timed_receive() -> Any:
            nonlocal body_done, answered
            if body_done or answered:
                return await receive()
            try:
                message = await asyncio.wait_for(receive(), self.timeout)
            except asyncio.TimeoutError:
                if not started:
                    answered = True
                    data = json.dumps({"error": "the request body stalled"}).encode()
                    await send({"type": "http.response.start", "status": 408, "headers": [
                        (b"content-type", b"application/json"), (b"connection", b"close"),
                        (b"content-length", str(len(data)).encode())]})  # fmt: skip
                    await send({"type": "http.response.body", "body": data})
                return {"type": "http.disconnect"}
            if message["type"] != "http.request" or not message.get("more_body", False):
                body_done = True
            return message

        async def guarded_send(message: Any) -> None:
            nonlocal started
            if answered:
                return  # the client was told 408
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        await self.app(scope, timed_receive, guarded_send)


# -------------------------------------------------------------------------- logs
class QuietLogs(logging.Filter):
    """At most ``burst`` records of one kind (logger and message template) per ``window``
    seconds; each kept record is one line (its traceback becomes ``Type: message``)."""

    def __init__(self, burst: int = 5, window: float = 10.0, tracebacks: bool = False) -> None:
        super().__init__()
        self.burst, self.window, self.tracebacks = burst, window, tracebacks
        self._seen: dict[tuple[str, str], list[float]] = {}
        self._lock = threading.Lock()

    def filter(self, record: logging.LogRecord) -> bool:
        key = (record.name, str(record.msg).split("\n", 1)[0][:120])
        now = time.monotonic()
        with self._lock:
            if len(self._seen) > 1000:
                self._seen.clear()
            start, count, dropped = self._seen.get(key, [now, 0, 0])
            left_out = 0
            if now - start > self.window:
                start, count, left_out, dropped = now, 0, int(dropped), 0
            count += 1
            if count > self.burst:
                self._seen[key] = [start, count, dropped + 1]
                return False
            self._seen[key] = [start, count, dropped]
        text = record.getMessage()
        if record.exc_info and not self.tracebacks:
            exc = record.exc_info[1]
            if exc is not None:
                text = f"{text.strip()}: {type(exc).__name__}: {exc}"
            record.exc_info, record.exc_text = None, None
        if not self.tracebacks:
            text = " | ".join(line for line in text.splitlines() if line.strip())[:2000]
        if left_out:
            text += f" ({left_out} more like this in the {self.window:g} s before)"
        record.msg, record.args = text, None
        return True


def quiet_logs(level: str | int = "WARNING") -> None:
    """Root gets a stderr handler if it has none; every root handler gets :class:`QuietLogs`."""
    root = logging.getLogger()
    if not root.handlers:
        logging.basicConfig(
            level=level, format="%(levelname)s %(name)s: %(message)s", stream=sys.stderr
        )
    tracebacks = logging.getLevelName(level) == logging.DEBUG or level == "DEBUG"
    for handler in root.handlers:
        if not any(isinstance(f, QuietLogs) for f in handler.filters):
            handler.addFilter(QuietLogs(tracebacks=tracebacks))


# ------------------------------------------------------------------------ server
def build_server(
    app: Any,
    *,
    host: str,
    port: int,
    limits: HttpLimits | None = None,
    on_stop: Callable[[], Awaitable[None]] | None = None,
    graceful_s: float | None = None,
    log_level: str | int = "WARNING",
) -> Any:
    """The uvicorn server for ``app`` with every bound above (call ``.serve()`` or ``.run()``)."""
    limits = limits or HttpLimits()
    quiet_logs(log_level)
    total, per_client, backlog = caps(raise_fd_limit(), limits)
    protocol = guarded_protocol(ConnectionTable(total, per_client), limits.client_timeout)
    import uvicorn

    class StoppingServer(uvicorn.Server):
        async def shutdown(self, sockets: Any = None) -> None:
            if on_stop is not None:
                try:
                    await on_stop()
                except Exception:  # noqa: BLE001 - stopping goes on whatever happened
                    log.exception("while interrupting the running cells")
            await super().shutdown(sockets)

    config = uvicorn.Config(
        BodyTimeout(app, limits.client_timeout), host=host, port=port, http=protocol,
        log_config=None, log_level="warning", lifespan="on", backlog=backlog,
        timeout_keep_alive=limits.keep_alive,
        timeout_graceful_shutdown=None if graceful_s is None else max(1, round(graceful_s)),
    )  # fmt: skip
    return StoppingServer(config)


def argv_secret_warning(command: str, flag: str, env: str) -> str:
    """The warning for a secret given on the command line (``/proc/PID/cmdline`` is 0444)."""
    return (
        f"kernel-agent {command}: warning: a token given with {flag} is visible to other users "
        f"of this machine (in the process list); prefer the {env} environment variable"
    )
